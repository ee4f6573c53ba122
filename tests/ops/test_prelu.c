/* PReLU (dp_prelu and nn.PReLU): values against the formula in double for
 * one slope per channel and one for all, in both layouts and for (N, C);
 * gradients of the input and of the slopes against finite differences
 * (NCHW, NHWC, (N, C)); and a model file with both module forms binds
 * PyTorch's names, shapes and init, and trains. */
#include "gradcheck.h"

#include "dp/nn.h"
#include "dp/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prelu_case {
    const char *name;
    int ndim;
    int64_t shape[4];
    int64_t nw;
    bool nhwc;
} prelu_case;

static const prelu_case cases[] = {
    {"prelu (2,3,4,5) per channel", 4, {2, 3, 4, 5}, 3, false},
    {"prelu (2,3,4,5) NHWC per channel", 4, {2, 3, 4, 5}, 3, true},
    {"prelu (2,3,4,5) one slope", 4, {2, 3, 4, 5}, 1, false},
    {"prelu (2,3,4,5) NHWC one slope", 4, {2, 3, 4, 5}, 1, true},
    {"prelu (5,7) per feature", 2, {5, 7}, 7, false},
    {"prelu (2,4,6) per channel", 3, {2, 4, 6}, 4, false},
};

/* in[0] = x, in[1] = w, in[2] = the identity 1x1 weight of an NHWC case. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const prelu_case *c = ctx;
    dp_tensor_t *x = in[0];
    if (c->nhwc) {
        int rc = dp_conv2d(&x, in[0], in[2], NULL, NULL);
        if (rc != 0)
            return rc;
    }
    return dp_prelu(out, x, in[1]);
}

static float *slopes(int64_t nw)
{
    float *w = malloc((size_t)nw * sizeof *w);
    for (int64_t i = 0; i < nw; i++)
        w[i] = 0.1f + 0.15f * (float)i; /* positive: the output's sign is the input's */
    return w;
}

static void test_values(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const prelu_case *c = &cases[k];
        dp_rng rng;
        dp_rng_init(&rng, 5, k);
        int64_t n = count(c->ndim, c->shape), C = c->shape[1], HW = n / (c->shape[0] * C);
        float *xv = normal_array(&rng, n, 1.0f), *wv = slopes(c->nw);
        float *iv = identity_1x1(C);
        int64_t ws[4] = {C, C, 1, 1};
        dp_tensor_t *in[3] = {upload(c->ndim, c->shape, xv), upload(1, &c->nw, wv),
                              upload(4, ws, iv)};
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *y;
        OK(build(&y, in, c));
        float *got = download(y);
        dp_tape_end(tape);
        dp_tape_close(tape);
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t i = 0; i < n; i++) {
            int64_t ch = (i / HW) % C;
            want[i] = xv[i] > 0 ? xv[i] : (double)wv[c->nw == 1 ? 0 : ch] * xv[i];
        }
        assert_values(c->name, got, want, n, 1e-6, 0);
        printf("%-36s values as the formula\n", c->name);
        for (int i = 0; i < 3; i++)
            dp_tensor_free(in[i]);
        free(xv), free(wv), free(iv), free(got), free(want);
    }
    /* A slope count that is neither 1 nor C is refused. */
    int64_t xs[2] = {2, 3}, two = 2;
    float v[6] = {0};
    dp_tensor_t *x = upload(2, xs, v), *w = upload(1, &two, v), *y;
    assert_int_equal(dp_prelu(&y, x, w), DP_ESHAPE);
    tu_assert_error_mentions("one slope or one per channel");
    dp_tensor_free(x), dp_tensor_free(w);
}

/* Away from 0, where the slope changes. */
static float *kink_free(dp_rng *rng, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        float u = 0.2f + 1.5f * dp_rng_uniform(rng);
        v[i] = i % 2 ? u : -u;
    }
    return v;
}

static void test_gradients(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const prelu_case *c = &cases[k];
        dp_rng rng;
        dp_rng_init(&rng, 31, k);
        int64_t C = c->shape[1], ws[4] = {C, C, 1, 1};
        gc_problem g = {.name = c->name, .build = build, .ctx = c, .kink = true};
        g.in[g.nin++] =
            input("x", c->ndim, c->shape, kink_free(&rng, count(c->ndim, c->shape)), true);
        g.in[g.nin++] = input("w", 1, &c->nw, slopes(c->nw), true);
        g.in[g.nin++] = input("id", 4, ws, identity_1x1(C), false);
        gc_run(&g);
    }
}

static const char model_text[] = "nn.Conv2d(1, 4, 3, padding=1)\n"
                                 "nn.PReLU(num_parameters=4, init=0.1)\n"
                                 "nn.MaxPool2d(2)\n"
                                 "nn.Flatten()\n"
                                 "nn.Linear(4 * 4 * 4, 16)\n"
                                 "nn.PReLU()\n"
                                 "nn.Linear(16, 3)\n"
                                 "nn.LogSoftmax(dim=1)\n";

/* The slopes are "1.weight" (4) at 0.1 and "5.weight" (1) at 0.25, as
 * PyTorch's state_dict has them; the model trains, slopes included. */
static void test_model_file_trains(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("prelu.txt");
    assert_int_equal(tu_write_file(path, model_text, strlen(model_text)), 0);
    const int64_t chw[3] = {1, 8, 8};
    const dp_model_def *def;
    OK(dp_model_def_load(&def, path, chw));
    enum { N = 24, STEPS = 120 };
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 7));
    dp_params_t *P = dp_model_params(m);
    const char *names[2] = {"1.weight", "5.weight"};
    const float inits[2] = {0.1f, 0.25f};
    const int64_t sizes[2] = {4, 1};
    float before[2][4], after[4];
    for (int k = 0; k < 2; k++) {
        int idx = dp_params_find(P, names[k]);
        assert_int_equal(idx, k == 0 ? 2 : 5); /* after the conv's weight and bias, ... */
        dp_tensor_t *t = dp_params_get(P, idx);
        assert_int_equal(dp_tensor_numel(t), sizes[k]);
        OK(dp_tensor_to_host(t, before[k], (size_t)sizes[k] * sizeof(float)));
        for (int j = 0; j < sizes[k]; j++)
            assert_true(before[k][j] == inits[k]);
    }
    float images[N * 64];
    int32_t labels[N];
    dp_rng rng;
    dp_rng_init(&rng, 3, 0);
    for (int i = 0; i < N; i++) {
        labels[i] = i % 3;
        for (int j = 0; j < 64; j++)
            images[i * 64 + j] =
                0.3f * dp_rng_normal(&rng) + (j / 8 % 3 == labels[i] ? 1.0f : -0.5f);
    }
    int64_t xs[4] = {N, 1, 8, 8}, n = N;
    dp_tensor_t *x, *y;
    OK(dp_tensor_from_host(&x, gc_dev, DP_F32, 4, xs, images));
    OK(dp_tensor_from_host(&y, gc_dev, DP_I32, 1, &n, labels));
    dp_optimizer_t *opt;
    dp_optimizer_options o;
    dp_optimizer_options_default(&o, DP_OPTIMIZER_ADAM, 0.01f);
    OK(dp_optimizer_init(&opt, P, &o));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    float first = 0, last = 0;
    for (int step = 0; step < STEPS; step++) {
        dp_tape_begin(tape);
        dp_tensor_t *logits, *loss;
        OK(dp_model_forward(m, x, true, &logits));
        OK(dp_cross_entropy(&loss, logits, y, DP_REDUCE_MEAN));
        dp_params_zero_grad(P);
        OK(dp_backward(loss));
        OK(dp_params_finish_grad(P));
        OK(dp_optimizer_step(opt, 1.0f));
        OK(dp_tensor_to_host(loss, step == 0 ? &first : &last, sizeof last));
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    OK(dp_tensor_to_host(dp_params_get(P, 2), after, 4 * sizeof(float))); /* conv w, b, 1.weight */
    printf("model file with PReLU and LogSoftmax: loss %.4f -> %.4f in %d steps; slopes of layer "
           "1 now %.3f %.3f %.3f %.3f\n",
           (double)first, (double)last, STEPS, after[0], after[1], after[2], after[3]);
    assert_true(memcmp(after, before[0], sizeof after) != 0);
    if (!(isfinite(last) && last < 0.5f * first))
        fail_msg("the loss did not go down: %g -> %g", (double)first, (double)last);
    dp_tape_close(tape);
    dp_optimizer_close(opt);
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp_model_close(m);
}

/* num_parameters must be 1 or the channels of the layer before. */
static void test_module_arguments(void **state)
{
    (void)state;
    dp_model_def *def = NULL;
    const int64_t chw[3] = {3, 8, 8};
    int rc = dp_model_def_parse(&def, "nn.Conv2d(3, 6, 3)\nnn.PReLU(5)\n", "p.txt", chw);
    assert_int_equal(rc, DP_EFORMAT);
    tu_assert_error_mentions("p.txt: line 2: ");
    tu_assert_error_mentions("expects 5 channels, the layer before gives 6");
}

static int open_device_and_tmp(void **state)
{
    return tu_setup_tmp(state) || gc_open_device(state);
}

static int close_device_and_tmp(void **state)
{
    return gc_close_device(state) | tu_teardown_tmp(state);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_model_file_trains),
        cmocka_unit_test(test_module_arguments),
    };
    return tu_run(argc, argv, tests, open_device_and_tmp, close_device_and_tmp);
}

/* Softmax and log-softmax over axis 1 (dp_softmax, dp_log_softmax, the
 * Softmax and LogSoftmax modules): values against the definition in
 * double for (N, K), (N, C, L) and (N, C, H, W) in both layouts, large
 * logits included; gradients against finite differences; the modules'
 * dim arguments. */
#include "gradcheck.h"

#include "dp/nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sm_case {
    const char *name;
    int ndim;
    int64_t shape[4];
    bool nhwc, log;
    float shift; /* added to every input: softmax must not overflow */
} sm_case;

static const sm_case cases[] = {
    {"softmax (6,10)", 2, {6, 10}, false, false, 0},
    {"log_softmax (6,10)", 2, {6, 10}, false, true, 0},
    {"softmax (6,10) logits near 1000", 2, {6, 10}, false, false, 1000.0f},
    {"log_softmax (6,10) logits near -900", 2, {6, 10}, false, true, -900.0f},
    {"softmax (2,5,3,4)", 4, {2, 5, 3, 4}, false, false, 0},
    {"softmax (2,5,3,4) NHWC", 4, {2, 5, 3, 4}, true, false, 0},
    {"log_softmax (2,5,3,4) NHWC", 4, {2, 5, 3, 4}, true, true, 0},
    {"log_softmax (3,4,7)", 3, {3, 4, 7}, false, true, 0},
};

/* in[0] = x, in[1] = the identity 1x1 weight of an NHWC case. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const sm_case *c = ctx;
    dp_tensor_t *x = in[0];
    if (c->nhwc) {
        int rc = dp_conv2d(&x, in[0], in[1], NULL, NULL);
        if (rc != 0)
            return rc;
    }
    return c->log ? dp_log_softmax(out, x) : dp_softmax(out, x);
}

static float *inputs(const sm_case *c, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 0);
    int64_t n = count(c->ndim, c->shape);
    float *v = normal_array(&rng, n, 2.0f);
    for (int64_t i = 0; i < n; i++)
        v[i] += c->shift;
    return v;
}

static void test_values(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const sm_case *c = &cases[k];
        int64_t n = count(c->ndim, c->shape), C = c->shape[1], HW = n / (c->shape[0] * C);
        float *xv = inputs(c, 9 + k), *iv = identity_1x1(C);
        int64_t ws[4] = {C, C, 1, 1};
        dp_tensor_t *in[2] = {upload(c->ndim, c->shape, xv), upload(4, ws, iv)};
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *y;
        OK(build(&y, in, c));
        float *got = download(y);
        dp_tape_end(tape);
        dp_tape_close(tape);
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t r = 0; r < c->shape[0] * HW; r++) {
            int64_t base = r / HW * C * HW + r % HW;
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < C; j++)
                m = fmax(m, xv[base + j * HW]);
            for (int64_t j = 0; j < C; j++)
                s += exp(xv[base + j * HW] - m);
            for (int64_t j = 0; j < C; j++) {
                double z = xv[base + j * HW] - m;
                want[base + j * HW] = c->log ? z - log(s) : exp(z) / s;
            }
        }
        /* float32's rounding of x itself dominates near |x| = 1000 */
        double worst = 0;
        for (int64_t i = 0; i < n; i++)
            worst = tu_worst_diff(worst, got[i], want[i], c->name, i);
        /* 4 float ulps; near |x| = 1000, float's rounding of x itself */
        assert_values(c->name, got, want, n, 4.8e-7, c->shift != 0 ? 1e-4 : 1e-7);
        printf("%-38s values as the definition, largest difference %.2g\n", c->name, worst);
        dp_tensor_free(in[0]), dp_tensor_free(in[1]);
        free(xv), free(iv), free(got), free(want);
    }
    int64_t one = 4;
    float v[4] = {0};
    dp_tensor_t *x = upload(1, &one, v), *y;
    assert_int_equal(dp_softmax(&y, x), DP_ESHAPE);
    tu_assert_error_mentions("over axis 1");
    dp_tensor_free(x);
}

static void test_gradients(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const sm_case *c = &cases[k];
        if (c->shift != 0) /* finite differences of x = 1000 +- 0.02 lose every digit */
            continue;
        int64_t C = c->shape[1], ws[4] = {C, C, 1, 1};
        gc_problem g = {.name = c->name, .build = build, .ctx = c, .eps = 1e-2};
        g.in[g.nin++] = input("x", c->ndim, c->shape, inputs(c, 40 + k), true);
        g.in[g.nin++] = input("id", 4, ws, identity_1x1(C), false);
        gc_run(&g);
    }
}

/* dim=1, None, and -1 for features or -3 for images, as PyTorch counts
 * them; any other axis is refused. */
static void test_module_dims(void **state)
{
    (void)state;
    const int64_t chw[3] = {2, 4, 4};
#define HEAD "nn.Flatten()\nnn.Linear(32, 2)\n"
    static const char *const good[] = {"nn.Conv2d(2, 2, 1)\nnn.Softmax(dim=1)\n" HEAD,
                                       "nn.Conv2d(2, 2, 1)\nnn.LogSoftmax(1)\n" HEAD,
                                       "nn.Conv2d(2, 2, 1)\nnn.Softmax()\n" HEAD,
                                       "nn.Conv2d(2, 2, 1)\nnn.Softmax(-3)\n" HEAD,
                                       "nn.Conv2d(2, 2, 1)\n" HEAD "nn.LogSoftmax(dim=-1)\n"};
    for (size_t i = 0; i < COUNTOF(good); i++) {
        dp_model_def *def = NULL;
        OK(dp_model_def_parse(&def, good[i], "s.txt", chw));
        dp_layer_summary *rows;
        int n;
        OK(dp_model_summary(def, chw, &rows, &n));
        assert_string_equal(rows[i == 4 ? 3 : 1].op,
                            strstr(good[i], "Log") ? "log_softmax" : "softmax");
        free(rows);
        dp_model_def_free(def);
    }
    static const char *const bad[] = {"nn.Softmax(dim=0)\nnn.Conv2d(2, 2, 1)\n" HEAD,
                                      "nn.Softmax(dim=2)\nnn.Conv2d(2, 2, 1)\n" HEAD,
                                      "nn.Softmax(dim=-1)\nnn.Conv2d(2, 2, 1)\n" HEAD,
                                      "nn.Flatten()\nnn.Linear(32, 2)\nnn.LogSoftmax(dim=-2)\n"};
    for (size_t i = 0; i < COUNTOF(bad); i++) {
        dp_model_def *def = NULL;
        assert_int_equal(dp_model_def_parse(&def, bad[i], "s.txt", chw), DP_EFORMAT);
        tu_assert_error_mentions("'dim' other than 1");
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_module_dims),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}

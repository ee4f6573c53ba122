/* batch_norm1d on cpu:0, which PyTorch nn.Sequential files need beyond the
 * built-in models: forward values (and running statistics) against a naive
 * reference computed here in double, error cases, and the gradient with
 * respect to every differentiable input against central finite
 * differences (tests/util/gradcheck.h: L = sum_i r_i y_i for a fixed random r,
 * each check also required to fail for the analytic gradient scaled by
 * 1.1). */
#include "gradcheck.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- batch_norm1d -------------------------------------------------------- */

#define BN_EPS 1e-5

/* BatchNorm1d of x (N, C, L) (L = 1 for (N, C)): per channel over (N, L).
 * Training: the batch's mean and biased var, rm and rv updated with the
 * unbiased var; eval: rm and rv. */
static double *bn1d_ref(const float *x, int64_t N, int64_t C, int64_t L, const float *gamma,
                        const float *beta, double *rm, double *rv, bool training)
{
    double *y = malloc((size_t)(N * C * L) * sizeof *y);
    int64_t m = N * L;
    for (int64_t c = 0; c < C; c++) {
        double mean = rm[c], var = rv[c];
        if (training) {
            double s = 0.0, ss = 0.0;
            for (int64_t k = 0; k < m; k++)
                s += x[((k / L) * C + c) * L + k % L];
            mean = s / (double)m;
            for (int64_t k = 0; k < m; k++) {
                double d = x[((k / L) * C + c) * L + k % L] - mean;
                ss += d * d;
            }
            var = ss / (double)m;
            rm[c] = 0.9 * rm[c] + 0.1 * mean;
            rv[c] = 0.9 * rv[c] + 0.1 * ss / (double)(m - 1);
        }
        for (int64_t k = 0; k < m; k++) {
            int64_t at = ((k / L) * C + c) * L + k % L;
            y[at] = gamma[c] * (x[at] - mean) / sqrt(var + BN_EPS) + beta[c];
        }
    }
    return y;
}

static float *positive(dp_rng *rng, int64_t n)
{
    float *v = normal_array(rng, n, 0.3f);
    for (int64_t i = 0; i < n; i++)
        v[i] = 0.5f + fabsf(v[i]);
    return v;
}

/* Two calls (training: the running statistics move twice), each checked. */
static void bn1d_forward_case(int ndim, const int64_t *xs, bool training, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t N = xs[0], C = xs[1], L = ndim == 3 ? xs[2] : 1, n = N * C * L;
    float *xv = normal_array(&rng, n, 2.0f), *gv = normal_array(&rng, C, 1.0f),
          *bv = normal_array(&rng, C, 1.0f), *rm0 = normal_array(&rng, C, 0.5f),
          *rv0 = positive(&rng, C);
    for (int64_t i = 0; i < n; i++)
        xv[i] += (float)(i % C); /* channels of different means */
    double *rm = to_double(rm0, C), *rv = to_double(rv0, C);
    dp_tensor_t *x = upload(ndim, xs, xv), *g = upload(1, &C, gv), *b = upload(1, &C, bv);
    dp_tensor_t *rmt = upload(1, &C, rm0), *rvt = upload(1, &C, rv0);
    dp_batch_norm_params p = {.training = training};
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    for (int call = 0; call < 2; call++) {
        dp_tape_begin(tape);
        dp_tensor_t *y;
        OK(dp_batch_norm1d(&y, x, g, b, rmt, rvt, &p));
        assert_int_equal(dp_tensor_ndim(y), ndim);
        float *yv = download(y), *rmv = download(rmt), *rvv = download(rvt);
        double *want = bn1d_ref(xv, N, C, L, gv, bv, rm, rv, training);
        char what[64];
        snprintf(what, sizeof what, "bn1d %s y (call %d)", training ? "train" : "eval", call);
        assert_values(what, yv, want, n, 1e-4, 1e-5);
        assert_values("running_mean", rmv, rm, C, 1e-5, 1e-6);
        assert_values("running_var", rvv, rv, C, 1e-5, 1e-6);
        free(yv), free(rmv), free(rvv), free(want);
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    dp_tape_close(tape);
    dp_tensor_free(x), dp_tensor_free(g), dp_tensor_free(b), dp_tensor_free(rmt),
        dp_tensor_free(rvt);
    free(xv), free(gv), free(bv), free(rm0), free(rv0), free(rm), free(rv);
}

static void test_bn1d_forward(void **state)
{
    (void)state;
    bn1d_forward_case(2, (int64_t[]){16, 5}, true, 41);
    bn1d_forward_case(2, (int64_t[]){16, 5}, false, 42);
    bn1d_forward_case(2, (int64_t[]){2, 3}, true, 43);
    bn1d_forward_case(3, (int64_t[]){4, 3, 6}, true, 44);
    bn1d_forward_case(3, (int64_t[]){4, 3, 6}, false, 45);
}

static void test_bn1d_errors(void **state)
{
    (void)state;
    tu_quiet_log();
    int64_t C = 3, x4[4] = {2, 3, 1, 1}, x1[2] = {1, 3};
    float v[6] = {1, 2, 3, 4, 5, 6};
    dp_tensor_t *g = upload(1, &C, v), *b = upload(1, &C, v), *rm = upload(1, &C, v),
                *rv = upload(1, &C, v), *y = NULL;
    dp_tensor_t *four = upload(4, x4, v), *one = upload(2, x1, v);
    dp_batch_norm_params train = {.training = true}, eval = {0};
    assert_int_equal(dp_batch_norm1d(&y, four, g, b, rm, rv, &train), DP_ESHAPE);
    assert_non_null(strstr(dp_last_error(), "[2, 3, 1, 1]"));
    /* one value per channel: PyTorch's error in training, fine in eval */
    assert_int_equal(dp_batch_norm1d(&y, one, g, b, rm, rv, &train), DP_EINVAL);
    assert_non_null(strstr(dp_last_error(), "more than 1 value per channel"));
    OK(dp_batch_norm1d(&y, one, g, b, rm, rv, &eval));
    dp_tensor_free(y);
    dp_tensor_free(g), dp_tensor_free(b), dp_tensor_free(rm), dp_tensor_free(rv),
        dp_tensor_free(four), dp_tensor_free(one);
}

typedef struct bn1d_ctx {
    dp_batch_norm_params p;
    dp_tensor_t *rm, *rv;
} bn1d_ctx;

static int build_bn1d(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const bn1d_ctx *c = ctx;
    return dp_batch_norm1d(out, in[0], in[1], in[2], c->rm, c->rv, &c->p);
}

static void bn1d_grad_case(const char *name, int ndim, const int64_t *xs, bool training,
                           uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    int64_t C = xs[1];
    float *rm0 = normal_array(&rng, C, 0.5f), *rv0 = positive(&rng, C);
    bn1d_ctx c = {.p = {.training = training}, .rm = upload(1, &C, rm0), .rv = upload(1, &C, rv0)};
    gc_problem g = {.name = name, .build = build_bn1d, .ctx = &c, .seed = seed};
    float *gv = normal_array(&rng, C, 0.3f);
    for (int64_t i = 0; i < C; i++)
        gv[i] += gv[i] < 0 ? -0.7f : 0.7f;
    g.in[g.nin++] = input("x", ndim, xs, normal_array(&rng, count(ndim, xs), 1.0f), true);
    g.in[g.nin++] = input("g", 1, &C, gv, true);
    g.in[g.nin++] = input("b", 1, &C, normal_array(&rng, C, 0.5f), true);
    gc_run(&g);
    free(rm0), free(rv0);
    dp_tensor_free(c.rm), dp_tensor_free(c.rv);
}

static void test_bn1d_grad(void **state)
{
    (void)state;
    bn1d_grad_case("bn1d training (N, C)", 2, (int64_t[]){6, 4}, true, 51);
    bn1d_grad_case("bn1d eval (N, C)", 2, (int64_t[]){6, 4}, false, 52);
    bn1d_grad_case("bn1d training (N, C, L)", 3, (int64_t[]){3, 4, 5}, true, 53);
    bn1d_grad_case("bn1d eval (N, C, L)", 3, (int64_t[]){3, 4, 5}, false, 54);
}

int main(int argc, char **argv)
{
    printf("op checks on cpu:0 with %d kernel thread(s)\n", gc_threads());
#define T(f) cmocka_unit_test_setup_teardown(f, gc_open_device, gc_close_device)
    const struct CMUnitTest tests[] = {
        T(test_bn1d_forward),
        T(test_bn1d_errors),
        T(test_bn1d_grad),
    };
#undef T
    return tu_run(argc, argv, tests, NULL, NULL);
}

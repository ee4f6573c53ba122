/* Cross-entropy with reduction "none" (DP_REDUCE_NONE), as
 * CrossEntropyLoss(reduction="none"): a loss per row against log-softmax
 * in double, with and without label smoothing, their sum equal to the
 * summed loss's, and gradients (a gradient per row) against finite
 * differences. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 6, K = 5 };
static const int32_t labels[N] = {0, 4, 2, 2, 1, 3};

typedef struct xent_ctx {
    float smoothing;
} xent_ctx;

/* The labels on gc_dev, for the whole test: a backward reads them. */
static dp_tensor_t *label_tensor;

static int build_none(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const xent_ctx *c = ctx;
    return dp_cross_entropy_smoothed(out, in[0], label_tensor, DP_REDUCE_NONE, c->smoothing);
}

static int open_with_labels(void **state)
{
    int rc = gc_open_device(state);
    int64_t n = N;
    return rc ? rc : dp_tensor_from_host(&label_tensor, gc_dev, DP_I32, 1, &n, labels);
}

static int close_with_labels(void **state)
{
    dp_tensor_free(label_tensor);
    return gc_close_device(state);
}

static void test_values(void **state)
{
    (void)state;
    const int64_t xs[2] = {N, K};
    dp_rng rng;
    dp_rng_init(&rng, 41, 0);
    float *xv = normal_array(&rng, N * K, 2.0f);
    for (int s = 0; s < 2; s++) {
        xent_ctx c = {s ? 0.1f : 0.0f};
        int64_t n;
        float *got = run_forward(build_none, &c, 2, xs, xv, false, &n);
        assert_int_equal(n, N);
        double want[N], total = 0;
        for (int i = 0; i < N; i++) {
            double m = -INFINITY, sum = 0;
            for (int k = 0; k < K; k++)
                m = fmax(m, xv[i * K + k]);
            for (int k = 0; k < K; k++)
                sum += exp(xv[i * K + k] - m);
            double lse = m + log(sum), smooth = 0;
            for (int k = 0; k < K; k++)
                smooth += lse - xv[i * K + k];
            want[i] = (1 - c.smoothing) * (lse - xv[i * K + labels[i]]) + c.smoothing * smooth / K;
            total += want[i];
        }
        assert_values("per-row cross-entropy", got, want, N, 1e-6, 1e-6);
        /* the summed loss is the sum of the rows' */
        dp_tensor_t *x = upload(2, xs, xv), *y, *loss;
        int64_t nn = N;
        OK(dp_tensor_from_host(&y, gc_dev, DP_I32, 1, &nn, labels));
        OK(dp_cross_entropy_smoothed(&loss, x, y, DP_REDUCE_SUM, c.smoothing));
        float summed;
        OK(dp_tensor_to_host(loss, &summed, sizeof summed));
        tu_assert_close(summed, total, 1e-6, 1e-6);
        dp_tensor_free(loss), dp_tensor_free(y), dp_tensor_free(x);
        printf("reduction none, smoothing %.1f: %d rows as in double; they sum to %.6f\n",
               (double)c.smoothing, N, (double)summed);
        free(got);
    }
    free(xv);
    tu_quiet_log();
    dp_tensor_t *x = upload(2, xs, (float[N * K]){0}), *y, *loss;
    int64_t nn = N;
    OK(dp_tensor_from_host(&y, gc_dev, DP_I32, 1, &nn, labels));
    assert_int_equal(dp_cross_entropy(&loss, x, y, (dp_reduction)3), DP_EINVAL);
    tu_assert_error_mentions("reduction 3");
    dp_tensor_free(y), dp_tensor_free(x);
}

static void test_gradients(void **state)
{
    (void)state;
    const int64_t xs[2] = {N, K};
    dp_rng rng;
    dp_rng_init(&rng, 42, 0);
    static const xent_ctx plain = {0.0f}, smooth = {0.2f};
    gc_problem p = {.name = "cross_entropy none", .build = build_none, .ctx = &plain};
    p.in[p.nin++] = input("logits", 2, xs, normal_array(&rng, N * K, 1.0f), true);
    gc_run(&p);
    gc_problem q = {
        .name = "cross_entropy none, smoothing 0.2", .build = build_none, .ctx = &smooth};
    q.in[q.nin++] = input("logits", 2, xs, normal_array(&rng, N * K, 1.0f), true);
    gc_run(&q);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradients),
    };
    return tu_run(argc, argv, tests, open_with_labels, close_with_labels);
}

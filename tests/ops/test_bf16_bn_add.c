/* dp__batch_norm2d_add in bf16 (x and the residual stored bf16 in NHWC, as
 * after a convolution; statistics, gamma and beta f32) against the same op
 * in float32 on the bf16-rounded inputs (bf16util.h's bf_check_storage):
 * the output within 2 bf16 units (2^-8 relative: the fused sum is
 * rounded once, at the store), and each gradient within 2 units of its
 * f32 value plus 1e-5 of the largest, training and eval, with and without
 * the ReLU; 24 channels, so that where the CPU has AVX512-BF16 both the
 * vector loop and the C loop after it run, and 1 channel, which takes the
 * portable kernel on every CPU. */
#include "bf16util.h"

#include "ops/batch_norm_add.h"

#include <math.h>
#include <stdlib.h>

typedef struct tail_ctx {
    bool training, relu;
    dp_tensor_t *mean, *var; /* the running statistics (f32, C) */
} tail_ctx;

/* in: x, identity, gamma, beta, residual: x and the residual through the
 * identity conv in precision p (NHWC, bf16 in bf16). */
static int build_tail(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx, dp_precision p)
{
    const tail_ctx *c = ctx;
    dp_set_precision(p);
    dp_tensor_t *x, *r;
    int rc = dp_conv2d(&x, in[0], in[1], NULL, NULL);
    if (rc == 0)
        rc = dp_conv2d(&r, in[4], in[1], NULL, NULL);
    if (rc)
        return rc;
    dp_batch_norm_params bn = {.training = c->training, .relu = c->relu};
    return dp__batch_norm2d_add(out, x, in[2], in[3], c->mean, c->var, r, &bn);
}

/* C channels: 24 give one vector of 16 and 8 left for the C loop, where
 * the CPU has AVX512-BF16 (batch_norm_add.c); 1 runs the portable row
 * kernel on every CPU (one channel is not an NHWC row). */
static void tail_bf16_channels(int64_t C)
{
    tail_ctx cases[] = {
        {true, true, NULL, NULL}, {true, false, NULL, NULL}, {false, true, NULL, NULL}};
    static const char *const names[] = {"bn + add + relu, train", "bn + add, train",
                                        "bn + add + relu, eval"};
    for (int k = 0; k < 3; k++) {
        dp_rng rng;
        dp_rng_init(&rng, 640 + (uint64_t)k + 10 * (uint64_t)C, 2);
        int64_t xs[4] = {2, C, 5, 5}, is[4] = {C, C, 1, 1}, cs = C;
        bf_problem b = {.name = names[k], .build = build_tail, .ctx = &cases[k]};
        float *var = normal_array(&rng, cs, 0.3f);
        for (int64_t c = 0; c < cs; c++)
            var[c] = 1.0f + fabsf(var[c]);
        bf_add_input(&b, "x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
        bf_add_input(&b, "id", 4, is, identity_1x1(C), false);
        bf_add_input(&b, "gamma", 1, &cs, normal_array(&rng, cs, 1.0f), true);
        bf_add_input(&b, "beta", 1, &cs, normal_array(&rng, cs, 1.0f), true);
        float *mean = normal_array(&rng, cs, 0.3f);
        cases[k].mean = upload(1, &cs, mean);
        cases[k].var = upload(1, &cs, var);
        free(mean);
        free(var);
        bf_add_input(&b, "residual", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
        bf_check_storage(&b);
        bf_free(&b);
        dp_tensor_free(cases[k].mean);
        dp_tensor_free(cases[k].var);
    }
}

static void tail_bf16(void **state)
{
    (void)state;
    tail_bf16_channels(24);
    tail_bf16_channels(1);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(tail_bf16, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

/* LeNet's conv -> ReLU -> average pool, with the ReLU fused (a conv
 * post-op forward; folded into the pool's backward, one row kernel per
 * row of the conv's NHWC output, src/device/cpu/pool2d.c) against the same
 * graph unfused (conv, dp_relu, pool: oneDNN's pooling backward, then the
 * ReLU's own backward), bit for bit: the values, d/dx, d/dW and d/db.
 *
 * Both orders compute the same numbers: relu(round(v)) = round(relu(v)),
 * and the pool's backward writes dy / 4 (exact in f32 and in bf16) where
 * the mask is set and 0 elsewhere in either order. The shapes give the row
 * kernel a vector body and a tail (C = 50 and 20 channels: 16-wide vectors
 * and a remainder) and rows and columns past the last window (odd H, W),
 * in f32 and in bf16 (native where the CPU has it, else the reference
 * path: both keep the activations in bf16). Batch norm with its ReLU fused
 * on an NCHW input gives the pool NCHW rows, the other row kernel. The finite-difference check of
 * the fused path is test_grad_conv_pool's test_conv_relu_pool_grad. */
#include "gradcheck.h"

#include <stdlib.h>
#include <string.h>

typedef struct fused_ctx {
    bool fused;
    bool bn;                  /* batch norm in place of the convolution */
    dp_tensor_t *mean, *var; /* its running statistics (C) */
} fused_ctx;

/* Conv: in x (N, C, H, W), w (K, C, 3, 3), b (K); out avgpool2(relu(conv(x))),
 * the conv's output NHWC. Batch norm: in x (N, C, H, W), gamma (C), beta (C);
 * out avgpool2(relu(bn(x))) in x's layout, NCHW: the pool's NCHW rows. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const fused_ctx *c = ctx;
    dp_pool2d_params pool = {.kernel_h = 2, .kernel_w = 2};
    dp_tensor_t *h;
    int rc;
    if (c->bn) {
        dp_batch_norm_params p = {.training = true, .relu = c->fused};
        rc = dp_batch_norm2d(&h, in[0], in[1], in[2], c->mean, c->var, &p);
    } else {
        dp_conv2d_params p = {.relu = c->fused};
        rc = dp_conv2d(&h, in[0], in[1], in[2], &p);
    }
    if (rc == 0 && !c->fused)
        rc = dp_relu(&h, h);
    return rc ? rc : dp_avg_pool2d(out, h, &pool);
}

typedef struct run_result {
    int64_t ny;
    float *y, *g[3];
} run_result;

/* Values and gradients of sum(r * out) for one ordering, r fixed. */
static run_result run(bool fused, bool bn, const int64_t shapes[3][4], int ndims[3],
                      float *const v[3])
{
    dp_tensor_t *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = upload(ndims[i], shapes[i], v[i]);
        OK(dp_tensor_set_requires_grad(in[i], NULL));
    }
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    fused_ctx c = {.fused = fused, .bn = bn};
    float *stats = calloc((size_t)shapes[1][0], sizeof(float));
    c.mean = upload(1, shapes[1], stats);
    c.var = upload(1, shapes[1], stats);
    dp_tensor_t *out, *out32, *row, *loss, *proj;
    OK(build(&out, in, &c));
    OK(dp_cast(&out32, out, DP_F32)); /* bf16 values read back as floats */
    int64_t n = dp_tensor_numel(out), flat[2] = {1, n}, rs[2] = {n, 1};
    dp_rng rng;
    dp_rng_init(&rng, 45, 1); /* the same projection both times */
    float *r = normal_array(&rng, n, 1.0f);
    proj = upload(2, rs, r);
    OK(dp_reshape(&row, out, 2, flat));
    OK(dp_linear(&loss, row, proj, NULL, DP_WEIGHT_IN_OUT));
    OK(dp_backward(loss));
    run_result res = {.ny = n, .y = download(out32)};
    for (int i = 0; i < 3; i++)
        res.g[i] = download(dp_tensor_grad(in[i]));
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(proj);
    dp_tensor_free(c.mean);
    dp_tensor_free(c.var);
    free(stats);
    for (int i = 0; i < 3; i++)
        dp_tensor_free(in[i]);
    free(r);
    return res;
}

/* K = 0: batch norm over x's C channels in place of the convolution. */
static void fused_equals_unfused(dp_precision prec, int64_t N, int64_t C, int64_t H, int64_t K,
                                 uint64_t seed)
{
    dp_set_precision(prec);
    dp_rng rng;
    dp_rng_init(&rng, seed, 1);
    bool bn = K == 0;
    const int64_t conv_shapes[3][4] = {{N, C, H, H}, {K, C, 3, 3}, {K}};
    const int64_t bn_shapes[3][4] = {{N, C, H, H}, {C}, {C}};
    const int64_t(*shapes)[4] = bn ? bn_shapes : conv_shapes;
    int ndims[3] = {4, bn ? 1 : 4, 1};
    float *v[3] = {normal_array(&rng, count(4, shapes[0]), 1.0f),
                   normal_array(&rng, count(ndims[1], shapes[1]), bn ? 1.0f : 0.3f),
                   normal_array(&rng, shapes[2][0], 0.3f)};
    run_result a = run(true, bn, shapes, ndims, v), b = run(false, bn, shapes, ndims, v);
    dp_set_precision(DP_PRECISION_FP32);
    /* Some outputs must be masked and some not, or the mask is not tested:
     * y = 0 only where all four of a window's values were cut. */
    int64_t zeros = 0;
    for (int64_t i = 0; i < a.ny; i++)
        zeros += a.y[i] == 0.0f;
    assert_true(zeros > 0 && zeros < a.ny / 2);
    assert_memory_equal(a.y, b.y, (size_t)a.ny * sizeof(float));
    for (int i = 0; i < 3; i++) {
        int64_t n = count(ndims[i], shapes[i]);
        bool nonzero = false;
        for (int64_t j = 0; j < n; j++)
            nonzero |= a.g[i][j] != 0.0f;
        assert_true(nonzero);
        assert_memory_equal(a.g[i], b.g[i], (size_t)n * sizeof(float));
    }
    for (int i = 0; i < 3; i++)
        free(v[i]), free(a.g[i]), free(b.g[i]);
    free(a.y);
    free(b.y);
}

/* conv2's 50 channels (three 16-wide vectors and 2 over), conv1's 20
 * (one and 4 over); 11x11 and 15x15 inputs give 9x9 and 13x13 outputs:
 * the last row and column lie under no window. */
static void f32_fused_equals_unfused(void **state)
{
    (void)state;
    fused_equals_unfused(DP_PRECISION_FP32, 3, 4, 11, 50, 51);
    fused_equals_unfused(DP_PRECISION_FP32, 2, 1, 15, 20, 52);
    fused_equals_unfused(DP_PRECISION_FP32, 2, 3, 11, 0, 55); /* NCHW rows */
}

static void bf16_fused_equals_unfused(void **state)
{
    (void)state;
    dp_precision p = dp_device_has(gc_dev, DP_DEVICE_BF16_NATIVE) ? DP_PRECISION_BF16
                                                                  : DP_PRECISION_BF16_REFERENCE;
    fused_equals_unfused(p, 3, 4, 11, 50, 53);
    fused_equals_unfused(p, 2, 1, 15, 20, 54);
    fused_equals_unfused(p, 2, 3, 11, 0, 56); /* NCHW rows */
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(f32_fused_equals_unfused, gc_open_device,
                                        gc_close_device),
        cmocka_unit_test_setup_teardown(bf16_fused_equals_unfused, gc_open_device,
                                        gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

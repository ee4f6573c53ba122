/* bf16 mixed precision against float32, with tolerances derived from bf16's
 * 8-bit significand (unit roundoff u = 2^-8) and the length L of each sum.
 *
 * Convolutions and matrix products (products of bf16 operands, f32 sums):
 * rounding an operand moves it by at most u of itself, so a product of two
 * rounded operands is within (2u + u^2) of the exact product, the f32 sum of
 * L of them adds at most L 2^-24 of the sum of their magnitudes, and a bf16
 * output adds u of itself. With A = the same sum over |operands| (the op run
 * in f32 on |x|, |w|, |r|: e.g. dx = sum |w| |dy|):
 *   |bf16 - exact| <= (3u + u^2 + L 2^-24) A        (bf16 output: y, dx)
 *   |bf16 - exact| <= (2u + u^2 + L 2^-24) A        (f32 output: dw, db)
 * Each check compares the reference path (f32 kernels on rounded operands)
 * with finite differences of the f32 op and with its f32 gradient, and the
 * native kernels (every implementation the chooser may pick) with the
 * reference: the same products summed in another order, so within
 * 2u |value| (one bf16 ulp of rounding) + L 2^-23 A.
 *
 * The other ops keep bf16 activations and compute in f32: their bf16 result
 * must be the f32 op's on the rounded inputs, rounded: within 2u |value|
 * (the result's rounding, and one more where a kernel rounds a partial sum:
 * oneDNN's bf16 max-pooling backward adds overlapping windows' gradients in
 * bf16) plus the f32 sums' reordering (1e-5 of the largest value). Sigmoid
 * and tanh differentiate from their bf16 output: its rounding moves dx by
 * up to u |dy| and 2u |dy| more (d(y(1 - y))/dy and d(1 - y^2)/dy are at
 * most 1 and 2 in size).
 *
 * Every test runs on every CPU (the reference path and the f32-fallback of
 * bf16 batch norm, pooling and activations where oneDNN has no bf16
 * kernels: CTest runs this program again with DNNL_MAX_CPU_ISA=AVX2);
 * native bf16 is a visible skip naming the CPU where it has none. */
#include "bf16util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define U (1.0 / 256)

/* ---- convolution ---------------------------------------------------------- */

typedef struct conv_case {
    const char *name;
    int64_t xs[4], ws[4];
    dp_conv2d_params p;
} conv_case;

static const conv_case conv_cases[] = {
    {"3x3 pad 1", {2, 16, 6, 6}, {16, 16, 3, 3}, {.pad_h = 1, .pad_w = 1}},
    {"3x3 stride 2 pad 1",
     {2, 8, 7, 7},
     {12, 8, 3, 3},
     {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1}},
    {"5x5 (LeNet's conv2)", {2, 6, 9, 9}, {10, 6, 5, 5}, {0}},
    {"1x1 stride 2", {2, 8, 7, 7}, {16, 8, 1, 1}, {.stride_h = 2, .stride_w = 2}},
};

/* in: x (NCHW), w, b, identity; the identity 1x1 convolution (f32) puts x
 * in NHWC first, as a network's later layers see it. */
static int build_conv(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx, dp_precision p)
{
    const conv_case *c = ctx;
    dp_tensor_t *x;
    dp_set_precision(DP_PRECISION_FP32);
    int rc = dp_conv2d(&x, in[0], in[3], NULL, NULL);
    dp_set_precision(p);
    return rc ? rc : dp_conv2d(out, x, in[1], in[2], &c->p);
}

static void conv_inputs(bf_problem *b, const conv_case *c, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 9);
    int64_t bs = c->ws[0], is[4] = {c->xs[1], c->xs[1], 1, 1};
    bf_add_input(b, "x", 4, c->xs, normal_array(&rng, count(4, c->xs), 1.0f), true);
    bf_add_input(b, "w", 4, c->ws, normal_array(&rng, count(4, c->ws), 0.5f), true);
    bf_add_input(b, "b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    bf_add_input(b, "id", 4, is, identity_1x1(c->xs[1]), false);
}

/* The reduction lengths of the conv's sums: y and dx sum over C R S (and
 * K R S), dw over N P Q, db over N P Q. */
static void conv_lengths(const conv_case *c, bf_problem *b)
{
    int64_t sh = c->p.stride_h ? c->p.stride_h : 1;
    int64_t P = (c->xs[2] + 2 * c->p.pad_h - c->ws[2]) / sh + 1;
    int64_t crs = c->xs[1] * c->ws[2] * c->ws[3], krs = c->ws[0] * c->ws[2] * c->ws[3];
    b->out_length = crs;
    b->length[0] = krs;
    b->length[1] = b->length[2] = c->xs[0] * P * P;
    b->bf16_grad[0] = true; /* dx passes through a bf16 tensor; dw, db are f32 */
}

static void test_conv_reference(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        bf_problem b = {.name = conv_cases[i].name, .build = build_conv, .ctx = &conv_cases[i]};
        conv_inputs(&b, &conv_cases[i], 300 + i);
        conv_lengths(&conv_cases[i], &b);
        bf_check_products(&b, 3);
        bf_free(&b);
    }
}

static void native_conv(dp__conv_impl impl)
{
    if (!dp_device_has(gc_dev, DP_DEVICE_BF16_NATIVE))
        tu_skip("no native bf16 on %s (AVX512-BF16 or AMX): the reference path, which runs "
                "everywhere, was checked instead",
                tu_cpu_name());
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        const conv_case *c = &conv_cases[i];
        bf_problem b = {.name = c->name, .build = build_conv, .ctx = c};
        conv_inputs(&b, c, 400 + i);
        conv_lengths(c, &b);
        dp__conv_shape s = gc_conv_shape(c->xs, c->ws, &c->p, DP_PRECISION_BF16);
        gc_force_conv_impl(&s, impl);
        dp_set_conv_algo(DP_CONV_ALGO_AUTO);
        dp__conv_trace(true);
        bf_check_native(&b);
        if (!gc_conv_ran(&s, impl))
            fail_msg("%s: a pass did not run the %s implementation", c->name,
                     dp__conv_impl_name(impl));
        dp__conv_trace(false);
        dp_set_conv_algo(DP_CONV_ALGO_DIRECT);
        dp_conv_choices_clear();
        bf_free(&b);
    }
}

static void test_conv_native_direct(void **state)
{
    (void)state;
    native_conv(DP__CONV_DIRECT);
}

static void test_conv_native_blocked(void **state)
{
    (void)state;
    native_conv(DP__CONV_BLOCKED);
}

static void test_conv_native_gemm(void **state)
{
    (void)state;
    native_conv(DP__CONV_GEMM);
}

/* ---- linear ----------------------------------------------------------------- */

/* in: x (N, Din) (made bf16 by a cast when bf16_x), w (Dout, Din), b */
typedef struct linear_case {
    bool bf16_x;
} linear_case;

static int build_linear(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx, dp_precision p)
{
    const linear_case *c = ctx;
    dp_tensor_t *x = in[0];
    int rc = c->bf16_x && p != DP_PRECISION_FP32 ? dp_cast(&x, x, DP_BF16) : 0;
    dp_set_precision(p);
    return rc ? rc : dp_linear(out, x, in[1], in[2], DP_WEIGHT_OUT_IN);
}

static void linear_problem(bf_problem *b, const linear_case *c, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 4);
    int64_t xs[2] = {6, 40}, ws[2] = {12, 40}, bs = 12;
    bf_add_input(b, "x", 2, xs, normal_array(&rng, count(2, xs), 1.0f), true);
    bf_add_input(b, "w", 2, ws, normal_array(&rng, count(2, ws), 0.5f), true);
    bf_add_input(b, "b", 1, &bs, normal_array(&rng, bs, 0.5f), true);
    b->out_length = 40;
    b->out_f32 = true; /* linear's output is f32 */
    b->length[0] = 12;
    b->length[1] = b->length[2] = 6;
    b->bf16_grad[0] = c->bf16_x;
}

/* The reference path on every CPU; the native kernels against it, a
 * test of their own that is skipped visibly, naming the CPU, without
 * native bf16. */
static void linear_cases(bool native)
{
    for (int bf16_x = 0; bf16_x < 2; bf16_x++) {
        linear_case c = {bf16_x};
        bf_problem b = {
            .name = bf16_x ? "linear, bf16 x" : "linear, f32 x", .build = build_linear, .ctx = &c};
        linear_problem(&b, &c, 500 + (uint64_t)bf16_x);
        if (native)
            bf_check_native(&b);
        else
            bf_check_products(&b, 1);
        bf_free(&b);
    }
}

static void test_linear(void **state)
{
    (void)state;
    linear_cases(false);
}

static void test_linear_native(void **state)
{
    (void)state;
    if (!dp_device_has(gc_dev, DP_DEVICE_BF16_NATIVE))
        tu_skip("no native bf16 on %s (AVX512-BF16 or AMX): the reference path, which runs "
                "everywhere, was checked instead (test_linear)",
                tu_cpu_name());
    linear_cases(true);
}

/* ---- the ops that keep bf16 activations ----------------------------------- */

typedef enum storage_op {
    OP_BN_TRAIN,
    OP_BN_TRAIN_RELU,
    OP_BN_EVAL,
    OP_RELU,
    OP_ADD,
    OP_AVG_POOL,
    OP_MAX_POOL,
    OP_MAX_POOL_DILATED,
    OP_AVG_POOL_RELU, /* a conv's fused ReLU folded into the pool's backward */
    OP_ADAPTIVE_POOL,
    OP_SIGMOID,
    OP_TANH,
    OP_FLATTEN,
} storage_op;

static const char *const storage_names[] = {
    "batch_norm2d train",
    "batch_norm2d train + relu",
    "batch_norm2d eval",
    "relu",
    "add",
    "avg_pool2d 2x2",
    "max_pool2d 3x3 stride 2 pad 1",
    "max_pool2d 2x2 dilation 2 pad 1",
    "conv + relu + avg_pool2d",
    "adaptive_avg_pool2d 3x3",
    "sigmoid",
    "tanh",
    "flatten",
};

/* in: x (NCHW, f32: made NHWC and bf16 by an identity conv), identity,
 * then the op's own: gamma, beta, running mean, running var (batch norm)
 * or a second operand (add). */
static int build_storage(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx, dp_precision p)
{
    storage_op op = *(const storage_op *)ctx;
    dp_tensor_t *x, *z;
    dp_set_precision(p);
    dp_conv2d_params relu = {.relu = op == OP_AVG_POOL_RELU};
    int rc = dp_conv2d(&x, in[0], in[1], NULL, &relu);
    if (rc)
        return rc;
    dp_batch_norm_params bn = {.training = op != OP_BN_EVAL, .relu = op == OP_BN_TRAIN_RELU};
    dp_pool2d_params avg = {.kernel_h = 2, .kernel_w = 2};
    dp_pool2d_params mx = {
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    dp_pool2d_params dilated = {.kernel_h = 2,
                                .kernel_w = 2,
                                .stride_h = 1,
                                .stride_w = 1,
                                .pad_h = 1,
                                .pad_w = 1,
                                .dilation_h = 2,
                                .dilation_w = 2};
    switch (op) {
    case OP_BN_TRAIN:
    case OP_BN_TRAIN_RELU:
    case OP_BN_EVAL:
        return dp_batch_norm2d(out, x, in[2], in[3], in[4], in[5], &bn);
    case OP_RELU:
        return dp_relu(out, x);
    case OP_ADD:
        rc = dp_conv2d(&z, in[2], in[1], NULL, NULL);
        return rc ? rc : dp_add(out, x, z);
    case OP_AVG_POOL:
    case OP_AVG_POOL_RELU:
        return dp_avg_pool2d(out, x, &avg);
    case OP_MAX_POOL:
        return dp_max_pool2d(out, x, &mx);
    case OP_MAX_POOL_DILATED:
        return dp_max_pool2d(out, x, &dilated);
    case OP_ADAPTIVE_POOL:
        return dp_adaptive_avg_pool2d(out, x, 3, 3);
    case OP_SIGMOID:
        return dp_sigmoid(out, x);
    case OP_TANH:
        return dp_tanh(out, x);
    case OP_FLATTEN:
        return dp_flatten(out, x);
    }
    return DP_EINVAL;
}

static void test_storage_ops(void **state)
{
    (void)state;
    for (int op = 0; op <= OP_FLATTEN; op++) {
        dp_rng rng;
        dp_rng_init(&rng, 600 + (uint64_t)op, 2);
        int64_t xs[4] = {3, 8, 6, 6}, is[4] = {8, 8, 1, 1}, cs = 8;
        bf_problem b = {.name = storage_names[op], .build = build_storage, .ctx = &op};
        b.out_grad_slope = op == OP_SIGMOID ? 1 : op == OP_TANH ? 2 : 0;
        bf_add_input(&b, "x", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
        bf_add_input(&b, "id", 4, is, identity_1x1(8), false);
        if (op <= OP_BN_EVAL) {
            float *var = normal_array(&rng, cs, 0.3f);
            for (int64_t c = 0; c < cs; c++)
                var[c] = 1.0f + fabsf(var[c]);
            bf_add_input(&b, "gamma", 1, &cs, normal_array(&rng, cs, 1.0f), true);
            bf_add_input(&b, "beta", 1, &cs, normal_array(&rng, cs, 1.0f), true);
            bf_add_input(&b, "mean", 1, &cs, normal_array(&rng, cs, 0.3f), false);
            bf_add_input(&b, "var", 1, &cs, var, false);
        } else if (op == OP_ADD) {
            bf_add_input(&b, "z", 4, xs, normal_array(&rng, count(4, xs), 1.0f), true);
        }
        bf_check_storage(&b);
        bf_free(&b);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv_reference, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_conv_native_direct, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_conv_native_blocked, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_conv_native_gemm, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_linear, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_linear_native, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_storage_ops, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

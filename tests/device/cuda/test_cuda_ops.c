/* The CUDA device against the CPU device: every op family forward and
 * backward on the same inputs (convolutions also in TF32, and split along
 * N as a batch beyond cuDNN's int sizes is), the bias gradient's kernel
 * against its order on the host, accuracy and fill.
 *
 * Without a GPU (a CPU-only build, or no GPU visible to the CUDA runtime)
 * every test says so on stdout and is skipped. */
#include "cudautil.h"

#include "device/cuda/cuda_host.h"
#include "device/device.h"
#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TF32 (conv2d_tf32_matches_cpu): the tolerance follows from the length K
 * of the longest dot product. TF32 keeps 10 mantissa bits, so rounding an
 * input costs at most u = 2^-11 of it, and a product of two rounded inputs
 * at most 2u of itself. Summed over K products, these errors reach 2uK of
 * the terms' magnitude in the worst case (0.12 for K = 120: too loose to
 * catch anything) but, being of either sign, grow like sqrt(K) in practice:
 * 2u sqrt(K) per convolution (the usual probabilistic bound; float32
 * accumulation adds far less). conv_case's longest sum is the weight
 * gradient of its first convolution, over N P Q = 4 x 6 x 5 = 120 terms,
 * and a value passes through at most 2 TF32 convolutions (y through both
 * forwards, the first layer's gradients through the second's backward
 * data), so: 2 x 2u sqrt(120) = 0.021. A wrong algorithm or layout is off
 * by O(1). */
#define TF32_UNIT_ROUNDOFF 0x1p-11
#define TF32_LONGEST_SUM 120
#define TF32_CONVS_CHAINED 2
static double tol_tf32(void)
{
    return TF32_CONVS_CHAINED * 2 * TF32_UNIT_ROUNDOFF * sqrt((double)TF32_LONGEST_SUM);
}

/* Convolutions: a 3-channel NCHW input (rearranged for cuDNN), stride 2,
 * padding, bias and fused ReLU, then a second one on its NHWC output. */
static int op_conv(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h;
    dp_conv2d_params p1 = {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .relu = true};
    dp_conv2d_params p2 = {.pad_h = 1, .pad_w = 0};
    int rc = dp_conv2d(&h, l[0], l[1], l[2], &p1);
    return rc < 0 ? rc : dp_conv2d(y, h, l[3], NULL, &p2);
}

static const op_case conv_case = {"conv2d",
                                  4,
                                  {{4, {4, 3, 11, 9}, false},
                                   {4, {8, 3, 3, 3}, false},
                                   {1, {8}, false},
                                   {4, {6, 8, 3, 2}, false}},
                                  op_conv};

/* The first layer of LeNet: one input channel, 5x5, padding 2. */
static int op_conv_lenet(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_conv2d_params p = {.pad_h = 2, .pad_w = 2, .relu = true};
    return dp_conv2d(y, l[0], l[1], l[2], &p);
}

static const op_case conv_lenet_case = {
    "conv2d lenet",
    3,
    {{4, {8, 1, 28, 28}, false}, {4, {6, 1, 5, 5}, false}, {1, {6}, false}},
    op_conv_lenet};

/* Groups, dilation and one-sided padding on an NCHW input (cuDNN's
 * padded copy), a depthwise strided one, then a grouped transposed one. */
static int op_conv_geometry(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *d;
    dp_conv2d_params pg = {
        .groups = 2, .dilation_h = 2, .pad_top = 2, .pad_bottom = 1, .pad_right = 1, .relu = true};
    dp_conv2d_params pd = {.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .groups = 6};
    dp_conv_transpose2d_params pt = {
        .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .output_padding_h = 1, .groups = 3};
    int rc = dp_conv2d(&h, l[0], l[1], l[2], &pg);
    if (rc == 0)
        rc = dp_conv2d(&d, h, l[3], NULL, &pd);
    return rc < 0 ? rc : dp_conv_transpose2d(y, d, l[4], l[5], &pt);
}

static const op_case conv_geometry_case = {
    "conv2d groups, dilation, pads per side; conv_transpose2d",
    6,
    {{4, {3, 4, 9, 8}, false},
     {4, {6, 2, 3, 2}, false},
     {1, {6}, false},
     {4, {6, 1, 3, 3}, false},
     {4, {6, 2, 3, 3}, false},
     {1, {6}, false}},
    op_conv_geometry};

/* Pooling after a convolution (NHWC) and on an NCHW input. */
static int op_pool(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *m, *a;
    dp_conv2d_params pc = {.pad_h = 1, .pad_w = 1, .relu = true};
    dp_pool2d_params max = {
        .kernel_h = 3, .kernel_w = 3, .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
    dp_pool2d_params avg = {.kernel_h = 2, .kernel_w = 2};
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &pc);
    if (rc == 0)
        rc = dp_max_pool2d(&m, h, &max);
    if (rc == 0)
        rc = dp_avg_pool2d(&a, m, &avg);
    return rc < 0 ? rc : dp_relu(y, a);
}

static const op_case pool_case = {
    "pool2d", 2, {{4, {4, 2, 12, 12}, false}, {4, {5, 2, 3, 3}, false}}, op_pool};

static int op_avg_nchw(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_pool2d_params p = {
        .kernel_h = 3, .kernel_w = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1};
    return dp_avg_pool2d(y, l[0], &p);
}

static const op_case avg_nchw_case = {
    "avg_pool2d nchw", 1, {{4, {3, 4, 7, 6}, false}}, op_avg_nchw};

/* Dilated max pooling (pool_dilated.cu: cuDNN has none), overlapping
 * windows, after a convolution (NHWC) and on the NCHW input. */
static int op_max_dilated(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *a, *b;
    dp_conv2d_params pc = {.pad_h = 1, .pad_w = 1};
    dp_pool2d_params p = {.kernel_h = 3,
                          .kernel_w = 2,
                          .stride_h = 1,
                          .stride_w = 2,
                          .pad_h = 1,
                          .pad_w = 1,
                          .ceil_mode = true,
                          .dilation_h = 2,
                          .dilation_w = 3};
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &pc);
    if (rc == 0)
        rc = dp_max_pool2d(&a, h, &p);
    if (rc == 0)
        rc = dp_max_pool2d(&b, l[0], &p);
    if (rc == 0)
        rc = dp_flatten(&a, a);
    if (rc == 0)
        rc = dp_flatten(&b, b);
    return rc < 0 ? rc : dp_concat(y, (dp_tensor_t *[]){a, b}, 2);
}

static const op_case max_dilated_case = {
    "max_pool2d dilated", 2, {{4, {3, 2, 9, 10}, false}, {4, {2, 2, 3, 3}, false}}, op_max_dilated};

/* Batch norm (training, fused ReLU) after a convolution, then the adaptive
 * average pool of ResNet's head with overlapping windows. */
static int op_bn(dp_tensor_t **y, dp_tensor_t **l, bool training)
{
    dp_tensor_t *h, *b;
    dp_conv2d_params pc = {.pad_h = 1, .pad_w = 1};
    dp_batch_norm_params pb = {.training = training, .relu = true};
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &pc);
    if (rc == 0)
        rc = dp_batch_norm2d(&b, h, l[2], l[3], l[4], l[5], &pb);
    return rc < 0 ? rc : dp_adaptive_avg_pool2d(y, b, 3, 3);
}

static int op_bn_train(dp_tensor_t **y, dp_tensor_t **l)
{
    return op_bn(y, l, true);
}

static int op_bn_eval(dp_tensor_t **y, dp_tensor_t **l)
{
    return op_bn(y, l, false);
}

#define BN_LEAVES                                                                                  \
    {                                                                                              \
        {4, {6, 3, 7, 7}, false}, {4, {4, 3, 3, 3}, false}, {1, {4}, false}, {1, {4}, false},      \
            {1, {4}, true},                                                                        \
        {                                                                                          \
            1, {4}, true                                                                           \
        }                                                                                          \
    }

static const op_case bn_train_case = {"batch_norm2d train", 6, BN_LEAVES, op_bn_train};
static const op_case bn_eval_case = {"batch_norm2d eval", 6, BN_LEAVES, op_bn_eval};

/* Linear with bias, ReLU and a residual add. */
static int op_linear(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *r;
    int rc = dp_linear(&h, l[0], l[1], l[2], DP_WEIGHT_OUT_IN);
    if (rc == 0)
        rc = dp_relu(&r, h);
    return rc < 0 ? rc : dp_add(y, r, h);
}

static const op_case linear_case = {
    "linear", 3, {{2, {33, 17}, false}, {2, {12, 17}, false}, {1, {12}, false}}, op_linear};

static int op_leaky_relu(dp_tensor_t **y, dp_tensor_t **l)
{
    return dp_leaky_relu(y, l[0], 0.2f);
}

static const op_case leaky_relu_case = {"leaky_relu", 1, {{4, {3, 4, 5, 6}, false}}, op_leaky_relu};

/* Every activation of the same input, summed: one comparison covers each
 * kind's forward and backward. */
static int op_activations(dp_tensor_t **y, dp_tensor_t **l)
{
    static const float params[DP_ACT_COUNT][2] = {{-1, 2},        {0, 0}, {0.2f, 0.5f}, {0.7f, 0},
                                                  {1.67f, 1.05f}, {0, 0}, {0, 0},       {0, 0}};
    dp_tensor_t *sum = NULL;
    for (int k = 0; k < DP_ACT_COUNT; k++) {
        dp_tensor_t *a;
        int rc = dp_activation(&a, l[0], (dp_activation_kind)k, params[k][0], params[k][1]);
        if (rc == 0 && sum)
            rc = dp_add(&a, a, sum);
        if (rc < 0)
            return rc;
        sum = a;
    }
    *y = sum;
    return 0;
}

static const op_case activations_case = {
    "activations", 1, {{4, {3, 4, 5, 6}, false}}, op_activations};

static void conv2d_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    compare_case(&conv_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&conv_lenet_case, TOL_FORWARD, TOL_GRAD);
    dp_set_tf32(true);
}

static void conv_geometry_and_transpose_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    compare_case(&conv_geometry_case, TOL_FORWARD, TOL_GRAD);
    dp_set_tf32(true);
}

static void conv2d_tf32_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(true);
    compare_case(&conv_case, tol_tf32(), tol_tf32());
}

static void pool2d_matches_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    compare_case(&pool_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&avg_nchw_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&max_dilated_case, TOL_FORWARD, TOL_GRAD);
    dp_set_tf32(true);
}

static void batch_norm_and_adaptive_pool_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    compare_case(&bn_train_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&bn_eval_case, TOL_FORWARD, TOL_GRAD);
    dp_set_tf32(true);
}

static void linear_relu_add_loss_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    /* cuBLAS runs float32 either way; off all the same, so that the tight
     * tolerances never meet TF32 whatever an earlier test left set. */
    dp_set_tf32(false);
    compare_case(&linear_case, TOL_FORWARD, TOL_GRAD);
    dp_set_tf32(true);
}

static void leaky_relu_and_activations_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    compare_case(&leaky_relu_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&activations_case, TOL_FORWARD, TOL_GRAD);
}

/* A batch beyond 2^31 elements a tensor is convolved and pooled in slices
 * along N, the weight and bias gradients of later slices added to the
 * first's: with the slice size lowered, the cases' small batches split
 * into slices of 1 or 2 samples (and a last one shorter), and must still
 * match the CPU device. */
static void conv_and_pool_split_along_n_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    dp_set_tf32(false);
    int64_t saved = dp__cuda_slice_max_elems;
    dp__cuda_slice_max_elems = 2 * 3 * 11 * 9; /* conv_case: 2 samples of x a slice */
    compare_case(&conv_case, TOL_FORWARD, TOL_GRAD);
    dp__cuda_slice_max_elems = 8 * 28 * 28; /* one sample of y a slice */
    compare_case(&conv_lenet_case, TOL_FORWARD, TOL_GRAD);
    dp__cuda_slice_max_elems = 3 * 5 * 12 * 12; /* pool_case: slices of 3 and 1 */
    compare_case(&pool_case, TOL_FORWARD, TOL_GRAD);
    dp__cuda_slice_max_elems = saved;
    dp_set_tf32(true);
}

/* The bias gradient's kernel (one block per column, a fixed tree) against
 * dp__cuda_bias_grad_host, which adds in the same order: the same bits
 * (nvcc --fmad=false), and close to the CPU device, which adds the rows in
 * order. LeNet's first convolution's shape (20 columns, 173k rows), and
 * more columns than blocks of one wave. */
static void bias_grad_matches_its_host_order_and_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const int64_t shapes[2][2] = {{256 * 26 * 26, 20}, {1003, 700}};
    for (int k = 0; k < 2; k++) {
        int64_t rows = shapes[k][0], cols = shapes[k][1], n = rows * cols;
        float *dy = malloc((size_t)n * sizeof *dy);
        float *host = malloc((size_t)cols * sizeof *host), *got[2];
        fill_random(dy, n, 11 + (uint64_t)k);
        dp__cuda_bias_grad_host(dy, host, rows, cols);
        const char *names[2] = {"cuda:0", "cpu:0"};
        for (int d = 0; d < 2; d++) {
            dp_device_t *dev;
            dp_tensor_t *tdy, *tdb;
            assert_int_equal(dp_device_open(&dev, names[d], 1), 0);
            int64_t shape[2] = {rows, cols};
            assert_int_equal(dp_tensor_from_host(&tdy, dev, DP_F32, 2, shape, dy), 0);
            assert_int_equal(dp_tensor_new(&tdb, dev, DP_F32, 1, &cols), 0);
            dp__bias_args a = {.dy = tdy->data, .b = tdb->data, .rows = rows, .cols = cols};
            assert_int_equal(dev->ops->bias_grad(dev, &a), 0);
            dp__tensor_written(tdb);
            got[d] = malloc((size_t)cols * sizeof *got[d]);
            assert_int_equal(dp_tensor_to_host(tdb, got[d], (size_t)cols * sizeof(float)), 0);
            dp_tensor_free(tdy);
            dp_tensor_free(tdb);
            dp_device_close(dev);
        }
        for (int64_t j = 0; j < cols; j++)
            if (memcmp(&got[0][j], &host[j], sizeof host[j]) != 0)
                fail_msg("%lld x %lld: column %lld: the kernel gives %.9g, its order on the host "
                         "%.9g",
                         (long long)rows, (long long)cols, (long long)j, got[0][j], host[j]);
        /* The CPU device's chains of up to 173k additions round more than
         * the tree (8e-6 here on the host): the gradient tolerance. */
        double e = rel_error(got[0], got[1], cols);
        if (e > TOL_GRAD)
            fail_msg("%lld x %lld: the bias gradient differs from the CPU device's by %.3g",
                     (long long)rows, (long long)cols, e);
        free(dy);
        free(host);
        free(got[0]);
        free(got[1]);
    }
}

/* Accuracy counts argmax hits; fill writes every element. */
static void accuracy_and_fill_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    const char *names[2] = {"cpu:0", "cuda:0"};
    float correct[2], filled[2][5];
    int64_t n = 37, shape[2] = {37, CLASSES}, five = 5, one = 1;
    float *logits = malloc((size_t)(n * CLASSES) * sizeof *logits);
    int32_t labels[37];
    fill_random(logits, n * CLASSES, 3);
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)(i % CLASSES);
    for (int d = 0; d < 2; d++) {
        dp_device_t *dev;
        dp_tensor_t *z, *y, *c, *f;
        assert_int_equal(dp_device_open(&dev, names[d], 1), 0);
        assert_int_equal(dp_tensor_from_host(&z, dev, DP_F32, 2, shape, logits), 0);
        assert_int_equal(dp_tensor_from_host(&y, dev, DP_I32, 1, &n, labels), 0);
        assert_int_equal(dp_tensor_new(&c, dev, DP_F32, 1, &one), 0);
        assert_int_equal(dp_tensor_fill(c, 2.0f), 0);
        assert_int_equal(dp_accuracy_accumulate(c, z, y), 0);
        assert_int_equal(dp_tensor_to_host(c, &correct[d], sizeof correct[d]), 0);
        assert_int_equal(dp_tensor_new(&f, dev, DP_F32, 1, &five), 0);
        assert_int_equal(dp_tensor_fill(f, -1.5f), 0);
        assert_int_equal(dp_tensor_to_host(f, filled[d], sizeof filled[d]), 0);
        dp_tensor_free(z);
        dp_tensor_free(y);
        dp_tensor_free(c);
        dp_tensor_free(f);
        dp_device_close(dev);
    }
    assert_true(correct[0] == correct[1]);
    assert_memory_equal(filled[0], filled[1], sizeof filled[0]);
    free(logits);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv2d_matches_cpu),
        cmocka_unit_test(conv2d_tf32_matches_cpu),
        cmocka_unit_test(conv_geometry_and_transpose_match_cpu),
        cmocka_unit_test(pool2d_matches_cpu),
        cmocka_unit_test(batch_norm_and_adaptive_pool_match_cpu),
        cmocka_unit_test(linear_relu_add_loss_match_cpu),
        cmocka_unit_test(leaky_relu_and_activations_match_cpu),
        cmocka_unit_test(accuracy_and_fill_match_cpu),
        cmocka_unit_test(conv_and_pool_split_along_n_match_cpu),
        cmocka_unit_test(bias_grad_matches_its_host_order_and_cpu),
    };
    const char *why = no_gpu_reason();
    if (why)
        printf("test_cuda_ops: no CUDA GPU here (%s): %d GPU tests skipped\n", why,
               (int)(sizeof tests / sizeof tests[0]));
    fflush(stdout);
    return tu_run(argc, argv, tests, NULL, NULL);
}

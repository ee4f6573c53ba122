/* The CUDA device against the CPU device for the graph ops (PReLU,
 * softmax and log-softmax, broadcast binary ops, concat and split, global
 * max pooling, matmul and transpose), forward and backward on the same
 * inputs, each after a convolution (NHWC activations) and on NCHW or 2-D
 * inputs. Without a GPU (a CPU-only build, or no GPU visible to the CUDA
 * runtime) every test says so on stdout and is skipped. */
#include "cudautil.h"

#include "dp/dp.h"

#include <stdio.h>

static const dp_conv2d_params same = {.pad_h = 1, .pad_w = 1};

/* PReLU per channel on a convolution's NHWC output, then one slope on the
 * flattened features. */
static int op_prelu(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *p, *f;
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &same);
    if (rc == 0)
        rc = dp_prelu(&p, h, l[2]);
    if (rc == 0)
        rc = dp_flatten(&f, p);
    return rc < 0 ? rc : dp_prelu(y, f, l[3]);
}

static const op_case prelu_case = {
    "prelu",
    4,
    {{4, {4, 3, 5, 6}, false}, {4, {3, 3, 3, 3}, false}, {1, {3}, false}, {1, {1}, false}},
    op_prelu};

/* Softmax and log-softmax over the channels of an NHWC output, summed,
 * and log-softmax of an NCHW input's rows. */
static int op_softmax(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *s, *ls, *sum, *ln;
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &same);
    if (rc == 0)
        rc = dp_softmax(&s, h);
    if (rc == 0)
        rc = dp_log_softmax(&ls, h);
    if (rc == 0)
        rc = dp_add(&sum, s, ls);
    if (rc == 0)
        rc = dp_log_softmax(&ln, l[0]);
    return rc < 0 ? rc : dp_binary(y, DP_BINARY_MUL, sum, ln);
}

static const op_case softmax_case = {
    "softmax", 2, {{4, {4, 5, 6, 5}, false}, {4, {5, 5, 3, 3}, false}}, op_softmax};

/* Every op and broadcast on an NHWC output h: h * scale (1, C, 1, 1),
 * shift (C, 1, 1) - that, times a per-sample gate (N, C, 1, 1), divided by
 * a positive constant (one element, no gradient). */
static int op_binary(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *a, *b, *c;
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &same);
    if (rc == 0)
        rc = dp_binary(&a, DP_BINARY_MUL, h, l[2]);
    if (rc == 0)
        rc = dp_binary(&b, DP_BINARY_SUB, l[3], a);
    if (rc == 0)
        rc = dp_binary(&c, DP_BINARY_MUL, b, l[4]);
    return rc < 0 ? rc : dp_binary(y, DP_BINARY_DIV, c, l[5]);
}

static const op_case binary_case = {"binary",
                                    6,
                                    {{4, {4, 3, 5, 6}, false},
                                     {4, {3, 3, 3, 3}, false},
                                     {4, {1, 3, 1, 1}, false},
                                     {3, {3, 1, 1}, false},
                                     {4, {4, 3, 1, 1}, false},
                                     {1, {1}, true}},
                                    op_binary};

/* concat(h NHWC, x NCHW, h) split into 2, 5 and 4 channels, concatenated
 * back as (third, first); the middle piece unused. */
static int op_concat(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *c, *p[3];
    const int64_t sizes[3] = {2, 5, 4};
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &same);
    if (rc == 0)
        rc = dp_concat(&c, (dp_tensor_t *[3]){h, l[0], h}, 3);
    if (rc == 0)
        rc = dp_split(p, c, 3, sizes);
    return rc < 0 ? rc : dp_concat(y, (dp_tensor_t *[2]){p[2], p[0]}, 2);
}

static const op_case concat_case = {
    "concat", 2, {{4, {3, 3, 5, 4}, false}, {4, {4, 3, 3, 3}, false}}, op_concat};

/* Global max pooling of an NHWC output, flattened, times a transposed
 * weight: MatMul(x, Transpose(w)). */
static int op_pool_matmul(dp_tensor_t **y, dp_tensor_t **l)
{
    dp_tensor_t *h, *g, *f, *wt;
    int rc = dp_conv2d(&h, l[0], l[1], NULL, &same);
    if (rc == 0)
        rc = dp_global_max_pool2d(&g, h);
    if (rc == 0)
        rc = dp_flatten(&f, g);
    if (rc == 0)
        rc = dp_transpose(&wt, l[2]);
    return rc < 0 ? rc : dp_matmul(y, f, wt);
}

static const op_case pool_matmul_case = {
    "global max pool, matmul, transpose",
    3,
    {{4, {4, 2, 7, 9}, false}, {4, {6, 2, 3, 3}, false}, {2, {40, 6}, false}},
    op_pool_matmul};

static void graph_ops_match_cpu(void **state)
{
    (void)state;
    REQUIRE_GPU();
    /* float32 throughout, as the tolerances assume (cudautil.h) */
    dp_set_tf32(false);
    compare_case(&prelu_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&softmax_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&binary_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&concat_case, TOL_FORWARD, TOL_GRAD);
    compare_case(&pool_matmul_case, TOL_FORWARD, TOL_GRAD);
    dp_set_tf32(true);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(graph_ops_match_cpu),
    };
    const char *why = no_gpu_reason();
    if (why)
        printf("test_cuda_graph_ops: no CUDA GPU here (%s): %d GPU tests skipped\n", why,
               (int)(sizeof tests / sizeof tests[0]));
    fflush(stdout);
    return tu_run(argc, argv, tests, NULL, NULL);
}

/* Split-invariant sums (dp_set_split_invariant). With blocks of 8 rows, a
 * parameter's gradient over a batch of 32 rows equals, bit for bit, the
 * float sum of its gradients over the two halves (what 2 devices and their
 * allreduce compute) and the pairwise sum over the four quarters (4
 * devices), and the input's gradient equals the parts' (every kernel runs
 * on blocks of 8 rows, whatever the share): conv2d with bias in both input
 * layouts, conv_transpose2d, linear, prelu, and LeNet's first convolution
 * and linear layer (the seed's weight layout). Batch norm's outputs, dx
 * and gamma and beta gradients under SyncBatchNorm over 2 devices equal
 * the whole batch's likewise. Without blocks the same comparisons differ
 * (printed, for contrast); with them the outputs, dx and gradients are
 * still the op's own: within float rounding of the unblocked ones (the
 * parameters' gradients within the README's 3.3e-6 of the largest, the
 * outputs and dx within 1e-5), so that a blocked pass that computed
 * something else fails even when every split agrees with it. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { ROWS = 32, BLOCK = 8, MAXP = 3, MAXG = 1 << 18 };

/* The blocked passes against the plain ones, relative to the largest
 * value: the parameters' gradients (README, "The same bits on any split"),
 * then the outputs and dx. */
#define GRADS_BOUND 3.3e-6
#define VALUES_BOUND 1e-5

/* The ops, and LeNet's first convolution and first linear layer (whose
 * kernels oneDNN picks by the batch's size). */
typedef enum which { CONV, CONV_NCHW, CONV_T, LINEAR, PRELU, LENET_CONV, LENET_FC, OPS } which;
static const char *const names[OPS] = {
    "conv2d (NHWC input)", "conv2d (NCHW input)", "conv_transpose2d", "linear", "prelu",
    "LeNet's conv2d",      "LeNet's linear"};

/* Each op's input shape per row and its parameters' shapes. */
typedef struct spec {
    int xdim;
    int64_t xrow[3];
    int np;
    int pdim[MAXP];
    int64_t pshape[MAXP][4];
} spec;

static const spec specs[OPS] = {
    [CONV] = {3, {3, 9, 9}, 2, {4, 1}, {{4, 3, 3, 3}, {4}}},
    [CONV_NCHW] = {3, {3, 9, 9}, 2, {4, 1}, {{4, 3, 3, 3}, {4}}},
    [CONV_T] = {3, {4, 5, 5}, 2, {4, 1}, {{4, 3, 3, 3}, {3}}},
    [LINEAR] = {1, {20}, 2, {2, 1}, {{7, 20}, {7}}},
    [PRELU] = {3, {3, 4, 4}, 1, {1}, {{3}}},
    [LENET_CONV] = {3, {1, 28, 28}, 2, {4, 1}, {{6, 1, 5, 5}, {6}}},
    [LENET_FC] = {1, {400}, 2, {2, 1}, {{400, 120}, {120}}},
};

static int64_t count(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* Deterministic values: x, the parameters and the loss's projection. */
static float value(uint64_t stream, int64_t i)
{
    dp_rng rng;
    dp_rng_init(&rng, 7, stream * 1000003u + (uint64_t)i);
    return dp_rng_normal(&rng);
}

/* The gradients of op's parameters (concatenated into g), then the
 * input's (n rows), then the output y (n rows), of the loss sum(y * r)
 * over rows [first, first + n) of the batch. */
static int64_t grads(which op, dp_device_t *dev, int first, int n, float *g)
{
    const spec *s = &specs[op];
    int64_t xs[4] = {n, s->xrow[0], s->xrow[1], s->xrow[2]};
    int64_t per_row = count(s->xdim, s->xrow);
    static float host[ROWS * 1024];
    for (int64_t i = 0; i < n * per_row; i++)
        host[i] = value(1, first * per_row + i);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_tape_begin(tape);
    dp_tensor_t *input, *x, *p[MAXP], *y, *eye_w = NULL;
    assert_int_equal(dp_tensor_from_host(&input, dev, DP_F32, s->xdim + 1, xs, host), 0);
    assert_int_equal(dp_tensor_set_requires_grad(input, NULL), 0);
    x = input;
    if (op == CONV) { /* an NHWC input, as a convolution's output is */
        dp_conv2d_params id = {0};
        dp_tensor_t *w1, *x1;
        int64_t ws[4] = {3, 3, 1, 1};
        float eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
        assert_int_equal(dp_tensor_from_host(&w1, dev, DP_F32, 4, ws, eye), 0);
        assert_int_equal(dp_conv2d(&x1, input, w1, NULL, &id), 0);
        x = x1; /* the tape's */
        eye_w = w1;
    }
    for (int j = 0; j < s->np; j++) {
        int64_t m = count(s->pdim[j], s->pshape[j]);
        static float v[MAXG];
        for (int64_t i = 0; i < m; i++)
            v[i] = 0.3f * value(2 + (uint64_t)j, i);
        assert_int_equal(dp_tensor_from_host(&p[j], dev, DP_F32, s->pdim[j], s->pshape[j], v), 0);
        assert_int_equal(dp_tensor_set_requires_grad(p[j], NULL), 0);
    }
    dp_conv2d_params cp = {.pad_h = 1, .pad_w = 1};
    dp_conv_transpose2d_params tp = {.stride_h = 2, .stride_w = 2};
    switch (op) {
    case CONV:
    case CONV_NCHW:
    case LENET_CONV:
        assert_int_equal(dp_conv2d(&y, x, p[0], p[1], &cp), 0);
        break;
    case CONV_T:
        assert_int_equal(dp_conv_transpose2d(&y, x, p[0], p[1], &tp), 0);
        break;
    case LINEAR:
        assert_int_equal(dp_linear(&y, x, p[0], p[1], DP_WEIGHT_OUT_IN), 0);
        break;
    case LENET_FC: /* the seed's torch.mm layout */
        assert_int_equal(dp_linear(&y, x, p[0], p[1], DP_WEIGHT_IN_OUT), 0);
        break;
    default:
        assert_int_equal(dp_prelu(&y, x, p[0]), 0);
        break;
    }
    /* loss = y (flattened, 1 x m) . r (m x 1), r the rows' own values */
    int64_t m = dp_tensor_numel(y), flat[2] = {1, m}, rs[2] = {m, 1}, one = 1;
    static float r[ROWS * 8192];
    for (int64_t i = 0; i < m; i++)
        r[i] = value(9, first * (m / n) + i);
    dp_tensor_t *yf, *rr, *l, *loss;
    assert_int_equal(dp_reshape(&yf, y, 2, flat), 0);
    assert_int_equal(dp_tensor_from_host(&rr, dev, DP_F32, 2, rs, r), 0);
    assert_int_equal(dp_linear(&l, yf, rr, NULL, DP_WEIGHT_IN_OUT), 0);
    assert_int_equal(dp_reshape(&loss, l, 1, &one), 0);
    dp_zero_grad(p, s->np);
    assert_int_equal(dp_backward(loss), 0);
    int64_t at = 0;
    for (int j = 0; j < s->np; j++) {
        int64_t k = count(s->pdim[j], s->pshape[j]);
        assert_int_equal(dp_tensor_to_host(dp_tensor_grad(p[j]), g + at, (size_t)k * 4), 0);
        at += k;
        dp_tensor_free(p[j]);
    }
    /* then dx, the rows' own, and y */
    assert_int_equal(
        dp_tensor_to_host(dp_tensor_grad(input), g + at, (size_t)(n * per_row) * sizeof *g), 0);
    at += n * per_row;
    assert_int_equal(dp_tensor_to_host(y, g + at, (size_t)m * sizeof *g), 0);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(input);
    dp_tensor_free(eye_w);
    dp_tensor_free(rr);
    return m;
}

static int64_t grads_numel(which op)
{
    int64_t n = 0;
    for (int j = 0; j < specs[op].np; j++)
        n += count(specs[op].pdim[j], specs[op].pshape[j]);
    return n;
}

/* How many of the whole batch's parameter gradients differ in any bit
 * from the sum of the halves' (parts 2) or from the pairwise sum of the
 * quarters' (parts 4), and of its dx and outputs from the parts', with
 * blocks of `block` rows (0: none). whole gets the whole batch's
 * gradients, dx and outputs (grads' layout); *values their count after the
 * gradients. */
static int parts_differ(which op, dp_device_t *dev, int64_t block, int parts, float *whole,
                        int64_t *values)
{
    static float q[4][MAXG];
    int n = ROWS / parts;
    int64_t np = grads_numel(op), per_row = count(specs[op].xdim, specs[op].xrow);
    dp_set_split_invariant(block);
    int64_t out = grads(op, dev, 0, ROWS, whole), out_row = out / ROWS;
    for (int k = 0; k < parts; k++)
        grads(op, dev, k * n, n, q[k]);
    dp_set_split_invariant(0);
    int differ = 0;
    for (int64_t i = 0; i < np; i++) {
        float sum = parts == 2 ? q[0][i] + q[1][i] : (q[0][i] + q[1][i]) + (q[2][i] + q[3][i]);
        differ += memcmp(&sum, &whole[i], sizeof sum) != 0;
    }
    for (int k = 0; k < parts; k++) {
        differ += memcmp(q[k] + np, whole + np + k * n * per_row,
                         (size_t)(n * per_row) * sizeof(float)) != 0;
        differ += memcmp(q[k] + np + n * per_row, whole + np + ROWS * per_row + k * n * out_row,
                         (size_t)(n * out_row) * sizeof(float)) != 0;
    }
    *values = ROWS * per_row + out;
    return differ;
}

static void parameter_gradients(void **state)
{
    (void)state;
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    static float plain[MAXG], split[MAXG];
    for (which op = 0; op < OPS; op++) {
        int64_t values;
        int off = parts_differ(op, dev, 0, 2, plain, &values);
        int on = parts_differ(op, dev, BLOCK, 2, split, &values);
        int quarters = parts_differ(op, dev, BLOCK, 4, split, &values);
        /* the same gradients, summed in another order; the same dx and
         * outputs */
        int64_t np = grads_numel(op);
        double g = tu_max_rel_diff_of(names[op], split, plain, np);
        double v = tu_max_rel_diff_of(names[op], split + np, plain + np, values);
        printf("%-20s %4lld gradients: halves' sum, dx and outputs vs whole batch differ in %3d "
               "without blocks, %d with blocks of %d (quarters' sum: %d); blocked vs not: "
               "gradients %.3g of the largest, dx and outputs %.2g\n",
               names[op], (long long)np, off, on, BLOCK, quarters, g, v);
        assert_int_equal(on, 0);
        assert_int_equal(quarters, 0);
        tu_assert_at_most(g, GRADS_BOUND);
        tu_assert_at_most(v, VALUES_BOUND);
    }
    /* 12 rows, a block and a short one: still the op's gradient */
    static float a[MAXG], b[MAXG];
    grads(CONV, dev, 0, 12, a);
    dp_set_split_invariant(BLOCK);
    int64_t out = grads(CONV, dev, 0, 12, b);
    dp_set_split_invariant(0);
    int64_t all = grads_numel(CONV) + 12 * count(3, specs[CONV].xrow) + out;
    for (int64_t i = 0; i < all; i++)
        tu_assert_close(b[i], a[i], 1e-5, 1e-5);
    dp_device_close(dev);
}

/* Batch norm over N = 8 images, C = 3, 5 x 5, in training mode: on one
 * device, or as SyncBatchNorm over 2 devices of 4 images each; the gamma
 * and beta gradients (summed over the parts in float, as the allreduce
 * does), the outputs and dx into out. */
enum { BN = 8, BC = 3, BHW = 25, BE = BN * BC * BHW };

typedef struct bn_result {
    float y[BE], dx[BE], dgamma[BC], dbeta[BC];
} bn_result;

static void batch_norm_parts(dp_device_t *const *devs, dp_bn_sync_t *sync, int parts,
                             bn_result *out)
{
    int n = BN / parts;
    float gamma[BC] = {1.5f, 0.7f, 1.1f}, beta[BC] = {0.1f, -0.2f, 0.3f}, zero[BC] = {0},
          one[BC] = {1, 1, 1};
    static float x[BE], r[BE];
    for (int i = 0; i < BE; i++) {
        x[i] = value(11, i) + 2.0f;
        r[i] = value(12, i);
    }
    memset(out->dgamma, 0, sizeof out->dgamma);
    memset(out->dbeta, 0, sizeof out->dbeta);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_tape_begin(tape);
    dp_tensor_t *t[2][5], *y[2], *loss[2], *rr[2];
    /* every part's forward before anything is read: the exchange waits
     * for all */
    for (int k = 0; k < parts; k++) {
        int64_t xs[4] = {n, BC, 5, 5}, cs = BC, m = (int64_t)n * BC * BHW, flat[2] = {1, m},
                rs[2] = {m, 1}, one_elem = 1;
        const float *host[5] = {x + k * m, gamma, beta, zero, one};
        assert_int_equal(dp_tensor_from_host(&t[k][0], devs[k], DP_F32, 4, xs, host[0]), 0);
        for (int j = 1; j < 5; j++)
            assert_int_equal(dp_tensor_from_host(&t[k][j], devs[k], DP_F32, 1, &cs, host[j]), 0);
        for (int j = 0; j < 3; j++)
            assert_int_equal(dp_tensor_set_requires_grad(t[k][j], NULL), 0);
        dp_batch_norm_params p = {.training = true};
        if (parts == 2)
            p = (dp_batch_norm_params){.training = true, .sync = sync, .rank = k, .ranks = 2};
        assert_int_equal(dp_batch_norm2d(&y[k], t[k][0], t[k][1], t[k][2], t[k][3], t[k][4], &p),
                         0);
        dp_tensor_t *yf, *l;
        assert_int_equal(dp_reshape(&yf, y[k], 2, flat), 0);
        assert_int_equal(dp_tensor_from_host(&rr[k], devs[k], DP_F32, 2, rs, r + k * m), 0);
        assert_int_equal(dp_linear(&l, yf, rr[k], NULL, DP_WEIGHT_IN_OUT), 0);
        assert_int_equal(dp_reshape(&loss[k], l, 1, &one_elem), 0);
        dp_zero_grad(t[k], 3);
    }
    for (int k = 0; k < parts; k++)
        assert_int_equal(dp_backward(loss[k]), 0);
    for (int k = 0; k < parts; k++) {
        size_t bytes = (size_t)n * BC * BHW * sizeof(float);
        float dg[BC], db[BC];
        assert_int_equal(dp_tensor_to_host(y[k], out->y + k * n * BC * BHW, bytes), 0);
        assert_int_equal(
            dp_tensor_to_host(dp_tensor_grad(t[k][0]), out->dx + k * n * BC * BHW, bytes), 0);
        assert_int_equal(dp_tensor_to_host(dp_tensor_grad(t[k][1]), dg, sizeof dg), 0);
        assert_int_equal(dp_tensor_to_host(dp_tensor_grad(t[k][2]), db, sizeof db), 0);
        for (int c = 0; c < BC; c++) {
            out->dgamma[c] += dg[c];
            out->dbeta[c] += db[c];
        }
    }
    dp_tape_end(tape);
    dp_tape_close(tape);
    for (int k = 0; k < parts; k++) {
        for (int j = 0; j < 5; j++)
            dp_tensor_free(t[k][j]);
        dp_tensor_free(rr[k]);
    }
}

static int bn_differ(const bn_result *a, const bn_result *b)
{
    int d = 0;
    for (int i = 0; i < BE; i++)
        d += memcmp(&a->y[i], &b->y[i], 4) != 0 || memcmp(&a->dx[i], &b->dx[i], 4) != 0;
    for (int c = 0; c < BC; c++)
        d += memcmp(&a->dgamma[c], &b->dgamma[c], 4) != 0 ||
             memcmp(&a->dbeta[c], &b->dbeta[c], 4) != 0;
    return d;
}

static void sync_batch_norm(void **state)
{
    (void)state;
    dp_device_t *devs[2];
    tu_open_cpu_devices(devs, 2);
    dp_bn_sync_t *sync;
    assert_int_equal(dp_bn_sync_init(&sync, BC, 2), 0);
    static bn_result whole[2], halves[2];
    int64_t blocks[2] = {0, 2};
    for (int s = 0; s < 2; s++) {
        dp_set_split_invariant(blocks[s]);
        batch_norm_parts(devs, sync, 1, &whole[s]);
        batch_norm_parts(devs, sync, 2, &halves[s]);
    }
    dp_set_split_invariant(0);
    int off = bn_differ(&whole[0], &halves[0]), on = bn_differ(&whole[1], &halves[1]);
    printf("batch norm, 2 halves under SyncBatchNorm vs the whole batch: %d of %d outputs, dx "
           "and (summed) gamma and beta gradients differ without blocks, %d with blocks of 2\n",
           off, 2 * BE + 2 * BC, on);
    assert_int_equal(on, 0);
    for (int c = 0; c < BC; c++) {
        tu_assert_close(whole[1].dgamma[c], whole[0].dgamma[c], 1e-5, 1e-6);
        tu_assert_close(whole[1].dbeta[c], whole[0].dbeta[c], 1e-5, 1e-6);
    }
    dp_bn_sync_close(sync);
    dp_devices_close(devs, 2);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parameter_gradients),
        cmocka_unit_test(sync_batch_norm),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

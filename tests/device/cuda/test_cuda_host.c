/* The CUDA backend's host-side logic, which needs no GPU (src/device/cuda/
 * cuda_host.c, built in every configuration): cuDNN's int sizes checked in
 * int64 and the split of a batch along N, the TF32 setting taken when a
 * convolution is called, the bias gradient's summation order, and the
 * current-device scope, followed through the backend's own alloc and free
 * in a CUDA build. */
#include "cudautil.h"

#include "device/cuda/cuda_host.h"
#include "device/device.h"
#include "dp/dp.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cuDNN's int sizes --------------------------------------------------------- */

static void dims_in_both_layouts(void **state)
{
    (void)state;
    const int64_t shape[4] = {2, 3, 5, 7};
    dp__cuda_dims d;
    assert_int_equal(dp__cuda_dims_of(shape, false, &d), 0);
    int nchw[8] = {2, 3, 5, 7, 105, 35, 7, 1};
    assert_memory_equal(&d, nchw, sizeof nchw);
    assert_int_equal(dp__cuda_dims_of(shape, true, &d), 0);
    int nhwc[8] = {2, 3, 5, 7, 105, 1, 21, 3};
    assert_memory_equal(&d, nhwc, sizeof nhwc);
    /* The largest tensor cuDNN takes, 2^31 - 1 elements. */
    const int64_t largest[4] = {1, 1, 1, INT32_MAX};
    assert_int_equal(dp__cuda_dims_of(largest, false, &d), 0);
    assert_int_equal(d.sn, INT32_MAX);
}

/* c * h * w = 2^31 wraps to a negative int where it is multiplied in int
 * (the old dp__cuda_tensor_desc); in int64 it is refused. So are 2^31
 * elements spread over N, and sizes whose products overflow an int64 if
 * taken all at once. */
static void dims_refuse_what_an_int_cannot_hold(void **state)
{
    (void)state;
    dp__cuda_dims d;
    const int64_t wraps[4] = {1, 65536, 256, 128};
    assert_int_equal(dp__cuda_dims_of(wraps, false, &d), DP_EINVAL);
    assert_int_equal(dp__cuda_dims_of(wraps, true, &d), DP_EINVAL);
    const int64_t over_n[4] = {2, 1024, 1024, 1024};
    assert_int_equal(dp__cuda_dims_of(over_n, true, &d), DP_EINVAL);
    const int64_t one_more[4] = {2, 1, 1, (int64_t)1 << 30};
    assert_int_equal(dp__cuda_dims_of(one_more, false, &d), DP_EINVAL);
    const int64_t huge[4] = {(int64_t)1 << 40, (int64_t)1 << 40, 1, 1};
    assert_int_equal(dp__cuda_dims_of(huge, false, &d), DP_EINVAL);
    const int64_t negative[4] = {1, -1, 2, 2};
    assert_int_equal(dp__cuda_dims_of(negative, false, &d), DP_EINVAL);
}

static void rows_per_slice_keep_every_tensor_in_an_int(void **state)
{
    (void)state;
    /* ResNet's first convolution at 224 x 224: 3x224x224 in, 64x112x112 out. */
    int64_t per[2] = {3 * 224 * 224, 64 * 112 * 112};
    assert_int_equal(dp__cuda_rows_per_slice(256, per, 2), 256);
    int64_t rows = dp__cuda_rows_per_slice(4096, per, 2);
    assert_int_equal(rows, INT32_MAX / (64 * 112 * 112));
    assert_true(rows * per[1] <= INT32_MAX && (rows + 1) * per[1] > INT32_MAX);
    int64_t too_big[1] = {(int64_t)INT32_MAX + 1};
    assert_int_equal(dp__cuda_rows_per_slice(4, too_big, 1), 0);
    int64_t empty[2] = {0, 10};
    assert_int_equal(dp__cuda_rows_per_slice(7, empty, 2), 7);
}

/* Slices point into the tensor at sample n0, with offsets in 64 bits. */
static void conv_slices_cut_activations_only(void **state)
{
    (void)state;
    float x[5 * 3 * 4 * 4], dy[5 * 2 * 4 * 4], w[2 * 3 * 3 * 3], b[2];
    dp__conv2d_args a = {
        .x = {.data = x, .dtype = DP_F32, .ndim = 4, .shape = {5, 3, 4, 4}},
        .dy = {.data = dy, .dtype = DP_F32, .ndim = 4, .nhwc = 1, .shape = {5, 2, 4, 4}},
        .dw = {.data = w, .dtype = DP_F32, .ndim = 4, .shape = {2, 3, 3, 3}},
        .db = {.data = b, .dtype = DP_F32, .ndim = 1, .shape = {2}},
        .pad_h = 1,
        .pad_w = 1};
    dp__conv2d_args s = dp__cuda_conv_rows(&a, 3, 2);
    assert_ptr_equal(s.x.data, x + 3 * 48);
    assert_ptr_equal(s.dy.data, dy + 3 * 32);
    assert_int_equal(s.x.shape[0], 2);
    assert_int_equal(s.dy.shape[0], 2);
    assert_int_equal(s.dy.nhwc, 1);
    assert_memory_equal(&s.dw, &a.dw, sizeof a.dw);
    assert_memory_equal(&s.db, &a.db, sizeof a.db);
    assert_null(s.y.data);
    assert_null(s.dx.data);

    /* Beyond 2^32 bytes: 2^20 samples of 2^12 floats. */
    dp__tdesc big = {
        .data = x, .dtype = DP_F32, .ndim = 4, .shape = {(int64_t)3 << 20, 16, 16, 16}};
    dp__tdesc far = dp__cuda_tdesc_rows(&big, (int64_t)1 << 20, 5);
    assert_true((uintptr_t)far.data - (uintptr_t)x == (uintptr_t)1 << 34);

    /* The slice size lowered as test_cuda_ops lowers it. */
    int64_t saved = dp__cuda_slice_max_elems;
    dp__cuda_slice_max_elems = 2 * 48;
    assert_int_equal(dp__cuda_conv_rows_per_slice(&a), 2);
    dp__cuda_slice_max_elems = saved;
    assert_int_equal(dp__cuda_conv_rows_per_slice(&a), 5);
}

static void pool_slices_cut_the_relu_mask_with_dx(void **state)
{
    (void)state;
    float x[4 * 2 * 6 * 6], dx[4 * 2 * 6 * 6], mask[4 * 2 * 6 * 6], y[4 * 2 * 3 * 3];
    dp__pool2d_args a = {.x = {.data = x, .dtype = DP_F32, .ndim = 4, .shape = {4, 2, 6, 6}},
                         .y = {.data = y, .dtype = DP_F32, .ndim = 4, .shape = {4, 2, 3, 3}},
                         .dx = {.data = dx, .dtype = DP_F32, .ndim = 4, .shape = {4, 2, 6, 6}},
                         .relu_mask = mask};
    dp__pool2d_args s = dp__cuda_pool_rows(&a, 2, 2);
    assert_ptr_equal(s.x.data, x + 2 * 72);
    assert_ptr_equal(s.dx.data, dx + 2 * 72);
    assert_ptr_equal(s.relu_mask, mask + 2 * 72);
    assert_ptr_equal(s.y.data, y + 2 * 18);
    assert_int_equal(s.y.shape[0], 2);
    int64_t saved = dp__cuda_slice_max_elems;
    dp__cuda_slice_max_elems = 71;
    assert_int_equal(dp__cuda_pool_rows_per_slice(&a), 0);
    dp__cuda_slice_max_elems = saved;
}

/* ---- TF32 at the call ---------------------------------------------------------- */

/* The command carries the setting of the moment it was made; a later
 * dp_set_tf32 (before the worker runs it) does not reach it. */
static void conv_command_takes_tf32_when_called(void **state)
{
    (void)state;
    bool before = dp_tf32_allowed();
    dp__conv2d_args a = {.stride_h = 1, .stride_w = 1};
    dp_set_tf32(false);
    dp__cuda_conv_cmd off = dp__cuda_conv_cmd_make(&a, false);
    dp_set_tf32(true);
    dp__cuda_conv_cmd on = dp__cuda_conv_cmd_make(&a, true);
    dp_set_tf32(false);
    assert_false(off.tf32);
    assert_true(on.tf32);
    assert_false(off.accumulate);
    assert_true(on.accumulate);
    assert_memory_equal(&on.a, &a, sizeof a);
    dp_set_tf32(before);
}

/* ---- the bias gradient's order ------------------------------------------------- */

/* The kernel's order (thread chains of rows/256 additions, then a tree of
 * depth 8) bounds the rounding error by (ceil(rows/256) + 8) u sum|dy|,
 * u = 2^-24. A single chain over the rows (what one thread per column
 * did) exceeds that bound by far on 2^20 equal values (by about 40 times),
 * so the order is seen in the result. */
static void bias_grad_sums_in_the_kernels_tree_order(void **state)
{
    (void)state;
    enum { ROWS = 1 << 20, COLS = 2 };
    float *dy = malloc((size_t)ROWS * COLS * sizeof *dy), db[COLS];
    for (int64_t i = 0; i < ROWS; i++) {
        dy[i * COLS] = 0.1f;
        dy[i * COLS + 1] = (float)((i * 7919) % 1000) / 1000.0f - 0.25f;
    }
    dp__cuda_bias_grad_host(dy, db, ROWS, COLS);
    for (int j = 0; j < COLS; j++) {
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < ROWS; i++) {
            exact += dy[i * COLS + j];
            mag += fabs(dy[i * COLS + j]);
        }
        double bound = ((ROWS + DP__CUDA_BIAS_GRAD_THREADS - 1) / DP__CUDA_BIAS_GRAD_THREADS + 8) *
                       0x1p-24 * mag;
        if (!tu_close(db[j], exact, 0, bound))
            fail_msg("column %d: %.9g vs the exact %.9g, off by %.3g (the tree order's bound "
                     "%.3g)",
                     j, db[j], exact, fabs(db[j] - exact), bound);
    }
    free(dy);

    /* Fewer rows than threads, and a ragged last round. */
    float small[3 * 2] = {1, 2, 3, 4, 5, 6}, sdb[2];
    dp__cuda_bias_grad_host(small, sdb, 3, 2);
    assert_true(sdb[0] == 9.0f && sdb[1] == 12.0f);
    enum { R = 2 * DP__CUDA_BIAS_GRAD_THREADS + 3 };
    float ones[R], one_db;
    for (int i = 0; i < R; i++)
        ones[i] = 1.0f;
    dp__cuda_bias_grad_host(ones, &one_db, R, 1);
    assert_true(one_db == (float)R);
}

/* ---- the current device -------------------------------------------------------- */

/* A thread's current device as the CUDA runtime would keep it, with a log
 * of the devices set. */
static struct {
    int current, fail_set, sets[8], nsets;
} fake;

static int fake_get(int *ordinal)
{
    *ordinal = fake.current;
    return 0;
}

static int fake_get_fails(int *ordinal)
{
    (void)ordinal;
    return 1;
}

static int fake_set(int ordinal)
{
    if (fake.nsets < 8)
        fake.sets[fake.nsets++] = ordinal;
    if (ordinal == fake.fail_set)
        return 1;
    fake.current = ordinal;
    return 0;
}

static const dp__cuda_current_fns fake_fns = {fake_get, fake_set};
static const dp__cuda_current_fns fake_fns_no_get = {fake_get_fails, fake_set};

static void fake_reset(int current)
{
    memset(&fake, 0, sizeof fake);
    fake.current = current;
    fake.fail_set = -1;
}

static void scope_gives_the_callers_device_back(void **state)
{
    (void)state;
    dp__cuda_scope s;
    fake_reset(1);
    assert_int_equal(dp__cuda_scope_enter(&s, &fake_fns, 3), 0);
    assert_int_equal(fake.current, 3);
    dp__cuda_scope_leave(&s);
    assert_int_equal(fake.current, 1);
    assert_int_equal(fake.nsets, 2);

    /* Already current: nothing set either way. */
    fake_reset(2);
    assert_int_equal(dp__cuda_scope_enter(&s, &fake_fns, 2), 0);
    dp__cuda_scope_leave(&s);
    assert_int_equal(fake.nsets, 0);

    /* The set fails: an error, nothing switched, nothing to give back. */
    fake_reset(1);
    fake.fail_set = 3;
    assert_int_not_equal(dp__cuda_scope_enter(&s, &fake_fns, 3), 0);
    dp__cuda_scope_leave(&s);
    assert_int_equal(fake.current, 1);
    assert_int_equal(fake.nsets, 1);

    /* No current device to read: `ordinal` made current, none restored. */
    fake_reset(0);
    assert_int_equal(dp__cuda_scope_enter(&s, &fake_fns_no_get, 3), 0);
    dp__cuda_scope_leave(&s);
    assert_int_equal(fake.current, 3);
    assert_int_equal(fake.nsets, 1);
}

/* The backend's own alloc and free (called on the front end's thread) make
 * their GPU current and give the caller's back, also where cudaMalloc
 * fails (no GPU here) and where their GPU cannot be made current. */
static void backend_gives_the_device_back(void **state)
{
    (void)state;
    /* The backend's table, from its module (no GPU is needed to load it). */
    const dp__device_ops *ops = dp__backend_ops(&dp__cuda_backend);
    if (!dp_cuda_built())
        tu_skip("CPU-only build: no CUDA backend to follow");
    if (!ops)
        tu_skip("the CUDA module is not loaded here: %s", dp__cuda_backend.why_none());
    dp_device_t dev = {.ops = ops, .index = 3, .name = "cuda:3"};
    dp__cuda_current_override = &fake_fns;
    fake_reset(1);
    void *p = ops->alloc(&dev, 256);
    assert_int_equal(fake.current, 1);
    assert_int_equal(fake.nsets, 2);
    assert_int_equal(fake.sets[0], 3);
    assert_int_equal(fake.sets[1], 1);
    fake_reset(1);
    ops->free(&dev, p);
    assert_int_equal(fake.current, 1);
    assert_int_equal(fake.nsets, 2);
    fake_reset(1);
    fake.fail_set = 3;
    assert_null(ops->alloc(&dev, 256));
    assert_int_equal(fake.current, 1);
    dp__cuda_current_override = NULL;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dims_in_both_layouts),
        cmocka_unit_test(dims_refuse_what_an_int_cannot_hold),
        cmocka_unit_test(rows_per_slice_keep_every_tensor_in_an_int),
        cmocka_unit_test(conv_slices_cut_activations_only),
        cmocka_unit_test(pool_slices_cut_the_relu_mask_with_dx),
        cmocka_unit_test(conv_command_takes_tf32_when_called),
        cmocka_unit_test(bias_grad_sums_in_the_kernels_tree_order),
        cmocka_unit_test(scope_gives_the_callers_device_back),
        cmocka_unit_test(backend_gives_the_device_back),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

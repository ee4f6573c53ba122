/* Helpers shared by the op files. */
#ifndef DP_OPS_OP_H
#define DP_OPS_OP_H

#include "autograd/tape.h"
#include "core/internal.h"
#include "device/device.h"
#include "dp/ops.h"

/* Checks that x is a floating tensor (f32 or bf16) of rank `ndim`, any
 * rank when ndim < 0 (logs `op` on failure). */
int dp__check_rank(const char *op, const char *what, const dp_tensor_t *x, int ndim);
/* The gradient behind an op's fused ReLU: *dz = y's gradient where y > 0, or
 * y's gradient itself when a later op already applied that mask
 * (grad_masked). */
int dp__relu_masked_grad(dp_tensor_t *y, dp_tensor_t **dz);
/* Checks that every non-NULL tensor is on the device of the first. */
int dp__check_same_device(const char *op, dp_tensor_t *const *ts, int n);
/* The arguments of an op with weights (linear, the convolutions): input x
 * and weight w of rank `rank` each, bias b NULL or of rank 1, w and b
 * float32 (bf16 is for activations), all on one device. */
int dp__check_weight_args(const char *op, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b, int rank);
/* Whether `op` may run in precision p on dev: bf16 needs DP_DEVICE_BF16,
 * native bf16 DP_DEVICE_BF16_NATIVE (logged when not). */
int dp__precision_check(const char *op, dp_device_t *dev, dp_precision p);
/* *x as float32: itself, or a recorded cast of a bf16 tensor (for ops with
 * no bf16 kernel, as autocast's float32 list). */
int dp__as_f32(dp_tensor_t **x);

/* Frees t, an intermediate tensor an op made from its input `in` (a cast,
 * a copy in logical order), once the commands enqueued so far have run,
 * where no tape is active to own it (the caller owns an op's tensors
 * then); nothing where t is `in` or a tape owns it. */
void dp__op_temp_free(dp_tensor_t *t, const dp_tensor_t *in);

/* A convolution's geometry with every default filled in: stride,
 * padding above (pad_h), left (pad_w), below and right, dilation and
 * groups, each at least 1 where the parameters' 0 means 1. */
typedef struct dp__conv_geom {
    int stride_h, stride_w, pad_h, pad_w, pad_bottom, pad_right;
    int dilation_h, dilation_w, groups;
} dp__conv_geom;
/* g from p's fields, which it checks (one of the two ways of padding,
 * nothing negative; DP_EINVAL logged under `op`). conv_transpose2d passes
 * its own parameters' geometry through a dp_conv2d_params. */
int dp__conv_geometry(const char *op, const dp_conv2d_params *p, dp__conv_geom *g);
/* *a zeroed, then its geometry fields from g and its x, w and y described
 * from those tensors. */
void dp__conv_args_init(dp__conv2d_args *a, const dp__conv_geom *g, const dp_tensor_t *x,
                        const dp_tensor_t *w, const dp_tensor_t *y);
/* A convolution-shaped op's backward from a (x, w, y, dy and the geometry
 * set): `weights` gives dw and db in one kernel (into a scratch tensor for
 * whichever needs no gradient), then `data` gives dx; each gradient only
 * where its tensor needs one. */
typedef int (*dp__conv_kernel)(dp_device_t *dev, const dp__conv2d_args *a);
int dp__conv_backward_passes(dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b, dp__conv2d_args *a,
                             dp__conv_kernel weights, dp__conv_kernel data);
/* A per-sample pass of a convolution-shaped op (forward, backward-data)
 * over x's `rows`, by dp__for_blocks. */
int dp__conv_rows(dp_device_t *dev, dp__conv_kernel kernel, const dp__conv2d_args *a, int64_t rows);

/* Sums over the batch's rows, split-invariant (split_invariant.c): fn
 * writes (=) into out[0..n) (n <= 4) the sums over rows [row0, row0 +
 * count) of the batch. dp__split_sums calls it once for all `rows` when no
 * block size is set (or the batch is one block), else once per block of
 * dp_get_split_invariant() rows, adding the blocks pairwise in a fixed
 * tree into out. */
typedef int (*dp__block_sum)(void *ctx, int64_t row0, int64_t count, dp_tensor_t *const *out);
int dp__split_sums(dp_device_t *dev, int64_t rows, int n, dp_tensor_t *const *out, dp__block_sum fn,
                   void *ctx);
/* The gradients of an op's weight w and bias b (NULL: none), which fn
 * writes together, as dp__split_sums over the batch's `rows`: each into its
 * parameter's gradient where it needs one (dp__grad_begin and _end), into
 * a scratch tensor where it does not; nothing when neither needs one.
 * Linear layers and the convolutions share it. */
int dp__weight_grad_sums(dp_device_t *dev, int64_t rows, dp_tensor_t *w, dp_tensor_t *b,
                         dp__block_sum fn, void *ctx);
/* fn(ctx, row0, count) over the batch's rows: once for all, or block by
 * block when split-invariant sums are set (a per-sample kernel then sees
 * the same shapes on every split of the batch). */
typedef int (*dp__block_fn)(void *ctx, int64_t row0, int64_t count);
int dp__for_blocks(int64_t rows, dp__block_fn fn, void *ctx);
/* The gemm of g (a not transposed) over its m rows, by dp__for_blocks. */
int dp__gemm_rows(dp_device_t *dev, const dp__gemm_args *g);
/* d's rows [row0, row0 + count): the same memory from row row0 on (the
 * batch is the outermost axis in both layouts). */
dp__tdesc dp__rows_of(dp__tdesc d, int64_t row0, int64_t count);

#endif

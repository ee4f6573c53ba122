/* Average and max pooling on a GPU through cuDNN, in the tensor's own
 * layout, as src/device/cpu/pool2d.c. cuDNN's backward pass recomputes the
 * argmax from x and y, so the op layer's workspace is not used here.
 * Average pooling counts padding in the divisor (PyTorch's
 * count_include_pad=True) unless the kind says otherwise. A ReLU mask given to the backward pass is
 * applied after it by our kernel. cuDNN has no dilated pooling: dilated max
 * pooling runs pool_dilated.cu's kernels, which keep the argmax in the
 * workspace. */
#include "device/cuda/cuda.h"

static const float one = 1.0f, zero = 0.0f;

typedef struct pool_descs {
    cudnnPoolingDescriptor_t pool;
    cudnnTensorDescriptor_t x, y;
} pool_descs;

static void descs_destroy(pool_descs *d)
{
    if (d->pool)
        cudnnDestroyPoolingDescriptor(d->pool);
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
}

static int descs_init(pool_descs *d, const dp__pool2d_args *a)
{
    d->pool = NULL;
    d->x = d->y = NULL;
    DP_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d->pool));
    DP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    DP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->y));
    /* ceil_mode: y is taller or wider than the symmetric padding gives,
     * and cuDNN clips the last windows to x and its padding; the op layer
     * sends a mean over such a window as AVG_EXCLUDE, which then counts
     * the cells inside x alone, as PyTorch does. */
    cudnnPoolingMode_t mode = a->kind == DP__POOL_MAX ? CUDNN_POOLING_MAX_DETERMINISTIC
                              : a->kind == DP__POOL_AVG_EXCLUDE
                                  ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                  : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    DP_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d->pool, mode, CUDNN_NOT_PROPAGATE_NAN, a->kernel_h,
                                               a->kernel_w, a->pad_h, a->pad_w, a->stride_h,
                                               a->stride_w));
    DP_TRY(dp__cuda_tensor_desc(d->x, &a->x));
    DP_TRY(dp__cuda_tensor_desc(d->y, &a->y));
    return 0;
}

static bool dilated(const dp__pool2d_args *a)
{
    return a->dilation_h > 1 || a->dilation_w > 1;
}

static int run_forward(void *p, void *ctx)
{
    dp__pool2d_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    if (dilated(a))
        return dp__cuda_launched(dp__cuda_max_pool_dilated_forward_launch(a, cu->stream),
                                 "dilated max_pool2d forward");
    pool_descs d;
    int rc = descs_init(&d, a);
    if (rc == 0) {
        cudnnStatus_t st =
            cudnnPoolingForward(cu->cudnn, d.pool, &one, d.x, a->x.data, &zero, d.y, a->y.data);
        if (st != CUDNN_STATUS_SUCCESS) {
            DP_ERROR("cuDNN: pooling forward failed: %s", cudnnGetErrorString(st));
            rc = DP_EDEVICE;
        }
    }
    descs_destroy(&d);
    return rc;
}

static int run_backward(void *p, void *ctx)
{
    dp__pool2d_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    if (dilated(a))
        return dp__cuda_launched(dp__cuda_max_pool_dilated_backward_launch(a, cu->stream),
                                 "dilated max_pool2d backward");
    pool_descs d;
    cudnnTensorDescriptor_t dy = NULL, dx = NULL;
    int rc = descs_init(&d, a);
    if (rc == 0 && (cudnnCreateTensorDescriptor(&dy) != CUDNN_STATUS_SUCCESS ||
                    cudnnCreateTensorDescriptor(&dx) != CUDNN_STATUS_SUCCESS)) {
        DP_ERROR("cuDNN: cannot create tensor descriptors");
        rc = DP_EDEVICE;
    }
    if (rc == 0)
        rc = dp__cuda_tensor_desc(dy, &a->dy);
    if (rc == 0)
        rc = dp__cuda_tensor_desc(dx, &a->dx);
    if (rc == 0) {
        cudnnStatus_t st = cudnnPoolingBackward(cu->cudnn, d.pool, &one, d.y, a->y.data, dy,
                                                a->dy.data, d.x, a->x.data, &zero, dx, a->dx.data);
        if (st != CUDNN_STATUS_SUCCESS) {
            DP_ERROR("cuDNN: pooling backward failed: %s", cudnnGetErrorString(st));
            rc = DP_EDEVICE;
        }
    }
    if (rc == 0 && a->relu_mask)
        rc = dp__cuda_launched(
            dp__cuda_relu_mask(a->dx.data, a->relu_mask, dp__numel(4, a->x.shape), cu->stream),
            "pool2d relu mask");
    if (dy)
        cudnnDestroyTensorDescriptor(dy);
    if (dx)
        cudnnDestroyTensorDescriptor(dx);
    descs_destroy(&d);
    return rc;
}

/* cuDNN's descriptors take int sizes: a batch whose tensors reach 2^31
 * elements is pooled in slices along N that fit, one command each (the
 * samples are independent). */
static int push_slices(dp_device_t *dev, dp__cmd_fn run, const char *name, const dp__pool2d_args *a)
{
    int64_t n = a->x.shape[0], rows = dp__cuda_pool_rows_per_slice(a);
    if (rows == 0) {
        DP_ERROR("%s: one sample of the pooling exceeds cuDNN's int sizes (%d elements a tensor)",
                 dev->name, DP__CUDA_DESC_MAX_ELEMS);
        return DP_EINVAL;
    }
    for (int64_t n0 = 0; n0 < n; n0 += rows) {
        dp__pool2d_args s = dp__cuda_pool_rows(a, n0, n - n0 < rows ? n - n0 : rows);
        DP_TRY(dp__cuda_push_named(dev, run, name, &s, sizeof s));
    }
    return 0;
}

int dp__cuda_pool2d_forward(dp_device_t *dev, const dp__pool2d_args *a)
{
    if (dp__numel(4, a->y.shape) == 0)
        return 0;
    return push_slices(dev, run_forward, __FILE__ ":run_forward", a);
}

int dp__cuda_pool2d_backward(dp_device_t *dev, const dp__pool2d_args *a)
{
    if (dp__numel(4, a->x.shape) == 0)
        return 0;
    return push_slices(dev, run_backward, __FILE__ ":run_backward", a);
}

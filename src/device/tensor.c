/* Tensors: metadata on the front end, memory on the device. Commands copy
 * what they need (pointers, shapes) when they are enqueued, so a tensor's
 * struct can go as soon as the front end drops it; its memory goes back to
 * the device's cache only after the commands queued before have run. */
#include "core/internal.h"
#include "device/device.h"
#include "device/storage.h"

#include <stdatomic.h>
#include <string.h>

int64_t dp__numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

size_t dp_dtype_size(dp_dtype dtype)
{
    return dtype == DP_BF16 ? 2 : 4;
}

const char *dp__dtype_name(dp_dtype dtype)
{
    return dtype == DP_F32    ? "float32"
           : dtype == DP_I32  ? "int32"
           : dtype == DP_BF16 ? "bfloat16"
                              : "?";
}

size_t dp__bytes_of(dp_dtype dtype, int ndim, const int64_t *shape)
{
    return (size_t)dp__numel(ndim, shape) * dp_dtype_size(dtype);
}

/* A tensor's bytes fit in 2^62: sums and products of a few sizes stay
 * within int64_t and size_t, on the meta device too, whose tensors a
 * summary may make of any size that can be counted. */
#define TENSOR_MAX_BYTES ((int64_t)1 << 62)

int dp__tensor_check_shape(dp_dtype dtype, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > DP_MAX_DIMS) {
        DP_ERROR("tensor rank %d is not supported (0..%d)", ndim, DP_MAX_DIMS);
        return DP_EINVAL;
    }
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || shape[i] > ((int64_t)1 << 40)) {
            DP_ERROR("bad tensor size %lld in dimension %d", (long long)shape[i], i);
            return DP_EINVAL;
        }
    }
    int64_t numel, bytes;
    if (!dp__shape_numel(ndim, shape, &numel) ||
        !dp__mul_size(numel, (int64_t)dp_dtype_size(dtype), &bytes) || bytes > TENSOR_MAX_BYTES) {
        char s[160];
        DP_ERROR("a tensor %s holds more than 2^62 bytes", dp__shape_str(s, sizeof s, ndim, shape));
        return DP_EINVAL;
    }
    return 0;
}

dp_tensor_t *dp__tensor_view(dp_device_t *dev, dp_dtype dtype, int ndim, const int64_t *shape,
                             void *data)
{
    dp_tensor_t *t = dp__calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->dev = dev;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim > 0) /* a scalar's shape may be NULL */
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->bytes = dp__bytes_of(dtype, ndim, shape);
    t->data = data;
    return t;
}

int dp__tensor_alloc(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                     const int64_t *shape, int nhwc)
{
    if ((unsigned)dtype > DP_BF16 || (dtype == DP_BF16 && !dp_device_has(dev, DP_DEVICE_BF16))) {
        DP_ERROR("%s has no tensors of dtype %d", dev->name, (int)dtype);
        return DP_EINVAL;
    }
    DP_TRY(dp__tensor_check_shape(dtype, ndim, shape));
    dp_tensor_t *t = dp__tensor_view(dev, dtype, ndim, shape, NULL);
    if (!t)
        return DP_ENOMEM;
    t->nhwc = ndim == 4 ? nhwc : 0;
    t->owns_data = 1;
    t->data = dp__device_alloc(dev, t->bytes ? t->bytes : 4);
    if (!t->data) {
        dp__free(t);
        return DP_ENOMEM;
    }
    *out = t;
    return 0;
}

int dp__tensor_alloc_like(dp_tensor_t **out, const dp_tensor_t *like)
{
    return dp__tensor_alloc(out, like->dev, like->dtype, like->ndim, like->shape, like->nhwc);
}

dp__tdesc dp__desc(const dp_tensor_t *t)
{
    dp__tdesc d;
    memset(&d, 0, sizeof d);
    if (!t)
        return d;
    d.data = t->data;
    d.dtype = t->dtype;
    d.ndim = t->ndim;
    d.nhwc = t->nhwc;
    memcpy(d.shape, t->shape, (size_t)t->ndim * sizeof *t->shape);
    return d;
}

void dp__tensor_written(dp_tensor_t *t)
{
    t->write_seq = dp__stream_last(t->dev->stream);
}

int dp_tensor_new(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                  const int64_t *shape)
{
    return dp__tensor_alloc(out, dev, dtype, ndim, shape, 0);
}

int dp_tensor_from_host(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                        const int64_t *shape, const void *src)
{
    dp_tensor_t *t;
    DP_TRY(dp_tensor_new(&t, dev, dtype, ndim, shape));
    /* A fresh block has no queued users, so it is written at once. */
    int rc = dev->ops->upload_fresh(dev, t->data, src, t->bytes);
    if (rc < 0) {
        dp__tensor_release(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* Set by autograd when it attaches its first leaf state (see
 * dp__tensor_set_state_release); NULL while no tensor has one. */
static _Atomic(dp__tensor_state_release_fn) state_release;

void dp__tensor_set_state_release(dp__tensor_state_release_fn fn)
{
    atomic_store(&state_release, fn);
}

void dp_tensor_free(dp_tensor_t *t)
{
    if (!t)
        return;
    dp__tensor_state_release_fn release = atomic_load(&state_release);
    if (t->ag && release)
        release(t);
    dp__tensor_release(t);
}

void dp__tensor_release(dp_tensor_t *t)
{
    if (!t)
        return;
    if (t->owns_data)
        dp__device_release_later(t->dev, t->data, t->bytes ? t->bytes : 4);
    if (t->release)
        dp__tensor_release_wrapped(t);
    dp__free(t);
}

size_t dp__tensor_bytes(const dp_tensor_t *t)
{
    return t->bytes;
}

size_t dp__tensor_owned_bytes(const dp_tensor_t *t)
{
    return t->owns_data ? t->bytes : 0;
}

size_t dp__tensor_row_bytes(const dp_tensor_t *t)
{
    size_t b = dp_dtype_size(t->dtype);
    for (int i = 1; i < t->ndim; i++)
        b *= (size_t)t->shape[i];
    return b;
}

bool dp__tensor_nhwc(const dp_tensor_t *t)
{
    return t->nhwc;
}

uint64_t dp__tensor_ready_seq(const dp_tensor_t *t)
{
    uint64_t base_seq = t->base ? t->base->write_seq : 0;
    return base_seq > t->write_seq ? base_seq : t->write_seq;
}

int dp_tensor_wait(const dp_tensor_t *t)
{
    return dp__stream_wait(t->dev->stream, dp__tensor_ready_seq(t));
}

/* NHWC -> NCHW on the host, elements of `size` bytes. */
static void nhwc_to_nchw(char *dst, const char *src, const int64_t *s, size_t size)
{
    int64_t N = s[0], C = s[1], H = s[2], W = s[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t w = 0; w < W; w++)
                    memcpy(dst + (size_t)(((n * C + c) * H + h) * W + w) * size,
                           src + (size_t)(((n * H + h) * W + w) * C + c) * size, size);
}

int dp_tensor_to_host(const dp_tensor_t *t, void *dst, size_t bytes)
{
    if (bytes != t->bytes) {
        DP_ERROR("dp_tensor_to_host: buffer of %zu bytes for a tensor of %zu", bytes, t->bytes);
        return DP_EINVAL;
    }
    void *raw = dst;
    if (t->nhwc) {
        raw = dp__malloc(bytes);
        if (!raw)
            return DP_ENOMEM;
    }
    int rc = t->dev->ops->copy_to_host(t->dev, raw, t->data, bytes);
    if (rc == 0)
        rc = dp__stream_wait(t->dev->stream, dp__stream_last(t->dev->stream));
    if (t->nhwc) {
        if (rc == 0)
            nhwc_to_nchw(dst, raw, t->shape, dp_dtype_size(t->dtype));
        dp__free(raw);
    }
    return rc;
}

int dp_tensor_copy_from_host(dp_tensor_t *t, const void *src, size_t bytes)
{
    if (bytes != t->bytes) {
        DP_ERROR("dp_tensor_copy_from_host: %zu bytes for a tensor of %zu", bytes, t->bytes);
        return DP_EINVAL;
    }
    t->nhwc = 0; /* the whole tensor is overwritten in logical order */
    DP_TRY(t->dev->ops->copy_from_host(t->dev, t->data, src, bytes));
    dp__tensor_written(t);
    return 0;
}

int dp_tensor_read_async(const dp_tensor_t *t, void *dst, size_t bytes)
{
    if (bytes != t->bytes) {
        DP_ERROR("dp_tensor_read_async: buffer of %zu bytes for a tensor of %zu", bytes, t->bytes);
        return DP_EINVAL;
    }
    if (t->nhwc) {
        char shape[64];
        DP_ERROR("dp_tensor_read_async: the %s tensor is in N, H, W, C order; "
                 "dp_tensor_to_host reads it",
                 dp_tensor_shape_str(t, shape, sizeof shape));
        return DP_EINVAL;
    }
    return t->dev->ops->copy_to_host(t->dev, dst, t->data, bytes);
}

int dp_tensor_fill(dp_tensor_t *t, float value)
{
    dp__fill_args a = {t->data, dp__numel(t->ndim, t->shape), value, t->dtype};
    if (t->dtype == DP_I32) {
        /* The kernels store the bits of a.value: give them the integer's
         * (toward zero, as torch.full(..., dtype=torch.int32) of 2.7 is 2). */
        if (!(value >= -2147483648.0f && value < 2147483648.0f)) {
            DP_ERROR("dp_tensor_fill: %g does not fit an int32 tensor", (double)value);
            return DP_EINVAL;
        }
        int32_t iv = (int32_t)value;
        memcpy(&a.value, &iv, sizeof iv);
    }
    DP_TRY(t->dev->ops->fill(t->dev, &a));
    dp__tensor_written(t);
    return 0;
}

int dp_tensor_scale(dp_tensor_t *t, float alpha)
{
    if (t->dtype != DP_F32) {
        char shape[64];
        DP_ERROR("dp_tensor_scale: %s is not a float tensor",
                 dp_tensor_shape_str(t, shape, sizeof shape));
        return DP_EINVAL;
    }
    dp__eltwise_args a = {.op = DP__ELT_SCALE,
                          .a = t->data,
                          .out = t->data,
                          .n = dp__numel(t->ndim, t->shape),
                          .alpha = alpha};
    DP_TRY(t->dev->ops->eltwise(t->dev, &a));
    dp__tensor_written(t);
    return 0;
}

int dp_tensor_ndim(const dp_tensor_t *t)
{
    return t->ndim;
}

int64_t dp_tensor_dim(const dp_tensor_t *t, int i)
{
    return i >= 0 && i < t->ndim ? t->shape[i] : 1;
}

int64_t dp_tensor_numel(const dp_tensor_t *t)
{
    return dp__numel(t->ndim, t->shape);
}

dp_device_t *dp_tensor_device(const dp_tensor_t *t)
{
    return t->dev;
}

dp_dtype dp_tensor_dtype(const dp_tensor_t *t)
{
    return t->dtype;
}

const char *dp_tensor_shape_str(const dp_tensor_t *t, char *buf, size_t size)
{
    return dp__shape_str(buf, size, t->ndim, t->shape);
}

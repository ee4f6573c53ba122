/* The CUDA backend's host-side arithmetic and bookkeeping (cuda_host.h),
 * pure C, built in every configuration. */
#include "device/cuda/cuda_host.h"

#include "core/internal.h"
#include "device/device.h"
#include "dp/tensor.h"

#include <stdint.h>

/* ---- cuDNN's int sizes ------------------------------------------------------- */

int64_t dp__cuda_slice_max_elems = DP__CUDA_DESC_MAX_ELEMS;

int dp__cuda_dims_of(const int64_t shape[4], bool nhwc, dp__cuda_dims *out)
{
    int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return DP_EINVAL;
    /* Each product is checked before the next: a product of two sizes that
     * fit an int fits an int64, and the one before never exceeded an int. */
    int64_t hw = h * w;
    if (hw > DP__CUDA_DESC_MAX_ELEMS)
        return DP_EINVAL;
    int64_t chw = c * hw;
    if (chw > DP__CUDA_DESC_MAX_ELEMS)
        return DP_EINVAL;
    if (n * chw > DP__CUDA_DESC_MAX_ELEMS)
        return DP_EINVAL;
    *out = (dp__cuda_dims){.n = (int)n, .c = (int)c, .h = (int)h, .w = (int)w};
    out->sn = (int)chw;
    if (nhwc) {
        out->sh = (int)(w * c);
        out->sw = (int)c;
        out->sc = 1;
    } else {
        out->sc = (int)hw;
        out->sh = (int)w;
        out->sw = 1;
    }
    return 0;
}

int64_t dp__cuda_rows_per_slice(int64_t n, const int64_t *per_sample, int count)
{
    int64_t rows = n;
    for (int k = 0; k < count; k++) {
        if (per_sample[k] <= 0) /* no elements: no limit */
            continue;
        int64_t fit = dp__cuda_slice_max_elems / per_sample[k];
        if (fit < rows)
            rows = fit;
    }
    return rows;
}

/* The elements of one sample of a 4-D tensor, or 0 for an unused one (no
 * dimensions). Sizes of tensors in memory: their product fits an int64. */
static int64_t sample_elems(const dp__tdesc *t)
{
    if (t->ndim != 4)
        return 0;
    return t->shape[1] * t->shape[2] * t->shape[3];
}

dp__tdesc dp__cuda_tdesc_rows(const dp__tdesc *t, int64_t n0, int64_t rows)
{
    dp__tdesc s = *t;
    if (t->ndim != 4)
        return s;
    s.shape[0] = rows;
    if (t->data) {
        int64_t before[4] = {n0, t->shape[1], t->shape[2], t->shape[3]};
        /* In size_t, not int: the slices exist because the tensor's offsets
         * exceed an int. */
        s.data = (char *)t->data + dp__bytes_of(t->dtype, 4, before);
    }
    return s;
}

/* ---- convolution commands ---------------------------------------------------- */

dp__conv2d_args dp__cuda_conv_rows(const dp__conv2d_args *a, int64_t n0, int64_t rows)
{
    dp__conv2d_args s = *a;
    s.x = dp__cuda_tdesc_rows(&a->x, n0, rows);
    s.y = dp__cuda_tdesc_rows(&a->y, n0, rows);
    s.dx = dp__cuda_tdesc_rows(&a->dx, n0, rows);
    s.dy = dp__cuda_tdesc_rows(&a->dy, n0, rows);
    return s;
}

int64_t dp__cuda_conv_rows_per_slice(const dp__conv2d_args *a)
{
    const dp__tdesc *acts[4] = {&a->x, &a->y, &a->dx, &a->dy};
    int64_t per[4];
    int count = 0;
    for (int k = 0; k < 4; k++)
        if (acts[k]->ndim == 4)
            per[count++] = sample_elems(acts[k]);
    return dp__cuda_rows_per_slice(a->x.shape[0], per, count);
}

dp__cuda_conv_cmd dp__cuda_conv_cmd_make(const dp__conv2d_args *a, bool accumulate)
{
    return (dp__cuda_conv_cmd){.a = *a, .tf32 = dp_tf32_allowed(), .accumulate = accumulate};
}

dp__pool2d_args dp__cuda_pool_rows(const dp__pool2d_args *a, int64_t n0, int64_t rows)
{
    dp__pool2d_args s = *a;
    s.x = dp__cuda_tdesc_rows(&a->x, n0, rows);
    s.y = dp__cuda_tdesc_rows(&a->y, n0, rows);
    s.dx = dp__cuda_tdesc_rows(&a->dx, n0, rows);
    s.dy = dp__cuda_tdesc_rows(&a->dy, n0, rows);
    if (a->relu_mask) {
        int64_t before[4] = {n0, a->dx.shape[1], a->dx.shape[2], a->dx.shape[3]};
        s.relu_mask = (const char *)a->relu_mask + dp__bytes_of(a->dx.dtype, 4, before);
    }
    if (a->workspace) /* 4 bytes an output (the dilated kernels' argmax) */
        s.workspace = (char *)a->workspace + 4 * n0 * a->y.shape[1] * a->y.shape[2] * a->y.shape[3];
    return s;
}

int64_t dp__cuda_pool_rows_per_slice(const dp__pool2d_args *a)
{
    const dp__tdesc *acts[4] = {&a->x, &a->y, &a->dx, &a->dy};
    int64_t per[4];
    int count = 0;
    for (int k = 0; k < 4; k++)
        if (acts[k]->ndim == 4)
            per[count++] = sample_elems(acts[k]);
    return dp__cuda_rows_per_slice(a->x.shape[0], per, count);
}

/* ---- the bias gradient's order ----------------------------------------------- */

_Static_assert((DP__CUDA_BIAS_GRAD_THREADS & (DP__CUDA_BIAS_GRAD_THREADS - 1)) == 0,
               "the tree halves the partial sums: a power of two");

void dp__cuda_bias_grad_host(const float *dy, float *db, int64_t rows, int64_t cols)
{
    enum { T = DP__CUDA_BIAS_GRAD_THREADS };
    float part[T];
    for (int64_t j = 0; j < cols; j++) {
        for (int t = 0; t < T; t++) {
            float s = 0.0f;
            for (int64_t i = t; i < rows; i += T)
                s += dy[i * cols + j];
            part[t] = s;
        }
        for (int s = T / 2; s > 0; s /= 2)
            for (int t = 0; t < s; t++)
                part[t] += part[t + s];
        db[j] = part[0];
    }
}

/* ---- the current device ------------------------------------------------------ */

const dp__cuda_current_fns *dp__cuda_current_override;

int dp__cuda_scope_enter(dp__cuda_scope *s, const dp__cuda_current_fns *fns, int ordinal)
{
    s->fns = fns;
    s->switched = false;
    /* No current device to read (no context yet on this thread): nothing
     * to give back but `ordinal` made current all the same. */
    if (fns->get(&s->prev) != 0)
        s->prev = -1;
    if (s->prev == ordinal)
        return 0;
    int rc = fns->set(ordinal);
    if (rc != 0)
        return rc;
    s->switched = s->prev >= 0;
    return 0;
}

void dp__cuda_scope_leave(const dp__cuda_scope *s)
{
    if (s->switched)
        (void)s->fns->set(s->prev);
}

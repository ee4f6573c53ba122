/* Convolution on the CPU: which implementation runs each pass, and the
 * reference bf16 path.
 *
 * Under DP_CONV_ALGO_AUTO the first pass of a new shape (batch size aside)
 * times every candidate on the pass's own tensors and keeps the fastest in
 * the process's table (device/conv_choice.h), which every device of the
 * process then reads: direct in NHWC, direct in oneDNN's blocked layout,
 * Winograd (f32) and im2col + one matrix product, in the pass's precision.
 * Measured on a 2-core Xeon with AMX at batch 256 (bench/PROFILE.md), no
 * single one wins everywhere: bf16 direct for ResNet-18's 28x28 layers,
 * bf16 im2col + AMX matrix product for the weight gradients of its 7x7
 * and 4x4 ones.
 *
 * The reference bf16 path (DP_PRECISION_BF16_REFERENCE) runs the f32
 * direct kernels on the operands rounded to bf16 (the activations are bf16
 * already; the weights are rounded here) and rounds the output to bf16:
 * the arithmetic of the native bf16 kernels, which also multiply bf16
 * operands exactly and sum in f32, up to the order of the sums. */
#include "device/cpu/conv2d.h"

#include "core/bf16.h"

#include <math.h>
#include <time.h>

static int64_t numel(const dp__tdesc *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Seconds since t0 for a candidate of a pass: the clock's, or the figure a
 * test gave the chooser for it (dp__conv_timing). */
static double elapsed(dp__conv_pass pass, dp__conv_impl impl, double t0)
{
    return dp__conv_timing(pass, impl, now() - t0);
}

static dp__conv_shape shape_of(const dp__conv2d_args *a)
{
    dp__conv_shape s = {
        .precision = a->precision,
        .c = (int32_t)a->x.shape[1],
        .h = (int32_t)a->x.shape[2],
        .w = (int32_t)a->x.shape[3],
        .k = (int32_t)a->w.shape[0],
        .r = (int32_t)a->w.shape[2],
        .s = (int32_t)a->w.shape[3],
        .stride_h = a->stride_h,
        .stride_w = a->stride_w,
        .pad_h = a->pad_h,
        .pad_w = a->pad_w,
        .pad_bottom = a->pad_bottom,
        .pad_right = a->pad_right,
        .dilation_h = a->dilation_h,
        .dilation_w = a->dilation_w,
        .groups = a->groups,
    };
    return s;
}

/* Whether `impl` serves a's shape: oneDNN's Winograd has no groups and no
 * dilation, and the im2col path runs one matrix product for all channels
 * (no groups); the direct kernels serve every shape. The chooser offers
 * only these, and a choice loaded for a shape they do not serve runs
 * direct. */
static bool serves(dp__conv_impl impl, const dp__conv2d_args *a)
{
    bool plain = a->groups == 1 && a->dilation_h == 1 && a->dilation_w == 1;
    if (impl == DP__CONV_WINOGRAD)
        return plain;
    if (impl == DP__CONV_GEMM)
        return a->groups == 1;
    return true;
}

static int run_impl(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl,
                    const dp__conv2d_args *a)
{
    if (impl == DP__CONV_GEMM)
        return dp__cpu_conv_gemm(dev, pass, a);
    return dp__cpu_conv_onednn(dev, pass, impl, a);
}

typedef struct measure_ctx {
    dp_device_t *dev;
    dp__conv_pass pass;
    const dp__conv2d_args *a;
} measure_ctx;

/* Whether oneDNN's kernel for candidate impl is one of its reference
 * implementations, which the chooser never times (seconds where the
 * others take milliseconds); the im2col path runs oneDNN's matrix product,
 * never a reference convolution. */
static int is_reference(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl,
                        const dp__conv2d_args *a, bool *ref)
{
    *ref = false;
    if (impl == DP__CONV_GEMM)
        return 0;
    return dp__cpu_conv_onednn_is_ref(dev, pass, impl, a, ref);
}

/* Times each candidate on the pass's own tensors (its outputs are written
 * again by the chosen one afterwards): one run that builds its kernels,
 * then the faster of two timed runs. A candidate whose first run takes
 * over three times the best so far (plus 50 ms for building its kernels)
 * is not timed further: oneDNN 2.6 has bf16 weight-gradient kernels that
 * take a second where others take milliseconds. Winograd exists in oneDNN
 * for f32 only; bf16 keeps bf16 operands. A candidate whose kernel is a
 * reference one is not run at all; when every candidate is, the pass runs
 * direct untimed, and says so. */
static int measure(void *p, dp__conv_impl *best)
{
    const measure_ctx *m = p;
    static const dp__conv_impl f32_candidates[] = {DP__CONV_DIRECT, DP__CONV_BLOCKED,
                                                   DP__CONV_WINOGRAD, DP__CONV_GEMM};
    static const dp__conv_impl bf16_candidates[] = {DP__CONV_DIRECT, DP__CONV_BLOCKED,
                                                    DP__CONV_GEMM};
    bool bf16 = m->a->precision != DP_PRECISION_FP32;
    const dp__conv_impl *cand = bf16 ? bf16_candidates : f32_candidates;
    int ncand = bf16 ? (int)DP_COUNTOF(bf16_candidates) : (int)DP_COUNTOF(f32_candidates);
    double best_t = INFINITY;
    char line[256];
    int len = 0;
    bool any_ref = false;
    *best = DP__CONV_DIRECT;
    for (int i = 0; i < ncand; i++) {
        if (!serves(cand[i], m->a))
            continue;
        bool ref;
        int rc = is_reference(m->dev, m->pass, cand[i], m->a, &ref);
        if (rc == DP_ENOTSUP)
            continue;
        DP_TRY(rc);
        if (ref) {
            any_ref = true;
            len += snprintf(line + len, sizeof line - (size_t)len, " %s (reference kernel)",
                            dp__conv_impl_name(cand[i]));
            continue;
        }
        double t0 = now();
        rc = run_impl(m->dev, m->pass, cand[i], m->a);
        if (rc == DP_ENOTSUP)
            continue;
        DP_TRY(rc);
        double t = elapsed(m->pass, cand[i], t0);
        bool slow = t > 3 * best_t + 0.05;
        for (int rep = 0; rep < 2 && !slow; rep++) {
            t0 = now();
            DP_TRY(run_impl(m->dev, m->pass, cand[i], m->a));
            double again = elapsed(m->pass, cand[i], t0);
            t = rep ? fmin(t, again) : again;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %s %.2f ms%s",
                        dp__conv_impl_name(cand[i]), 1e3 * t, slow ? " (first run)" : "");
        if (t < best_t) {
            best_t = t;
            *best = cand[i];
        }
    }
    if (best_t == INFINITY && any_ref)
        len +=
            snprintf(line + len, sizeof line - (size_t)len, "; only reference kernels, none timed");
    dp__conv_shape s = shape_of(m->a);
    /* the sides' padding, dilation and groups only where a shape has them */
    char more[64] = "";
    int n = 0;
    if (s.pad_bottom != s.pad_h || s.pad_right != s.pad_w)
        n += snprintf(more + n, sizeof more - (size_t)n, " p%dx%dx%dx%d", s.pad_h, s.pad_w,
                      s.pad_bottom, s.pad_right);
    if (s.dilation_h != 1 || s.dilation_w != 1)
        n += snprintf(more + n, sizeof more - (size_t)n, " d%dx%d", s.dilation_h, s.dilation_w);
    if (s.groups != 1)
        snprintf(more + n, sizeof more - (size_t)n, " g%d", s.groups);
    DP_INFO("%s: convolution %s %dx%dx%d k%d %dx%d s%d p%d%s %s:%s: %s", m->dev->name,
            s.precision == DP_PRECISION_BF16 ? "bf16" : "f32", s.c, s.h, s.w, s.k, s.r, s.s,
            s.stride_h, s.pad_h, more, dp__conv_pass_name(m->pass), line,
            dp__conv_impl_name(*best));
    return 0;
}

/* The implementation the pass runs: fixed by the algorithm, or the table's. */
static int pick(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a, dp__conv_impl *impl)
{
    switch (a->algo) {
    case DP_CONV_ALGO_AUTO: {
        dp__conv_shape s = shape_of(a);
        measure_ctx m = {dev, pass, a};
        return dp__conv_choose(&s, pass, measure, &m, impl);
    }
    case DP_CONV_ALGO_WINOGRAD:
        *impl = a->precision == DP_PRECISION_FP32 && serves(DP__CONV_WINOGRAD, a)
                    ? DP__CONV_WINOGRAD
                    : DP__CONV_DIRECT;
        return 0;
    default:
        *impl = DP__CONV_DIRECT;
        return 0;
    }
}

/* The reference bf16 path: f32 direct kernels on rounded operands. */
static int run_reference(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a)
{
    dp__cpu *cpu = dev->impl;
    dp__conv2d_args f = *a;
    f.precision = DP_PRECISION_FP32;
    if (pass != DP__CONV_BACKWARD_WEIGHTS) {
        float *w = dp__cpu_scratch(cpu, 6, (size_t)numel(&a->w) * sizeof *w);
        if (!w)
            return DP_ENOMEM;
        dp__cpu_round_bf16(w, a->w.data, numel(&a->w));
        f.w.data = w;
    }
    /* the bf16 inputs as f32 (exact), the bf16 output through f32 scratch */
    const dp__tdesc *in = pass == DP__CONV_BACKWARD_DATA ? &a->dy : &a->x;
    dp__tdesc *fin = pass == DP__CONV_BACKWARD_DATA ? &f.dy : &f.x;
    fin->data = (void *)dp__cpu_as_f32(cpu, 0, in);
    fin->dtype = DP_F32;
    if (pass == DP__CONV_BACKWARD_WEIGHTS) {
        f.dy.data = (void *)dp__cpu_as_f32(cpu, 1, &a->dy);
        f.dy.dtype = DP_F32;
    }
    const dp__tdesc *out = pass == DP__CONV_FORWARD ? &a->y : &a->dx;
    dp__tdesc *fout = pass == DP__CONV_FORWARD ? &f.y : &f.dx;
    if (pass != DP__CONV_BACKWARD_WEIGHTS && out->dtype == DP_BF16) {
        fout->data = dp__cpu_scratch(cpu, 2, (size_t)numel(out) * sizeof(float));
        fout->dtype = DP_F32;
    }
    if (!fin->data || (pass == DP__CONV_BACKWARD_WEIGHTS && !f.dy.data) ||
        (pass != DP__CONV_BACKWARD_WEIGHTS && !fout->data))
        return DP_ENOMEM;
    DP_TRY(dp__cpu_conv_onednn(dev, pass, DP__CONV_DIRECT, &f));
    if (pass != DP__CONV_BACKWARD_WEIGHTS && out->dtype == DP_BF16)
        dp__cpu_bf16_from_f32(out->data, fout->data, numel(out));
    return 0;
}

static int run_pass(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a)
{
    dp__conv_shape s = shape_of(a);
    if (a->precision == DP_PRECISION_BF16_REFERENCE) {
        DP_TRY(run_reference(dev, pass, a));
        dp__conv_trace_record(dev, &s, pass, DP__CONV_DIRECT);
        return 0;
    }
    dp__conv_impl impl;
    DP_TRY(pick(dev, pass, a, &impl));
    if (!serves(impl, a))
        impl = DP__CONV_DIRECT;
    int rc = run_impl(dev, pass, impl, a);
    if (rc == DP_ENOTSUP && impl != DP__CONV_DIRECT) {
        /* A choice this CPU cannot run (Winograd on a CPU without AVX-512,
         * or a loaded choice made elsewhere): the direct kernel serves. */
        impl = DP__CONV_DIRECT;
        rc = run_impl(dev, pass, impl, a);
    }
    if (rc == DP_ENOTSUP) {
        DP_ERROR("%s: oneDNN has no %s convolution kernel for this shape", dev->name,
                 a->precision == DP_PRECISION_FP32 ? "f32" : "bf16");
        return DP_EDEVICE;
    }
    DP_TRY(rc);
    dp__conv_trace_record(dev, &s, pass, impl);
    return 0;
}

static int run_forward(void *p, void *ctx)
{
    return run_pass(ctx, DP__CONV_FORWARD, p);
}

static int run_backward_data(void *p, void *ctx)
{
    return run_pass(ctx, DP__CONV_BACKWARD_DATA, p);
}

static int run_backward_weights(void *p, void *ctx)
{
    return run_pass(ctx, DP__CONV_BACKWARD_WEIGHTS, p);
}

DP__CPU_ENTRY(conv2d_forward, dp__conv2d_args, run_forward)
DP__CPU_ENTRY(conv2d_backward_data, dp__conv2d_args, run_backward_data)
DP__CPU_ENTRY(conv2d_backward_weights, dp__conv2d_args, run_backward_weights)

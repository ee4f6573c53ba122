/* The finite-difference gradient checker (see gradcheck.h). */
#include "gradcheck.h"

/* Only for in_layout's check that the output is stored NHWC. */
#include "device/device.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dp_device_t *gc_dev;

/* Kernel threads of the checked device: 1, or DP_GRADCHECK_THREADS (the
 * CTest entries PROGRAM.threads2 run every check again with 2, the oneDNN
 * paths that training takes on this machine). */
int gc_threads(void)
{
    const char *env = getenv("DP_GRADCHECK_THREADS");
    int n = env ? atoi(env) : 1;
    return n >= 1 && n <= 64 ? n : 1;
}

int gc_open_device(void **state)
{
    (void)state;
    if (dp_device_open(&gc_dev, "cpu:0", gc_threads()) != 0)
        return -1;
    /* The device must really run that many threads, or the check of the
     * threaded paths would pass vacuously. */
    return dp_device_threads(gc_dev) == gc_threads() ? 0 : -1;
}

int gc_close_device(void **state)
{
    (void)state;
    dp_device_close(gc_dev);
    gc_dev = NULL;
    return 0;
}

int gc_open_device_and_tmp(void **state)
{
    tu_setup_tmp(state);
    return gc_open_device(state);
}

int gc_close_device_and_tmp(void **state)
{
    gc_close_device(state);
    return tu_teardown_tmp(state);
}

int64_t count(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

float *normal_array(dp_rng *rng, int64_t n, float scale)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = scale * dp_rng_normal(rng);
    return v;
}

dp_tensor_t *upload(int ndim, const int64_t *shape, const float *v)
{
    dp_tensor_t *t = NULL;
    OK(dp_tensor_from_host(&t, gc_dev, DP_F32, ndim, shape, v));
    return t;
}

float *download(const dp_tensor_t *t)
{
    int64_t n = dp_tensor_numel(t);
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    OK(dp_tensor_to_host(t, v, (size_t)n * sizeof *v));
    return v;
}

/* The op's output at the problem's current values, logical order. */
static float *gc_forward(const gc_problem *p, dp_tape_t *tape, int64_t *n_out)
{
    dp_tensor_t *in[GC_MAX_IN];
    for (int i = 0; i < p->nin; i++)
        in[i] = upload(p->in[i].ndim, p->in[i].shape, p->in[i].v);
    dp_tape_begin(tape);
    dp_tensor_t *out = NULL;
    int rc = p->build(&out, in, p->ctx);
    float *v = NULL;
    int64_t n = 0;
    if (rc == 0) {
        n = dp_tensor_numel(out);
        v = malloc((size_t)n * sizeof *v);
        rc = dp_tensor_to_host(out, v, (size_t)n * sizeof *v);
    }
    dp_tape_end(tape);
    dp_tape_reset(tape);
    for (int i = 0; i < p->nin; i++)
        dp_tensor_free(in[i]);
    if (rc != 0)
        fail_msg("%s: forward: %s (%s)", p->name, dp_strerror(rc), dp_last_error());
    *n_out = n;
    return v;
}

static double project(const float *y, const double *r, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += r[i] * y[i];
    return s;
}

void gc_analytic(const gc_problem *p, const double *r, int64_t n, float **grads)
{
    dp_tensor_t *in[GC_MAX_IN], *params[GC_MAX_IN];
    int nparams = 0;
    for (int i = 0; i < p->nin; i++) {
        in[i] = upload(p->in[i].ndim, p->in[i].shape, p->in[i].v);
        if (p->in[i].diff) {
            OK(dp_tensor_set_requires_grad(in[i], NULL));
            params[nparams++] = in[i];
        }
    }
    float *rf = malloc((size_t)n * sizeof *rf);
    for (int64_t i = 0; i < n; i++)
        rf[i] = (float)r[i];
    int64_t rshape[2] = {n, 1}, flat[2] = {1, n};
    dp_tensor_t *rt = upload(2, rshape, rf);
    free(rf);

    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *out = NULL, *row = NULL, *loss = NULL;
    int rc = p->build(&out, in, p->ctx);
    if (rc == 0 && dp_tensor_numel(out) != n)
        rc = DP_ESHAPE;
    if (rc == 0)
        rc = dp_reshape(&row, out, 2, flat);
    if (rc == 0)
        rc = dp_linear(&loss, row, rt, NULL, DP_WEIGHT_IN_OUT);
    if (rc == 0) {
        dp_zero_grad(params, nparams);
        rc = dp_backward(loss);
    }
    for (int i = 0; i < p->nin && rc == 0; i++) {
        grads[i] = NULL;
        if (p->in[i].diff) {
            grads[i] = malloc((size_t)count(p->in[i].ndim, p->in[i].shape) * sizeof(float));
            rc = dp_tensor_to_host(dp_tensor_grad(in[i]), grads[i],
                                   (size_t)count(p->in[i].ndim, p->in[i].shape) * sizeof(float));
        }
    }
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(rt);
    for (int i = 0; i < p->nin; i++)
        dp_tensor_free(in[i]);
    if (rc != 0)
        fail_msg("%s: backward: %s (%s)", p->name, dp_strerror(rc), dp_last_error());
}

static bool same_signs(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if ((a[i] > 0) != (b[i] > 0))
            return false;
    return true;
}

/* (L(v[e] + h) - L(v[e] - h)) / 2h; *kinked: the problem has kinks and the
 * sign pattern of its output differs between the three points. */
static double central_difference(const gc_problem *p, dp_tape_t *tape, gc_input *in, int64_t e,
                                 double h, const float *base, const double *r, int64_t n,
                                 bool *kinked)
{
    float saved = in->v[e];
    int64_t n1, n2;
    in->v[e] = (float)(saved + h);
    double hp = (double)in->v[e] - saved; /* the step actually taken in float */
    float *yp = gc_forward(p, tape, &n1);
    in->v[e] = (float)(saved - h);
    double hm = saved - (double)in->v[e];
    float *ym = gc_forward(p, tape, &n2);
    in->v[e] = saved;
    assert_int_equal(n1, n);
    assert_int_equal(n2, n);
    *kinked = p->kink && (!same_signs(base, yp, n) || !same_signs(base, ym, n));
    double num = (project(yp, r, n) - project(ym, r, n)) / (hp + hm);
    free(yp);
    free(ym);
    return num;
}

void gc_run(gc_problem *p)
{
    double eps = p->eps > 0 ? p->eps : 2e-2;
    double rtol = p->rtol > 0 ? p->rtol : 1e-2;
    double atol = p->atol > 0 ? p->atol : 1e-3;
    int checks = p->checks > 0 ? p->checks : 100;
    dp_rng rng;
    dp_rng_init(&rng, p->seed ? p->seed : 12345, 7);

    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    int64_t n;
    float *base = gc_forward(p, tape, &n);
    double *r = malloc((size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++)
        r[i] = n == 1 ? 1.0 : dp_rng_normal(&rng);
    float *grads[GC_MAX_IN] = {0};
    gc_analytic(p, r, n, grads);

    int failures = 0;
    for (int i = 0; i < p->nin; i++) {
        gc_input *in = &p->in[i];
        if (!in->diff)
            continue;
        int64_t numel = count(in->ndim, in->shape);
        int64_t *idx = malloc((size_t)numel * sizeof *idx);
        for (int64_t j = 0; j < numel; j++)
            idx[j] = j;
        int64_t m = numel < checks ? numel : checks;
        for (int64_t j = 0; j < m; j++) { /* a random subset, in random order */
            int64_t k = j + (int64_t)dp_rng_below(&rng, (uint64_t)(numel - j));
            int64_t t = idx[j];
            idx[j] = idx[k];
            idx[k] = t;
        }
        int checked = 0, skipped = 0, bad = 0, sensitive = 0;
        double worst = 0.0;
        for (int64_t j = 0; j < m; j++) {
            int64_t e = idx[j];
            /* At a kink, retry closer; skip the point if it stays there. */
            bool kinked = true;
            double num = 0.0;
            for (double h = eps; h > eps / 20 && kinked; h /= 4)
                num = central_difference(p, tape, in, e, h, base, r, n, &kinked);
            if (kinked) {
                skipped++;
                continue;
            }
            double a = grads[i][e];
            checked++;
            double err = fabs(a - num) / (rtol * fmax(fabs(a), fabs(num)) + atol);
            worst = err > worst ? err : worst;
            if (!tu_close(a, num, rtol, atol)) {
                if (bad < 5)
                    print_error("%s: d/d%s[%lld]: analytic %.7g, numerical %.7g\n", p->name,
                                in->name, (long long)e, a, num);
                bad++;
            }
            if (!tu_close(1.1 * a, num, rtol, atol))
                sensitive++;
        }
        print_message("%-34s d/d%-4s %3d checked %2d skipped, worst |a-n|/tol %.3f, %2d of them "
                      "would catch a 1.1x gradient%s\n",
                      p->name, in->name, checked, skipped, worst, sensitive, bad ? "  FAILED" : "");
        if (bad)
            failures++;
        else if (sensitive == 0 || skipped * 10 > (int)m)
            failures++, print_error("%s: d/d%s: the check is vacuous (%d skipped of %lld)\n",
                                    p->name, in->name, skipped, (long long)m);
        free(idx);
    }
    for (int i = 0; i < p->nin; i++) {
        free(grads[i]);
        free(p->in[i].v);
    }
    free(base);
    free(r);
    dp_tape_close(tape);
    if (failures)
        fail_msg("%s: %d gradient(s) disagree with finite differences", p->name, failures);
}

gc_input input(const char *name, int ndim, const int64_t *shape, float *v, bool diff)
{
    gc_input in = {name, ndim, {0}, v, diff};
    memcpy(in.shape, shape, (size_t)ndim * sizeof *shape);
    return in;
}

void assert_values(const char *what, const float *got, const double *want, int64_t n, double rtol,
                   double atol)
{
    for (int64_t i = 0; i < n; i++)
        if (!tu_close(got[i], want[i], rtol, atol))
            fail_msg("%s[%lld]: got %.9g, want %.9g", what, (long long)i, (double)got[i], want[i]);
}

double *to_double(const float *v, int64_t n)
{
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++)
        d[i] = v[i];
    return d;
}

float *identity_1x1(int64_t C)
{
    float *w = calloc((size_t)(C * C), sizeof *w);
    for (int64_t c = 0; c < C; c++)
        w[c * C + c] = 1.0f;
    return w;
}

/* A random permutation of (i - n/2) * step: values at least `step` apart, so
 * that an argmax does not move under a perturbation below step / 2. */
float *distinct_array(dp_rng *rng, int64_t n, float step)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i - n / 2) * step;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)dp_rng_below(rng, (uint64_t)i + 1);
        float t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    return v;
}

dp_tensor_t *upload_labels(int64_t n, const int32_t *labels)
{
    dp_tensor_t *t = NULL;
    OK(dp_tensor_from_host(&t, gc_dev, DP_I32, 1, &n, labels));
    return t;
}

conv_geom make_geom(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                    int sh, int sw, int ph, int pw)
{
    conv_geom g = {N, C, H, W, K, R, S, sh, sw, ph, pw, 0, 0};
    g.P = (H + 2 * ph - R) / sh + 1;
    g.Q = (W + 2 * pw - S) / sw + 1;
    return g;
}

double *conv_ref(const conv_geom *g, const float *x, const float *w, const float *b, bool relu)
{
    double *y = malloc((size_t)(g->N * g->K * g->P * g->Q) * sizeof *y);
    for (int64_t n = 0; n < g->N; n++)
        for (int64_t k = 0; k < g->K; k++)
            for (int64_t p = 0; p < g->P; p++)
                for (int64_t q = 0; q < g->Q; q++) {
                    double s = b ? b[k] : 0.0;
                    for (int64_t c = 0; c < g->C; c++)
                        for (int64_t r = 0; r < g->R; r++)
                            for (int64_t t = 0; t < g->S; t++) {
                                int64_t h = p * g->sh - g->ph + r, ww = q * g->sw - g->pw + t;
                                if (h < 0 || h >= g->H || ww < 0 || ww >= g->W)
                                    continue;
                                s += (double)x[((n * g->C + c) * g->H + h) * g->W + ww] *
                                     w[((k * g->C + c) * g->R + r) * g->S + t];
                            }
                    if (relu && s < 0)
                        s = 0;
                    y[((n * g->K + k) * g->P + p) * g->Q + q] = s;
                }
    return y;
}

/* Runs `build` on x uploaded with shape xs, without a tape recording, and
 * returns y in logical order (y's element count in *n_out). With nhwc, x
 * first goes through an identity 1x1 convolution, whose output is stored
 * NHWC and holds exactly x. */
float *run_forward(build_fn build, const void *ctx, int ndim, const int64_t *xs, const float *xv,
                   bool nhwc, int64_t *n_out)
{
    dp_tensor_t *x = upload(ndim, xs, xv), *w = NULL, *in = x, *y;
    float *wv = NULL;
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    if (nhwc) {
        int64_t ws[4] = {xs[1], xs[1], 1, 1};
        wv = identity_1x1(xs[1]);
        w = upload(4, ws, wv);
        OK(dp_conv2d(&in, x, w, NULL, NULL));
    }
    OK(build(&y, &in, ctx));
    float *yv = download(y);
    *n_out = 1;
    for (int d = 0; d < dp_tensor_ndim(y); d++)
        *n_out *= dp_tensor_dim(y, d);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x), dp_tensor_free(w);
    free(wv);
    return yv;
}

/* x itself (NCHW) or, for nhwc, the same values stored NHWC. */
dp_tensor_t *in_layout(dp_tensor_t *x, dp_tensor_t *identity, bool nhwc)
{
    if (!nhwc)
        return x;
    dp_tensor_t *y = NULL;
    OK(dp_conv2d(&y, x, identity, NULL, NULL));
    assert_true(y->nhwc);
    return y;
}

dp__conv_shape gc_conv_shape(const int64_t *xs, const int64_t *ws, const dp_conv2d_params *p,
                             dp_precision precision)
{
    bool sides = p->pad_top || p->pad_left || p->pad_bottom || p->pad_right;
    return (dp__conv_shape){.precision = precision,
                            .c = (int32_t)xs[1],
                            .h = (int32_t)xs[2],
                            .w = (int32_t)xs[3],
                            .k = (int32_t)ws[0],
                            .r = (int32_t)ws[2],
                            .s = (int32_t)ws[3],
                            .stride_h = p->stride_h ? p->stride_h : 1,
                            .stride_w = p->stride_w ? p->stride_w : 1,
                            .pad_h = sides ? p->pad_top : p->pad_h,
                            .pad_w = sides ? p->pad_left : p->pad_w,
                            .pad_bottom = sides ? p->pad_bottom : p->pad_h,
                            .pad_right = sides ? p->pad_right : p->pad_w,
                            .dilation_h = p->dilation_h ? p->dilation_h : 1,
                            .dilation_w = p->dilation_w ? p->dilation_w : 1,
                            .groups = p->groups ? p->groups : 1};
}

void gc_force_conv_impl(const dp__conv_shape *s, dp__conv_impl impl)
{
    char text[512], key[160];
    const char *prec = s->precision == DP_PRECISION_BF16 ? "bf16" : "f32";
    const char *name = dp__conv_impl_name(impl);
    dp__conv_shape_str(key, sizeof key, s);
    snprintf(text, sizeof text,
             "%s %dx%dx%d k%d 1x1 s1x1 p0x0: forward=direct backward_data=direct "
             "backward_weights=direct\n"
             "%s: forward=%s backward_data=%s backward_weights=%s\n",
             prec, s->c, s->h, s->w, s->c, key, name, name, name);
    dp_conv_choices_clear();
    OK(dp_conv_choices_load(text));
}

bool gc_conv_ran(const dp__conv_shape *s, dp__conv_impl impl)
{
    for (int pass = 0; pass < DP__CONV_PASSES; pass++)
        if (dp__conv_trace_find(gc_dev, s, (dp__conv_pass)pass) != (int)impl)
            return false;
    return true;
}

void gc_train_falls(dp_model_t *m, dp_tensor_t *x, dp_tensor_t *y, const dp_optimizer_options *o,
                    int steps, float fall, const char *what)
{
    dp_optimizer_t *opt;
    OK(dp_optimizer_init(&opt, dp_model_params(m), o));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    float first = 0, last = 0;
    for (int step = 0; step < steps; step++) {
        dp_tape_begin(tape);
        dp_tensor_t *logits, *loss;
        OK(dp_model_forward(m, x, true, &logits));
        OK(dp_cross_entropy(&loss, logits, y, DP_REDUCE_MEAN));
        dp_params_zero_grad(dp_model_params(m));
        OK(dp_backward(loss));
        OK(dp_params_finish_grad(dp_model_params(m)));
        OK(dp_optimizer_step(opt, 1.0f));
        OK(dp_tensor_to_host(loss, step == 0 ? &first : &last, sizeof last));
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    printf("%s: loss %.4f -> %.4f in %d steps\n", what, (double)first, (double)last, steps);
    if (!(isfinite(last) && last < fall * first))
        fail_msg("%s: the loss did not go down: %g -> %g", what, (double)first, (double)last);
    dp_tape_close(tape);
    dp_optimizer_close(opt);
}

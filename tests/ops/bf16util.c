/* The checks of tests/ops/test_bf16.c (bf16util.h). */
#include "bf16util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U (1.0 / 256)            /* bf16's unit roundoff, 2^-8 */
#define F32_EPS (1.0 / 16777216) /* 2^-24 */

typedef struct bf_result {
    int64_t n;
    float *y;            /* the output as f32, logical order */
    float *g[GC_MAX_IN]; /* d sum r y / d input, for the differentiable ones */
} bf_result;

void bf_add_input(bf_problem *b, const char *name, int ndim, const int64_t *shape, float *v,
                  bool diff)
{
    assert_true(b->nin < GC_MAX_IN);
    b->in[b->nin++] = input(name, ndim, shape, v, diff);
}

void bf_free(bf_problem *b)
{
    for (int i = 0; i < b->nin; i++)
        free(b->in[i].v);
    b->nin = 0;
}

static void result_free(bf_result *r)
{
    free(r->y);
    for (int i = 0; i < GC_MAX_IN; i++)
        free(r->g[i]);
}

static float round_bf16(float x);

/* A bf16 result read back as f32: every value one that bf16 holds exactly
 * (so a "bf16" path that computed in f32 and never rounded fails, as its
 * error is within every bound here). */
static void assert_bf16_values(const char *name, const char *what, const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i]) || v[i] != round_bf16(v[i]))
            fail_msg("%s: %s[%lld] = %.9g is not a bf16 value (bf16 rounds it to %.9g)", name, what,
                     (long long)i, (double)v[i], (double)round_bf16(v[i]));
}

/* The op in precision p on inputs vals[i], and the gradients of sum r y.
 * In a bf16 precision an op whose output is not float32 (b->out_f32) must
 * give a bf16 tensor of bf16 values. */
static void evaluate(const bf_problem *b, dp_precision p, float *const *vals, const float *r,
                     int64_t n_expected, bf_result *out)
{
    memset(out, 0, sizeof *out);
    dp_tensor_t *in[GC_MAX_IN];
    for (int i = 0; i < b->nin; i++) {
        in[i] = upload(b->in[i].ndim, b->in[i].shape, vals[i]);
        if (b->in[i].diff)
            OK(dp_tensor_set_requires_grad(in[i], NULL));
    }
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *y, *y32, *row, *loss, *rt = NULL;
    int rc = b->build(&y, in, b->ctx, p);
    dp_set_precision(DP_PRECISION_FP32);
    bool bf16_out = p != DP_PRECISION_FP32 && !b->out_f32;
    if (rc == 0 && bf16_out && dp_tensor_dtype(y) != DP_BF16)
        fail_msg("%s (%s): the output is not bf16 (dtype %d)", b->name, dp_precision_name(p),
                 (int)dp_tensor_dtype(y));
    if (rc == 0 && !bf16_out && dp_tensor_dtype(y) != DP_F32)
        fail_msg("%s (%s): the output is not float32 (dtype %d)", b->name, dp_precision_name(p),
                 (int)dp_tensor_dtype(y));
    if (rc == 0)
        rc = dp_cast(&y32, y, DP_F32);
    int64_t n = rc == 0 ? dp_tensor_numel(y32) : 0;
    if (rc == 0 && n_expected > 0 && n != n_expected)
        rc = DP_ESHAPE;
    if (rc == 0) {
        int64_t flat[2] = {1, n}, rs[2] = {n, 1};
        rt = upload(2, rs, r);
        rc = dp_reshape(&row, y32, 2, flat);
        if (rc == 0)
            rc = dp_linear(&loss, row, rt, NULL, DP_WEIGHT_IN_OUT);
    }
    if (rc == 0)
        rc = dp_backward(loss);
    if (rc == 0) {
        out->n = n;
        out->y = download(y32);
        if (bf16_out)
            assert_bf16_values(b->name, dp_precision_name(p), out->y, n);
        for (int i = 0; i < b->nin; i++)
            if (b->in[i].diff)
                out->g[i] = download(dp_tensor_grad(in[i]));
    }
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(rt);
    for (int i = 0; i < b->nin; i++)
        dp_tensor_free(in[i]);
    if (rc != 0)
        fail_msg("%s (%s): %s (%s)", b->name, dp_precision_name(p), dp_strerror(rc),
                 dp_last_error());
}

/* The output's length, from one f32 run (r of the right size unknown yet). */
static int64_t output_length(const bf_problem *b, float *const *vals)
{
    dp_tensor_t *in[GC_MAX_IN], *y;
    for (int i = 0; i < b->nin; i++)
        in[i] = upload(b->in[i].ndim, b->in[i].shape, vals[i]);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    int rc = b->build(&y, in, b->ctx, DP_PRECISION_FP32);
    int64_t n = rc == 0 ? dp_tensor_numel(y) : 0;
    dp_tape_end(tape);
    dp_tape_close(tape);
    for (int i = 0; i < b->nin; i++)
        dp_tensor_free(in[i]);
    if (rc != 0)
        fail_msg("%s: %s (%s)", b->name, dp_strerror(rc), dp_last_error());
    return n;
}

static float *random_projection(int64_t n, uint64_t seed)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 11);
    return normal_array(&rng, n, 1.0f);
}

static float *map(const float *v, int64_t n, float (*f)(float))
{
    float *o = malloc((size_t)(n ? n : 1) * sizeof *o);
    for (int64_t i = 0; i < n; i++)
        o[i] = f(v[i]);
    return o;
}

static float same(float x)
{
    return x;
}

static float absf(float x)
{
    return fabsf(x);
}

static float round_bf16(float x)
{
    /* round to nearest even in the top 16 bits (finite inputs) */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Fails unless |got - want| <= coef bound[e] + slack everywhere; prints the
 * worst ratio so a reader sees how much room is left. */
static void within(const char *what, const char *name, const float *got, const float *want,
                   const float *bound, double coef, double slack, int64_t n)
{
    double worst = 0;
    int64_t at = 0;
    for (int64_t e = 0; e < n; e++) {
        double tol = coef * fabs((double)bound[e]) + slack;
        double err = tu_worst_diff(0, got[e], want[e], what, e); /* fails on NaN and Inf */
        if (!(err <= tol))
            fail_msg("%s: %s[%lld]: %.9g against %.9g (difference %.3g, bound %.3g)", name, what,
                     (long long)e, (double)got[e], (double)want[e], err, tol);
        if (err / tol > worst) {
            worst = err / tol;
            at = e;
        }
    }
    print_message("%-34s %-10s worst |difference| / bound %.3f (element %lld of %lld)\n", name,
                  what, worst, (long long)at, (long long)n);
}

void bf_check_products(const bf_problem *b, int fd)
{
    float *vals[GC_MAX_IN], *abs_vals[GC_MAX_IN];
    for (int i = 0; i < b->nin; i++) {
        vals[i] = b->in[i].v;
        abs_vals[i] = map(b->in[i].v, count(b->in[i].ndim, b->in[i].shape), absf);
    }
    int64_t n = output_length(b, vals);
    float *r = random_projection(n, 7), *r_abs = map(r, n, absf);
    bf_result exact, mag, ref;
    evaluate(b, DP_PRECISION_FP32, vals, r, n, &exact);
    evaluate(b, DP_PRECISION_FP32, abs_vals, r_abs, n, &mag);
    evaluate(b, DP_PRECISION_BF16_REFERENCE, vals, r, n, &ref);
    double out_coef = (b->out_f32 ? 2 * U : 3 * U) + U * U + (double)b->out_length * F32_EPS;
    within("output", b->name, ref.y, exact.y, mag.y, out_coef, 1e-6, n);
    for (int i = 0; i < b->nin; i++) {
        if (!b->in[i].diff)
            continue;
        int64_t m = count(b->in[i].ndim, b->in[i].shape);
        double coef = (b->bf16_grad[i] ? 3 * U : 2 * U) + U * U + (double)b->length[i] * F32_EPS;
        char what[48];
        snprintf(what, sizeof what, "d/d%s", b->in[i].name);
        within(what, b->name, ref.g[i], exact.g[i], mag.g[i], coef, 1e-6, m);
        /* Finite differences of the f32 op, which is linear in each input:
         * exact for any step but for the f32 sums' rounding, at most
         * out_length 2^-24 sum_j |r_j| A_j / h. */
        double h = 0.25, fd_slack = 0;
        for (int64_t j = 0; j < n; j++)
            fd_slack += fabs((double)r[j]) * mag.y[j];
        fd_slack *= 2.0 * (double)b->out_length * F32_EPS / h;
        for (int k = 0; k < fd && k < m; k++) {
            int64_t e = (int64_t)k * (m / (fd > 1 ? fd : 1));
            float saved = b->in[i].v[e];
            bf_result plus, minus;
            b->in[i].v[e] = saved + (float)h;
            evaluate(b, DP_PRECISION_FP32, vals, r, n, &plus);
            b->in[i].v[e] = saved - (float)h;
            evaluate(b, DP_PRECISION_FP32, vals, r, n, &minus);
            b->in[i].v[e] = saved;
            double lp = 0, lm = 0;
            for (int64_t j = 0; j < n; j++) {
                lp += (double)r[j] * plus.y[j];
                lm += (double)r[j] * minus.y[j];
            }
            double num = (lp - lm) / (2 * h), tol = coef * mag.g[i][e] + fd_slack + 1e-6;
            if (!tu_close(ref.g[i][e], num, 0, tol))
                fail_msg("%s: d/d%s[%lld]: bf16 reference %.7g, finite difference %.7g (bound "
                         "%.3g)",
                         b->name, b->in[i].name, (long long)e, (double)ref.g[i][e], num, tol);
            result_free(&plus);
            result_free(&minus);
        }
    }
    result_free(&exact);
    result_free(&mag);
    result_free(&ref);
    for (int i = 0; i < b->nin; i++)
        free(abs_vals[i]);
    free(r);
    free(r_abs);
}

void bf_check_native(const bf_problem *b)
{
    float *vals[GC_MAX_IN], *abs_vals[GC_MAX_IN];
    for (int i = 0; i < b->nin; i++) {
        vals[i] = b->in[i].v;
        abs_vals[i] = map(b->in[i].v, count(b->in[i].ndim, b->in[i].shape), absf);
    }
    int64_t n = output_length(b, vals);
    float *r = random_projection(n, 8), *r_abs = map(r, n, absf);
    bf_result mag, ref, nat;
    evaluate(b, DP_PRECISION_FP32, abs_vals, r_abs, n, &mag);
    evaluate(b, DP_PRECISION_BF16_REFERENCE, vals, r, n, &ref);
    evaluate(b, DP_PRECISION_BF16, vals, r, n, &nat);
    /* one bf16 ulp (2u of the value) where the output is rounded, and the
     * f32 sums in another order: L 2^-23 of A */
    float *bound = malloc((size_t)n * sizeof *bound);
    for (int64_t j = 0; j < n; j++)
        bound[j] = (float)((b->out_f32 ? 0 : 2 * U) * fabs((double)ref.y[j]) +
                           (double)b->out_length * 2 * F32_EPS * mag.y[j]);
    within("native y", b->name, nat.y, ref.y, bound, 1.0, 1e-6, n);
    free(bound);
    for (int i = 0; i < b->nin; i++) {
        if (!b->in[i].diff)
            continue;
        int64_t m = count(b->in[i].ndim, b->in[i].shape);
        float *gb = malloc((size_t)m * sizeof *gb);
        for (int64_t e = 0; e < m; e++)
            gb[e] = (float)((b->bf16_grad[i] ? 2 * U : 0) * fabs((double)ref.g[i][e]) +
                            (double)b->length[i] * 2 * F32_EPS * mag.g[i][e]);
        char what[48];
        snprintf(what, sizeof what, "native d/d%s", b->in[i].name);
        within(what, b->name, nat.g[i], ref.g[i], gb, 1.0, 1e-6, m);
        free(gb);
    }
    result_free(&mag);
    result_free(&ref);
    result_free(&nat);
    for (int i = 0; i < b->nin; i++)
        free(abs_vals[i]);
    free(r);
    free(r_abs);
}

void bf_check_storage(const bf_problem *b)
{
    float *vals[GC_MAX_IN], *rounded[GC_MAX_IN];
    for (int i = 0; i < b->nin; i++) {
        vals[i] = b->in[i].v;
        bool activation = b->in[i].ndim == 4 && b->in[i].diff;
        int64_t m = count(b->in[i].ndim, b->in[i].shape);
        rounded[i] = map(b->in[i].v, m, activation ? round_bf16 : same);
    }
    int64_t n = output_length(b, vals);
    float *r = random_projection(n, 9), *r_rounded = map(r, n, round_bf16);
    bf_result f32, bf;
    evaluate(b, DP_PRECISION_FP32, rounded, r_rounded, n, &f32);
    evaluate(b, DP_PRECISION_BF16_REFERENCE, vals, r, n, &bf);
    within("output", b->name, bf.y, f32.y, f32.y, 2 * U,
           1e-5 * tu_max_abs("f32 output", f32.y, n) + 1e-7, n);
    for (int i = 0; i < b->nin; i++) {
        if (!b->in[i].diff)
            continue;
        int64_t m = count(b->in[i].ndim, b->in[i].shape);
        char what[48];
        snprintf(what, sizeof what, "d/d%s", b->in[i].name);
        float *bound = malloc((size_t)m * sizeof *bound);
        for (int64_t e = 0; e < m; e++)
            bound[e] = (float)(2 * U * fabs((double)f32.g[i][e]) +
                               (b->out_grad_slope > 0 ? b->out_grad_slope * U * fabs(r[e]) : 0));
        within(what, b->name, bf.g[i], f32.g[i], bound, 1.0,
               1e-5 * tu_max_abs("f32 gradient", f32.g[i], m) + 1e-7, m);
        free(bound);
    }
    result_free(&f32);
    result_free(&bf);
    for (int i = 0; i < b->nin; i++)
        free(rounded[i]);
    free(r);
    free(r_rounded);
}

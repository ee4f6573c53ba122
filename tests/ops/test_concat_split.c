/* Concat and split along channels (dp_concat, dp_split): values for
 * inputs in mixed layouts (NCHW and NHWC, the output NHWC), for (N, K) and
 * for bf16; gradients against finite differences for a concat of six
 * inputs (more than one tape node holds), for a split whose middle piece
 * is unused (its channels' gradient zero) and whose others meet again;
 * and bf16 pieces whose gradients add into one bf16 buffer. */
#include "gradcheck.h"

#include "core/bf16.h"
#include "device/storage.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXN = 6 };

typedef struct cat_case {
    const char *name;
    int n, ndim;
    int64_t N, C[MAXN], H, W;
    bool nhwc[MAXN];
} cat_case;

static const cat_case cats[] = {
    {"concat of 3, NCHW NHWC NCHW", 3, 4, 2, {2, 3, 1}, 3, 4, {false, true, false}},
    {"concat of 6, mixed layouts", 6, 4, 2, {1, 2, 3, 1, 2, 1}, 2, 3, {1, 0, 1, 1, 0, 0}},
    {"concat of 5, (N, K)", 5, 2, 3, {2, 1, 4, 3, 2}, 1, 1, {false}},
};

static void shape_of(const cat_case *c, int i, int64_t *s)
{
    s[0] = c->N, s[1] = c->C[i], s[2] = c->H, s[3] = c->W;
}

/* A case and the identity 1x1 weights that store its NHWC inputs so. */
typedef struct cat_ctx {
    const cat_case *c;
    dp_tensor_t *ids[MAXN];
} cat_ctx;

static void ctx_open(cat_ctx *x, const cat_case *c)
{
    x->c = c;
    for (int i = 0; i < c->n; i++) {
        int64_t ws[4] = {c->C[i], c->C[i], 1, 1};
        float *id = identity_1x1(c->C[i]);
        x->ids[i] = upload(4, ws, id);
        free(id);
    }
}

static void ctx_close(cat_ctx *x)
{
    for (int i = 0; i < x->c->n; i++)
        dp_tensor_free(x->ids[i]);
}

/* in[0..n): the inputs. */
static int build_cat(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const cat_ctx *x = ctx;
    const cat_case *c = x->c;
    dp_tensor_t *xs[MAXN];
    for (int i = 0; i < c->n; i++) {
        xs[i] = in[i];
        if (c->nhwc[i]) {
            int rc = dp_conv2d(&xs[i], in[i], x->ids[i], NULL, NULL);
            if (rc != 0)
                return rc;
            assert_true(dp__tensor_nhwc(xs[i]));
        }
    }
    return dp_concat(out, xs, c->n);
}

static gc_problem cat_problem(const cat_ctx *x, uint64_t seed)
{
    const cat_case *c = x->c;
    gc_problem g = {.name = c->name, .build = build_cat, .ctx = x};
    dp_rng rng;
    dp_rng_init(&rng, seed, 0);
    static const char *const names[MAXN] = {"x0", "x1", "x2", "x3", "x4", "x5"};
    for (int i = 0; i < c->n; i++) {
        int64_t s[4];
        shape_of(c, i, s);
        g.in[g.nin++] =
            input(names[i], c->ndim, s, normal_array(&rng, count(c->ndim, s), 1.0f), true);
    }
    return g;
}

static void test_concat_values(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cats); k++) {
        const cat_case *c = &cats[k];
        cat_ctx x;
        ctx_open(&x, c);
        gc_problem g = cat_problem(&x, 7 + k);
        dp_tensor_t *in[MAXN];
        int64_t Ctot = 0, HW = c->H * c->W;
        for (int i = 0; i < c->n; i++) {
            in[i] = upload(g.in[i].ndim, g.in[i].shape, g.in[i].v);
            Ctot += c->C[i];
        }
        dp_tape_t *tape;
        OK(dp_tape_init(&tape, false));
        dp_tape_begin(tape);
        dp_tensor_t *y;
        OK(build_cat(&y, in, &x));
        bool any_nhwc = false;
        for (int i = 0; i < c->n; i++)
            any_nhwc = any_nhwc || c->nhwc[i];
        assert_int_equal(dp__tensor_nhwc(y), any_nhwc);
        assert_int_equal(dp_tensor_dim(y, 1), Ctot);
        float *got = download(y);
        dp_tape_end(tape);
        dp_tape_close(tape);
        int64_t n = c->N * Ctot * HW;
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t b = 0, off = 0; b < c->N; b++)
            for (int i = 0; i < c->n; i++)
                for (int64_t j = 0; j < c->C[i] * HW; j++)
                    want[off++] = g.in[i].v[b * c->C[i] * HW + j];
        assert_values(c->name, got, want, n, 0, 0);
        printf("%-32s values: the inputs' channels in order, exactly\n", c->name);
        for (int i = 0; i < c->n; i++) {
            dp_tensor_free(in[i]);
            free(g.in[i].v);
        }
        ctx_close(&x);
        free(got), free(want);
    }
}

static void test_concat_gradients(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cats); k++) {
        cat_ctx x;
        ctx_open(&x, &cats[k]);
        gc_problem g = cat_problem(&x, 70 + k);
        gc_run(&g);
        ctx_close(&x);
    }
}

/* x (2, 6, 3, 4) NHWC split into 1, 3 and 2 channels; y = concat(piece 2,
 * piece 0, x) (piece 1 unused; x's own use gives its gradient first, into
 * which the pieces' gradients then add). */
static int build_split(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    (void)ctx;
    dp_tensor_t *x, *p[3];
    const int64_t sizes[3] = {1, 3, 2};
    int rc = dp_conv2d(&x, in[0], in[1], NULL, NULL);
    if (rc == 0)
        rc = dp_split(p, x, 3, sizes);
    if (rc != 0)
        return rc;
    assert_true(dp__tensor_nhwc(p[0]) && dp__tensor_nhwc(p[2]));
    dp_tensor_t *keep[3] = {p[2], p[0], x};
    return dp_concat(out, keep, 3);
}

static void test_split(void **state)
{
    (void)state;
    const int64_t xs[4] = {2, 6, 3, 4}, ws[4] = {6, 6, 1, 1};
    dp_rng rng;
    dp_rng_init(&rng, 17, 0);
    float *xv = normal_array(&rng, count(4, xs), 1.0f), *id = identity_1x1(6);
    dp_tensor_t *in[2] = {upload(4, xs, xv), upload(4, ws, id)}, *y;
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    OK(build_split(&y, in, NULL));
    float *got = download(y);
    dp_tape_end(tape);
    dp_tape_close(tape);
    double want[2 * 9 * 12];
    for (int64_t b = 0, o = 0; b < 2; b++) {
        for (int64_t j = 0; j < 2 * 12; j++) /* channels 4 and 5 */
            want[o++] = xv[(b * 6 + 4) * 12 + j];
        for (int64_t j = 0; j < 12; j++) /* channel 0 */
            want[o++] = xv[b * 6 * 12 + j];
        for (int64_t j = 0; j < 6 * 12; j++) /* x */
            want[o++] = xv[b * 6 * 12 + j];
    }
    assert_values("split", got, want, 2 * 9 * 12, 0, 0);
    printf("split (2,6,3,4) NHWC into 1, 3, 2: values exactly\n");
    dp_tensor_free(in[0]), dp_tensor_free(in[1]);
    free(got);
    int64_t sizes_bad[2] = {4, 3};
    assert_int_equal(dp_split((dp_tensor_t *[2]){0}, in[0] = upload(4, xs, xv), 2, sizes_bad),
                     DP_ESHAPE);
    tu_assert_error_mentions("add up to its 6 channels");
    dp_tensor_free(in[0]);
    gc_problem g = {.name = "split (2,6,3,4) NHWC, piece unused", .build = build_split};
    g.in[g.nin++] = input("x", 4, xs, xv, true);
    g.in[g.nin++] = input("id", 4, ws, id, false);
    gc_run(&g);
}

/* bf16: a split's pieces, concatenated back in another order and cast to
 * f32, give x's values rounded; x's gradient through the two bf16 pieces
 * (one added in place into the other's buffer) is the upstream gradient's
 * rounding, moved back to its channels. */
static void test_bf16(void **state)
{
    (void)state;
    const int64_t xs[4] = {2, 5, 3, 3}, sizes[2] = {2, 3};
    int64_t n = count(4, xs), HW = 9;
    dp_rng rng;
    dp_rng_init(&rng, 21, 0);
    float *xv = normal_array(&rng, n, 1.0f), *rv = normal_array(&rng, n, 1.0f);
    dp_tensor_t *x = upload(4, xs, xv), *r;
    int64_t rs[2] = {n, 1}, flat[2] = {1, n};
    r = upload(2, rs, rv);
    OK(dp_tensor_set_requires_grad(x, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *xb, *p[2], *y, *yf, *row, *loss;
    OK(dp_cast(&xb, x, DP_BF16));
    OK(dp_split(p, xb, 2, sizes));
    OK(dp_concat(&y, (dp_tensor_t *[2]){p[1], p[0]}, 2));
    assert_int_equal(dp_tensor_dtype(y), DP_BF16);
    OK(dp_cast(&yf, y, DP_F32));
    OK(dp_reshape(&row, yf, 2, flat));
    OK(dp_linear(&loss, row, r, NULL, DP_WEIGHT_IN_OUT));
    dp_zero_grad(&x, 1);
    OK(dp_backward(loss));
    float *got = download(yf), *dx = download(dp_tensor_grad(x));
    dp_tape_end(tape);
    dp_tape_close(tape);
    for (int64_t b = 0; b < 2; b++)
        for (int64_t c = 0; c < 5; c++)
            for (int64_t j = 0; j < HW; j++) {
                int64_t yc = c < 2 ? c + 3 : c - 2; /* where channel c of x went */
                int64_t xi = (b * 5 + c) * HW + j, yi = (b * 5 + yc) * HW + j;
                float want = dp__bf16_to_f32(dp__bf16_from_f32(xv[xi]));
                float gwant = dp__bf16_to_f32(dp__bf16_from_f32(rv[yi]));
                if (got[yi] != want || dx[xi] != gwant)
                    fail_msg("bf16 at %lld: %g and gradient %g, want %g and %g", (long long)xi,
                             got[yi], dx[xi], want, gwant);
            }
    printf("bf16 split and concat: values and gradients exactly the rounded ones\n");
    dp_tensor_free(x), dp_tensor_free(r);
    free(xv), free(rv), free(got), free(dx);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concat_values),
        cmocka_unit_test(test_concat_gradients),
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_bf16),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}

/* dp__batch_norm2d_add, ResNet's block tail relu(bn2(x) + shortcut) in one
 * sweep (the batch_norm_add kernel), in float32:
 *   - finite-difference gradient checks of x, gamma, beta and the residual,
 *     training and eval, NCHW and NHWC, with and without the ReLU, and with
 *     the residual being x itself (its gradient then adds batch norm's dx
 *     to the one the sum hands it);
 *   - the fused op against dp_batch_norm2d then dp_add_relu (the unfused
 *     ops, oneDNN's normalisation): values and every gradient within 2e-6
 *     relative to the largest (the two normalise with the same statistics
 *     in another order of float operations);
 *   - the fused op without its ReLU followed by dp_relu against the fused
 *     op with it: bit for bit (a pipeline cut at the block's ReLU runs that
 *     way, tests/nn/test_forward_layers.c compares it with the whole). */
#include "gradcheck.h"

#include "ops/batch_norm_add.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { TAIL_FUSED, TAIL_UNFUSED, TAIL_SPLIT };

typedef struct tail_ctx {
    dp_batch_norm_params p;
    dp_tensor_t *rm, *rv;
    bool nhwc;          /* x and the residual through the identity conv (NHWC) */
    bool residual_is_x; /* relu(bn(x) + x) */
    int how;            /* TAIL_* */
} tail_ctx;

/* in: x, gamma, beta, residual, then the identity 1x1 weight with nhwc. */
static int build_tail(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const tail_ctx *c = ctx;
    dp_tensor_t *x = in[0], *r = c->residual_is_x ? in[0] : in[3];
    int rc = 0;
    if (c->nhwc) {
        rc = dp_conv2d(&x, x, in[4], NULL, NULL);
        if (rc == 0 && !c->residual_is_x)
            rc = dp_conv2d(&r, r, in[4], NULL, NULL);
        if (c->residual_is_x)
            r = x;
    }
    if (rc)
        return rc;
    if (c->how == TAIL_FUSED)
        return dp__batch_norm2d_add(out, x, in[1], in[2], c->rm, c->rv, r, &c->p);
    dp_batch_norm_params q = c->p;
    dp_tensor_t *y;
    if (c->how == TAIL_SPLIT) {
        q.relu = false;
        rc = dp__batch_norm2d_add(&y, x, in[1], in[2], c->rm, c->rv, r, &q);
        return rc ? rc : c->p.relu ? dp_relu(out, y) : (*out = y, 0);
    }
    q.relu = false;
    rc = dp_batch_norm2d(&y, x, in[1], in[2], c->rm, c->rv, &q);
    if (rc)
        return rc;
    return c->p.relu ? dp_add_relu(out, y, r) : dp_add(out, y, r);
}

typedef struct tail_case {
    const char *name;
    int64_t xs[4];
    bool training, relu, nhwc, residual_is_x;
} tail_case;

static const tail_case cases[] = {
    {"train NCHW relu", {2, 3, 4, 5}, true, true, false, false},
    {"train NHWC relu", {2, 4, 3, 3}, true, true, true, false},
    {"train NCHW no relu", {3, 2, 3, 2}, true, false, false, false},
    {"train NHWC relu, residual x", {2, 3, 3, 4}, true, true, true, true},
    {"eval NHWC relu", {2, 3, 4, 3}, false, true, true, false},
    {"eval NCHW no relu", {2, 2, 3, 3}, false, false, false, false},
};

static void setup_case(const tail_case *t, dp_rng *rng, tail_ctx *c, float **rm0, float **rv0)
{
    int64_t C = t->xs[1];
    *rm0 = normal_array(rng, C, 0.5f);
    *rv0 = normal_array(rng, C, 0.3f);
    for (int64_t i = 0; i < C; i++)
        (*rv0)[i] = 0.5f + fabsf((*rv0)[i]);
    *c = (tail_ctx){.p = {.training = t->training, .relu = t->relu},
                    .rm = upload(1, &C, *rm0),
                    .rv = upload(1, &C, *rv0),
                    .nhwc = t->nhwc,
                    .residual_is_x = t->residual_is_x};
}

static void add_inputs(gc_input *in, int *nin, const tail_case *t, dp_rng *rng)
{
    int64_t C = t->xs[1], n = count(4, t->xs), ws[4] = {C, C, 1, 1};
    float *g = normal_array(rng, C, 0.3f);
    for (int64_t i = 0; i < C; i++)
        g[i] += g[i] < 0 ? -0.7f : 0.7f; /* |gamma| in 0.7 .. ~1.6 */
    in[(*nin)++] = input("x", 4, t->xs, normal_array(rng, n, 1.0f), true);
    in[(*nin)++] = input("gamma", 1, &C, g, true);
    in[(*nin)++] = input("beta", 1, &C, normal_array(rng, C, 0.5f), true);
    in[(*nin)++] = input("residual", 4, t->xs, normal_array(rng, n, 1.0f), !t->residual_is_x);
    if (t->nhwc)
        in[(*nin)++] = input("id", 4, ws, identity_1x1(C), false);
}

static void tail_gradients(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const tail_case *t = &cases[k];
        dp_rng rng;
        dp_rng_init(&rng, 70 + k, 1);
        tail_ctx c;
        float *rm0, *rv0;
        setup_case(t, &rng, &c, &rm0, &rv0);
        c.how = TAIL_FUSED;
        gc_problem g = {.name = t->name, .build = build_tail, .ctx = &c, .seed = 70 + k};
        g.kink = t->relu;
        add_inputs(g.in, &g.nin, t, &rng);
        gc_run(&g);
        free(rm0), free(rv0);
        dp_tensor_free(c.rm), dp_tensor_free(c.rv);
    }
}

/* Output and the gradient of every differentiable input of L = sum r y,
 * built the way c->how says (running statistics put back first). */
typedef struct tail_run {
    float *y, *g[5];
    int64_t n, m[5];
} tail_run;

static void run_tail(const tail_case *t, tail_ctx *c, gc_input *in, int nin, const float *rm0,
                     const float *rv0, tail_run *out)
{
    int64_t C = t->xs[1];
    OK(dp_tensor_copy_from_host(c->rm, rm0, (size_t)C * sizeof(float)));
    OK(dp_tensor_copy_from_host(c->rv, rv0, (size_t)C * sizeof(float)));
    dp_tensor_t *ts[5];
    for (int i = 0; i < nin; i++) {
        ts[i] = upload(in[i].ndim, in[i].shape, in[i].v);
        if (in[i].diff)
            OK(dp_tensor_set_requires_grad(ts[i], NULL));
    }
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *y, *row, *loss, *proj;
    OK(build_tail(&y, ts, c));
    int64_t n = dp_tensor_numel(y), flat[2] = {1, n}, ps[2] = {n, 1};
    dp_rng rng;
    dp_rng_init(&rng, 99, 1);
    float *r = normal_array(&rng, n, 1.0f);
    proj = upload(2, ps, r);
    OK(dp_reshape(&row, y, 2, flat));
    OK(dp_linear(&loss, row, proj, NULL, DP_WEIGHT_IN_OUT));
    OK(dp_backward(loss));
    out->n = n;
    out->y = download(y);
    for (int i = 0; i < nin; i++) {
        out->m[i] = count(in[i].ndim, in[i].shape);
        out->g[i] = in[i].diff ? download(dp_tensor_grad(ts[i])) : NULL;
    }
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(proj);
    for (int i = 0; i < nin; i++)
        dp_tensor_free(ts[i]);
    free(r);
}

static void run_free(tail_run *r, int nin)
{
    free(r->y);
    for (int i = 0; i < nin; i++)
        free(r->g[i]);
}

/* |a - b| <= rtol max |b| for every element, naming the first bad one. */
static void assert_close(const char *what, const char *name, const float *a, const float *b,
                         int64_t n, double rtol)
{
    double big = 0;
    for (int64_t i = 0; i < n; i++)
        big = fmax(big, fabs((double)b[i]));
    assert_true(big > 0); /* a comparison of zeros proves nothing */
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)a[i] - (double)b[i]) <= rtol * big))
            fail_msg("%s %s[%lld]: %.9g against %.9g (max %.3g)", name, what, (long long)i,
                     (double)a[i], (double)b[i], big);
}

static void tail_matches_unfused(void **state)
{
    (void)state;
    static const char *const names[5] = {"dx", "dgamma", "dbeta", "dresidual", "did"};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const tail_case *t = &cases[k];
        dp_rng rng;
        dp_rng_init(&rng, 80 + k, 1);
        tail_ctx c;
        float *rm0, *rv0;
        setup_case(t, &rng, &c, &rm0, &rv0);
        gc_input in[5];
        int nin = 0;
        add_inputs(in, &nin, t, &rng);
        tail_run runs[3];
        for (int how = 0; how < 3; how++) {
            c.how = how;
            run_tail(t, &c, in, nin, rm0, rv0, &runs[how]);
        }
        assert_close("y", t->name, runs[TAIL_FUSED].y, runs[TAIL_UNFUSED].y, runs[0].n, 2e-6);
        assert_memory_equal(runs[TAIL_FUSED].y, runs[TAIL_SPLIT].y,
                            (size_t)runs[0].n * sizeof(float));
        for (int i = 0; i < nin; i++) {
            if (!in[i].diff)
                continue;
            assert_close(names[i], t->name, runs[TAIL_FUSED].g[i], runs[TAIL_UNFUSED].g[i],
                         runs[0].m[i], 2e-6);
            assert_memory_equal(runs[TAIL_FUSED].g[i], runs[TAIL_SPLIT].g[i],
                                (size_t)runs[0].m[i] * sizeof(float));
        }
        for (int how = 0; how < 3; how++)
            run_free(&runs[how], nin);
        for (int i = 0; i < nin; i++)
            free(in[i].v);
        free(rm0), free(rv0);
        dp_tensor_free(c.rm), dp_tensor_free(c.rv);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(tail_gradients, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(tail_matches_unfused, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

/* Add, sub, mul and div with ONNX's broadcasting over channels
 * (dp_binary): every op on operands of one shape (in two layouts), with
 * the second or the first operand one value per channel, one per sample
 * and channel, or one element, NCHW, NHWC and (N, K): values against
 * numpy's broadcasting rule written out in double, and both operands'
 * gradients (the broadcast one's summed over its axes) against finite
 * differences. Shapes that broadcast otherwise are refused. */
#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct operand {
    int ndim;
    int64_t shape[4];
    bool nhwc; /* stored NHWC: through an identity 1x1 convolution */
} operand;

typedef struct bin_case {
    const char *name;
    operand a, b;
} bin_case;

static const bin_case cases[] = {
    {"(2,3,4,5) . (2,3,4,5) NHWC", {4, {2, 3, 4, 5}, false}, {4, {2, 3, 4, 5}, true}},
    {"(2,3,4,5) . (1,3,1,1)", {4, {2, 3, 4, 5}, false}, {4, {1, 3, 1, 1}, false}},
    {"(2,3,4,5) NHWC . (3,1,1)", {4, {2, 3, 4, 5}, true}, {3, {3, 1, 1}, false}},
    {"(3,1,1) . (2,3,4,5) NHWC", {3, {3, 1, 1}, false}, {4, {2, 3, 4, 5}, true}},
    {"(2,3,4,5) NHWC . (2,3,1,1)", {4, {2, 3, 4, 5}, true}, {4, {2, 3, 1, 1}, false}},
    {"(2,3,1,1) . (2,3,4,5)", {4, {2, 3, 1, 1}, false}, {4, {2, 3, 4, 5}, false}},
    {"(2,3,4,5) NHWC . (1)", {4, {2, 3, 4, 5}, true}, {1, {1}, false}},
    {"(1,1) . (2,3,4,5)", {2, {1, 1}, false}, {4, {2, 3, 4, 5}, false}},
    {"(5,7) . (7)", {2, {5, 7}, false}, {1, {7}, false}},
    {"(1,7) . (5,7)", {2, {1, 7}, false}, {2, {5, 7}, false}},
};

static const char *const op_names[] = {"add", "sub", "mul", "div"};

typedef struct ctx {
    const bin_case *c;
    dp_binary_op op;
} ctx;

/* in[0] = a, in[1] = b, in[2] and in[3] their identity 1x1 weights. */
static int build(dp_tensor_t **out, dp_tensor_t *const *in, const void *p)
{
    const ctx *k = p;
    dp_tensor_t *a = in[0], *b = in[1];
    int rc = 0;
    if (k->c->a.nhwc)
        rc = dp_conv2d(&a, in[0], in[2], NULL, NULL);
    if (rc == 0 && k->c->b.nhwc)
        rc = dp_conv2d(&b, in[1], in[3], NULL, NULL);
    return rc ? rc : dp_binary(out, k->op, a, b);
}

static const operand *full_of(const bin_case *c)
{
    return count(c->a.ndim, c->a.shape) >= count(c->b.ndim, c->b.shape) ? &c->a : &c->b;
}

/* The element of operand o (logical order) that numpy's broadcasting puts
 * at logical index i of the full shape f. */
static int64_t bcast_index(const operand *o, const operand *f, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int d = f->ndim - 1, e = o->ndim - 1; d >= 0; d--, e--) {
        int64_t coord = i % f->shape[d];
        i /= f->shape[d];
        if (e >= 0) {
            idx += (o->shape[e] == 1 ? 0 : coord) * stride;
            stride *= o->shape[e];
        }
    }
    return idx;
}

static double apply(dp_binary_op op, double a, double b)
{
    return op == DP_BINARY_ADD   ? a + b
           : op == DP_BINARY_SUB ? a - b
           : op == DP_BINARY_MUL ? a * b
                                 : a / b;
}

/* Values away from 0, so that a divisor stays far from it. */
static float *values(uint64_t seed, int64_t n)
{
    dp_rng rng;
    dp_rng_init(&rng, seed, 0);
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        float u = 0.5f + dp_rng_uniform(&rng);
        v[i] = dp_rng_uniform(&rng) < 0.3f ? -u : u;
    }
    return v;
}

static void add_inputs(gc_problem *g, const bin_case *c, uint64_t seed)
{
    g->in[g->nin++] =
        input("a", c->a.ndim, c->a.shape, values(seed, count(c->a.ndim, c->a.shape)), true);
    g->in[g->nin++] =
        input("b", c->b.ndim, c->b.shape, values(seed + 1, count(c->b.ndim, c->b.shape)), true);
    int64_t ca = c->a.ndim == 4 ? c->a.shape[1] : 1, cb = c->b.ndim == 4 ? c->b.shape[1] : 1;
    int64_t wa[4] = {ca, ca, 1, 1}, wb[4] = {cb, cb, 1, 1};
    g->in[g->nin++] = input("ida", 4, wa, identity_1x1(ca), false);
    g->in[g->nin++] = input("idb", 4, wb, identity_1x1(cb), false);
}

static void test_values(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++) {
        const bin_case *c = &cases[k];
        const operand *f = full_of(c);
        int64_t n = count(f->ndim, f->shape);
        for (int op = 0; op < 4; op++) {
            gc_problem g = {0};
            add_inputs(&g, c, 3 + 10 * k);
            dp_tensor_t *in[4];
            for (int i = 0; i < 4; i++)
                in[i] = upload(g.in[i].ndim, g.in[i].shape, g.in[i].v);
            ctx x = {c, (dp_binary_op)op};
            dp_tape_t *tape;
            OK(dp_tape_init(&tape, false));
            dp_tape_begin(tape);
            dp_tensor_t *y;
            OK(build(&y, in, &x));
            assert_int_equal(dp_tensor_numel(y), n);
            float *got = download(y);
            dp_tape_end(tape);
            dp_tape_close(tape);
            double *want = malloc((size_t)n * sizeof *want);
            for (int64_t i = 0; i < n; i++)
                want[i] = apply((dp_binary_op)op, g.in[0].v[bcast_index(&c->a, f, i)],
                                g.in[1].v[bcast_index(&c->b, f, i)]);
            char what[96];
            snprintf(what, sizeof what, "%s %s", c->name, op_names[op]);
            assert_values(what, got, want, n, 1.2e-7, 0);
            for (int i = 0; i < 4; i++) {
                dp_tensor_free(in[i]);
                free(g.in[i].v);
            }
            free(got), free(want);
        }
        printf("%-30s add, sub, mul, div: values as numpy broadcasts them\n", c->name);
    }
}

static void test_gradients(void **state)
{
    (void)state;
    for (size_t k = 0; k < COUNTOF(cases); k++)
        for (int op = 0; op < 4; op++) {
            char name[96];
            snprintf(name, sizeof name, "%s %s", cases[k].name, op_names[op]);
            ctx x = {&cases[k], (dp_binary_op)op};
            gc_problem g = {.name = name, .build = build, .ctx = &x, .eps = 1e-2};
            add_inputs(&g, &cases[k], 50 + 10 * k);
            gc_run(&g);
        }
}

/* Broadcasts over other axes than the channels are refused. */
static void test_other_shapes_refused(void **state)
{
    (void)state;
    static const operand pairs[][2] = {
        {{4, {2, 3, 4, 5}, false}, {1, {5}, false}},          /* along W */
        {{4, {2, 3, 4, 5}, false}, {4, {2, 1, 4, 5}, false}}, /* along C */
        {{4, {2, 3, 4, 5}, false}, {4, {1, 3, 4, 1}, false}},
        {{4, {2, 1, 4, 5}, false}, {4, {1, 3, 1, 1}, false}}, /* both ways */
        {{2, {5, 7}, false}, {2, {5, 1}, false}},
    };
    for (size_t i = 0; i < COUNTOF(pairs); i++) {
        float *va = calloc((size_t)count(pairs[i][0].ndim, pairs[i][0].shape), sizeof(float));
        float *vb = calloc((size_t)count(pairs[i][1].ndim, pairs[i][1].shape), sizeof(float));
        dp_tensor_t *a = upload(pairs[i][0].ndim, pairs[i][0].shape, va);
        dp_tensor_t *b = upload(pairs[i][1].ndim, pairs[i][1].shape, vb), *y;
        assert_int_equal(dp_binary(&y, DP_BINARY_MUL, a, b), DP_ESHAPE);
        tu_assert_error_mentions("broadcasting is supported over channels");
        dp_tensor_free(a), dp_tensor_free(b);
        free(va), free(vb);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_other_shapes_refused),
    };
    return tu_run(argc, argv, tests, gc_open_device, gc_close_device);
}

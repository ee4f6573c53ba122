/* nn.GELU's sub-graphs as torch.onnx.export (1.13) writes them, made here
 * with protobuf-c (onnxutil.c) node for node: Div by sqrt 2 -> Erf -> Add
 * 1 -> Mul x -> Mul 0.5, and the tanh approximation's nine nodes, with
 * the constants as Constant nodes or as initializers and the products in
 * either order. Each loads as one GELU: the same values as dp_activation's
 * GELU kinds on the same x, gradients against finite differences. A
 * sub-graph that differs (a constant 0.6, an inner value also a graph
 * output) is not fused, and its Erf is refused naming the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t xs[4] = {2, 3, 4, 5};

/* A scalar constant `name`: a Constant node, or an initializer. */
static void scalar(ou_model *m, const char *name, float v, bool as_init)
{
    if (as_init)
        ou_init(m, name, 0, NULL, &v);
    else
        ou_constant(m, name, 0, NULL, &v);
}

/* x -> GELU (exact) -> y, as torch writes it; `half` the last constant. */
static void exact_graph(ou_model *m, bool as_init, float half, bool extra_output)
{
    ou_begin(m, 13);
    ou_input(m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    scalar(m, "c_sqrt2", 1.4142135381698608f, as_init);
    ou_node(m, "Div", "/1/Div", "x,c_sqrt2", "d");
    ou_node(m, "Erf", "/1/Erf", "d", "e");
    scalar(m, "c_one", 1.0f, as_init);
    ou_node(m, "Add", "/1/Add", as_init ? "c_one,e" : "e,c_one", "a");
    ou_node(m, "Mul", "/1/Mul", "x,a", "p");
    scalar(m, "c_half", half, as_init);
    ou_node(m, "Mul", "/1/Mul_1", "p,c_half", "y");
    ou_output(m, "y");
    if (extra_output)
        ou_output(m, "e");
}

static void tanh_graph(ou_model *m, bool as_init)
{
    ou_begin(m, 13);
    ou_input(m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    ou_node(m, "Mul", "/1/Mul", "x,x", "sq");
    ou_node(m, "Mul", "/1/Mul_1", "x,sq", "cube");
    scalar(m, "c_k", 0.044714998453855515f, as_init);
    ou_node(m, "Mul", "/1/Mul_2", "c_k,cube", "kc");
    ou_node(m, "Add", "/1/Add", "x,kc", "s");
    scalar(m, "c_r", 0.7978845834732056f, as_init);
    ou_node(m, "Mul", "/1/Mul_3", "c_r,s", "b");
    ou_node(m, "Tanh", "/1/Tanh", "b", "t");
    scalar(m, "c_one", 1.0f, as_init);
    ou_node(m, "Add", "/1/Add_1", "c_one,t", "o");
    ou_node(m, "Mul", "/1/Mul_4", "x,o", "p");
    scalar(m, "c_half", 0.5f, as_init);
    ou_node(m, "Mul", "/1/Mul_5", "c_half,p", "y");
    ou_output(m, "y");
}

static void check(ou_model *m, const char *name, dp_activation_kind kind)
{
    dp__onnx_graph *g = ou_load(m, name);
    assert_int_equal(g->nparams, 0);
    int64_t n = count(4, xs);
    float *xv = malloc((size_t)n * sizeof *xv);
    ou_fill(9, xv, n, 3.0f, 0.0f);
    dp_tensor_t *x = upload(4, xs, xv), *y;
    int64_t ny;
    float *got = ou_run(g, gc_dev, &x, &ny, NULL, NULL);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    OK(dp_activation(&y, x, kind, 0, 0));
    float *want = download(y);
    /* and against the formula itself, in double */
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = xv[i];
        double f = kind == DP_ACT_GELU
                       ? 0.5 * v * (1 + erf(v / sqrt(2.0)))
                       : 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        worst = tu_worst_diff(worst, got[i], f, name, i);
    }
    double d = tu_max_diff(name, got, want, n);
    printf("%-40s %lld values: difference from dp_activation %g, from the formula %.3g\n", name,
           (long long)n, d, worst);
    assert_int_equal(ny, n);
    assert_true(d == 0.0);
    assert_true(worst <= 1e-5);
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    ou_gradcheck(g, name, 4, xs, 19, false);
    free(got), free(want), free(xv);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

static void test_gelu_subgraphs(void **state)
{
    (void)state;
    ou_model m;
    exact_graph(&m, false, 0.5f, false);
    check(&m, "GELU (Erf), Constant nodes", DP_ACT_GELU);
    exact_graph(&m, true, 0.5f, false);
    check(&m, "GELU (Erf), initializers", DP_ACT_GELU);
    tanh_graph(&m, false);
    check(&m, "GELU (tanh), Constant nodes", DP_ACT_GELU_TANH);
    tanh_graph(&m, true);
    check(&m, "GELU (tanh), initializers", DP_ACT_GELU_TANH);
}

static void test_gelu_not_fused(void **state)
{
    (void)state;
    ou_model m;
    exact_graph(&m, false, 0.6f, false);
    ou_refused(&m, "half.onnx", WORDS("node '/1/Erf' (Erf)", "not supported"));
    exact_graph(&m, false, 0.5f, true);
    ou_refused(&m, "read.onnx", WORDS("node '/1/Erf' (Erf)", "not supported"));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gelu_subgraphs, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_gelu_not_fused, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

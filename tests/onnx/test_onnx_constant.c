/* Arithmetic with a constant operand, as torch.onnx.export writes x * 0.5
 * or 1 + x (a Constant node of one number feeding Add, Sub, Mul or Div):
 * the loader runs each as alpha x + beta (dp_activation's DP_ACT_LINEAR).
 * A chain of all four, with the constant on either side, gives the
 * formula's values computed in double and its gradient agrees with finite
 * differences; a constant divided by a tensor and a constant of several
 * values are refused in one line naming the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t XS[4] = {2, 3, 4, 5};

static void scalar(ou_model *m, const char *out, float v)
{
    ou_constant(m, out, 0, NULL, &v);
}

/* y = (3 - (1.5 + x * 0.5)) / 4 - 0.25: Mul (x, c), Add (c, t), Sub (c, t),
 * Div (t, c), Sub (t, c). */
static void chain(ou_model *m)
{
    ou_begin(m, 13);
    int64_t in[4] = {-1, 3, 4, 5};
    ou_input(m, "x", 4, in);
    scalar(m, "half", 0.5f);
    scalar(m, "one_half", 1.5f);
    scalar(m, "three", 3.0f);
    scalar(m, "four", 4.0f);
    scalar(m, "quarter", 0.25f);
    ou_node(m, "Mul", "/Mul", "x,half", "t1");
    ou_node(m, "Add", "/Add", "one_half,t1", "t2");
    ou_node(m, "Sub", "/Sub", "three,t2", "t3");
    ou_node(m, "Div", "/Div", "t3,four", "t4");
    ou_node(m, "Sub", "/Sub_1", "t4,quarter", "y");
    ou_output(m, "y");
}

static void test_constant_chain(void **state)
{
    (void)state;
    ou_model m;
    chain(&m);
    dp__onnx_graph *g = ou_load(&m, "constants.onnx");
    assert_int_equal(g->nparams, 0);
    int64_t nx = count(4, XS);
    float *xv = malloc((size_t)nx * sizeof *xv);
    ou_fill(3, xv, nx, 4.0f, 0.0f);
    dp_tensor_t *x = upload(4, XS, xv);
    int64_t n, shape[4];
    float *got = ou_run(g, gc_dev, &x, &n, shape, NULL);
    assert_int_equal(n, nx);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = (3.0 - (1.5 + (double)xv[i] * 0.5)) / 4.0 - 0.25;
        worst = tu_worst_diff(worst, got[i], want, "outputs", i);
    }
    printf("(3 - (1.5 + x * 0.5)) / 4 - 0.25 on %lld values: largest difference from the "
           "formula %.2g\n",
           (long long)n, worst);
    assert_true(worst <= 1e-6);
    ou_gradcheck(g, "constants.onnx", 4, XS, 17, false);
    free(got), free(xv);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

/* m's graph on x of XS's shape must fail to run with `error`. */
static void refused_when_run(ou_model *m, const char *error)
{
    dp__onnx_graph *g = ou_load(m, "refused.onnx");
    float *xv = calloc((size_t)count(4, XS), sizeof *xv);
    dp_tensor_t *x = upload(4, XS, xv);
    ou_run(g, gc_dev, &x, NULL, NULL, error);
    free(xv);
    dp_tensor_free(x);
    dp__onnx_graph_free(g);
}

/* A graph of one node `op` on (first, second), the constant of n values. */
static void refused_at_run(const char *op, bool constant_first, int nvalues, const char *error)
{
    ou_model m;
    ou_begin(&m, 13);
    int64_t in[4] = {-1, 3, 4, 5};
    ou_input(&m, "x", 4, in);
    float v[3] = {2.0f, 3.0f, 4.0f};
    int64_t dims[1] = {nvalues};
    ou_constant(&m, "c", 1, dims, v);
    ou_node(&m, op, "/layer/Op", constant_first ? "c,x" : "x,c", "y");
    ou_output(&m, "y");
    refused_when_run(&m, error);
}

static void test_constant_refusals(void **state)
{
    (void)state;
    refused_at_run("Div", true, 1,
                   "node '/layer/Op' (Div): divides a constant by a tensor, which dptrain does "
                   "not compute");
    refused_at_run("Mul", false, 3,
                   "node '/layer/Op' (Mul): input 1 is a constant of 3 float values; dptrain "
                   "takes a constant operand of one float");
}

/* Shape values are int64 and folded exactly: 2^53 + 1 (a double holds 53
 * bits) gathered from a Constant and used as an index is named as it is;
 * a float cast to int64 must be one. */
static void test_shape_values_exact(void **state)
{
    (void)state;
    ou_model m;
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    ou_constant_i64(&m, "big", 2, (const int64_t[]){((int64_t)1 << 53) + 1, 3});
    ou_constant_i64(&m, "zero", 1, (const int64_t[]){0});
    ou_node(&m, "Gather", "/g1", "big,zero", "k");
    ou_node(&m, "Shape", "/s", "x", "s");
    ou_node(&m, "Gather", "/g2", "s,k", "d");
    ou_node(&m, "Reshape", "/r", "x,d", "y");
    ou_output(&m, "y");
    refused_when_run(&m, "node '/g2' (Gather): index 9007199254740993 is out of [0, 4)");
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    ou_constant(&m, "huge", 1, (const int64_t[]){1}, (const float[]){1e30f});
    Onnx__NodeProto *cast = ou_node(&m, "Cast", "/c", "huge", "d");
    ou_attr_int(&m, cast, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    ou_node(&m, "Reshape", "/r", "x,d", "y");
    ou_output(&m, "y");
    refused_when_run(&m, "node '/c' (Cast): the value 1e+30 at 0 is no 64-bit integer");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_constant_chain, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_constant_refusals, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_shape_values_exact, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

/* The ONNX operators that work element by element, each in a graph
 * written with protobuf-c (onnxutil.c) and run through the loader: Clip
 * with constant bounds as inputs (opset 11 on) or attributes (before),
 * either left out, gives the clamp computed here, its gradient agrees
 * with finite differences, and bounds the loader cannot read on the host
 * or that cross are refused in one line naming the node. */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx/onnx_model.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t xs4[4] = {2, 3, 4, 5};

/* x (2, 3, 4, 5) in [-8, 8], on gc_dev; its values in *v (malloc'd). */
static dp_tensor_t *input_x(float **v)
{
    *v = malloc(120 * sizeof **v);
    ou_fill(21, *v, 120, 8.0f, 0.0f);
    return upload(4, xs4, *v);
}

/* x -> Clip -> y: bounds as Constant inputs (opset 11 on: NAN leaves one
 * out) or as attributes (opset 6). */
static void clip_graph(ou_model *m, int opset, float lo, float hi)
{
    ou_begin(m, opset);
    ou_input(m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    Onnx__NodeProto *n;
    if (opset >= 11) {
        if (!isnan(lo))
            ou_constant(m, "lo", 0, NULL, &lo);
        if (!isnan(hi))
            ou_constant(m, "hi", 0, NULL, &hi);
        n = ou_node(m, "Clip", "/act/Clip",
                    isnan(lo)   ? "x,,hi"
                    : isnan(hi) ? "x,lo"
                                : "x,lo,hi",
                    "y");
    } else {
        n = ou_node(m, "Clip", "/act/Clip", "x", "y");
        if (!isnan(lo))
            ou_attr_float(m, n, "min", lo);
        if (!isnan(hi))
            ou_attr_float(m, n, "max", hi);
    }
    ou_output(m, "y");
}

/* Clip as ReLU6 (0, 6), with other bounds, with one of them left out, at
 * opset 13 and at opset 6: the clamp, exactly; and its gradient. */
static void test_clip(void **state)
{
    (void)state;
    static const struct {
        int opset;
        float lo, hi;
    } cases[] = {{13, 0.0f, 6.0f}, {11, -0.5f, 0.25f}, {13, NAN, 1.5f},
                 {13, -2.0f, NAN}, {6, -1.0f, 3.0f},   {6, NAN, NAN}};
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        ou_model m;
        clip_graph(&m, cases[i].opset, cases[i].lo, cases[i].hi);
        char name[64];
        snprintf(name, sizeof name, "Clip(%g, %g) opset %d", (double)cases[i].lo,
                 (double)cases[i].hi, cases[i].opset);
        dp__onnx_graph *g = ou_load(&m, name);
        float *xv;
        dp_tensor_t *x = input_x(&xv);
        int64_t n;
        float *y = ou_run(g, gc_dev, &x, &n, NULL, NULL);
        assert_int_equal(n, 120);
        float lo = isnan(cases[i].lo) ? -FLT_MAX : cases[i].lo;
        float hi = isnan(cases[i].hi) ? FLT_MAX : cases[i].hi;
        int clamped = 0;
        for (int k = 0; k < 120; k++) {
            float want = fminf(fmaxf(xv[k], lo), hi);
            clamped += want != xv[k];
            if (y[k] != want)
                fail_msg("%s: y[%d] = %g, clamp(%g) = %g", name, k, (double)y[k], (double)xv[k],
                         (double)want);
        }
        printf("%-28s 120 values equal to the clamp, %d of them clamped\n", name, clamped);
        if (!isnan(cases[i].lo) || !isnan(cases[i].hi))
            assert_true(clamped > 0);
        ou_gradcheck(g, name, 4, xs4, 3 + i, true);
        free(xv);
        free(y);
        dp_tensor_free(x);
        dp__onnx_graph_free(g);
    }
}

/* Bounds that cross are refused when they are read; bounds computed on
 * the device, at load. */
static void test_clip_refusals(void **state)
{
    (void)state;
    ou_model m;
    clip_graph(&m, 13, 1.0f, 0.0f);
    dp__onnx_graph *g = ou_load(&m, "crossed.onnx");
    float *xv;
    dp_tensor_t *x = input_x(&xv);
    ou_run(g, gc_dev, &x, NULL, NULL, "node '/act/Clip' (Clip): min 1 is above max 0");
    dp__onnx_graph_free(g);
    ou_begin(&m, 13);
    ou_input(&m, "x", 4, (const int64_t[]){-1, 3, 4, 5});
    ou_node(&m, "Relu", "r", "x", "lo");
    ou_node(&m, "Clip", "/act/Clip", "x,lo", "y");
    ou_output(&m, "y");
    ou_refused(&m, "device.onnx",
               WORDS("node '/act/Clip' (Clip)", "input 1 ('lo') is computed on the device"));
    free(xv);
    dp_tensor_free(x);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clip, gc_open_device, gc_close_device),
        cmocka_unit_test_setup_teardown(test_clip_refusals, gc_open_device, gc_close_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}

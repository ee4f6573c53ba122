/* The ONNX operators that work element by element (onnx_ops.h): the
 * activations, each dp_relu, dp_sigmoid, dp_tanh, dp_leaky_relu or one
 * kind of dp_activation with ONNX's attributes and defaults (Clip is the
 * clamp to its constant bounds, ReLU6 when they are 0 and 6), and
 * Dropout. */
#include "onnx/onnx_ops.h"

#include "core/internal.h"

#include <float.h>
#include <string.h>

int dp__onnx_run_relu(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_relu(&y, dp__onnx_in_t(r, n, 0)));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_run_sigmoid(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_sigmoid(&y, dp__onnx_in_t(r, n, 0)));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_run_tanh(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_tanh(&y, dp__onnx_in_t(r, n, 0)));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_prep_leaky(const dp__onnx_graph *g, dp__onnx_node *n)
{
    return dp__onnx_finite_attr(g, n, "alpha", 0.01f, &n->a);
}

int dp__onnx_run_leaky(dp__onnx_run *r, const dp__onnx_node *n)
{
    dp_tensor_t *y;
    DP_TRY(dp_leaky_relu(&y, dp__onnx_in_t(r, n, 0), n->a));
    return dp__onnx_put(r, n, 0, y);
}

/* The activations of dp_activation, with ONNX's attributes and defaults. */
int dp__onnx_prep_act(const dp__onnx_graph *g, dp__onnx_node *n)
{
    const char *t = n->proto->op_type;
    if (strcmp(t, "Elu") == 0) {
        n->kind = DP_ACT_ELU;
        DP_TRY(dp__onnx_finite_attr(g, n, "alpha", 1.0f, &n->a));
    } else if (strcmp(t, "Selu") == 0) {
        n->kind = DP_ACT_SELU;
        DP_TRY(dp__onnx_finite_attr(g, n, "alpha", 1.67326319217681884765625f, &n->a));
        DP_TRY(dp__onnx_finite_attr(g, n, "gamma", 1.05070102214813232421875f, &n->b));
    } else if (strcmp(t, "HardSigmoid") == 0) {
        n->kind = DP_ACT_HARDSIGMOID;
        DP_TRY(dp__onnx_finite_attr(g, n, "alpha", 0.2f, &n->a));
        DP_TRY(dp__onnx_finite_attr(g, n, "beta", 0.5f, &n->b));
    } else if (strcmp(t, "HardSwish") == 0) {
        n->kind = DP_ACT_HARDSWISH;
    } else { /* Clip: bounds as attributes before opset 11, inputs since */
        n->kind = DP_ACT_HARDTANH;
        n->a = g->opset < 11 ? dp__onnx_attr_float(n, "min", -FLT_MAX) : -FLT_MAX;
        n->b = g->opset < 11 ? dp__onnx_attr_float(n, "max", FLT_MAX) : FLT_MAX;
    }
    return 0;
}

int dp__onnx_run_act(dp__onnx_run *r, const dp__onnx_node *n)
{
    float a = n->a, b = n->b;
    if (n->kind == DP_ACT_HARDTANH) {
        if (r->g->opset >= 11) {
            DP_TRY(dp__onnx_scalar_input(r, n, 1, n->a, &a));
            DP_TRY(dp__onnx_scalar_input(r, n, 2, n->b, &b));
        }
        /* ONNX gives max everywhere then; the clamp would give min. */
        if (!(a <= b))
            return dp__onnx_node_error(r->g, n, "min %g is above max %g", (double)a, (double)b);
    }
    dp_tensor_t *y;
    DP_TRY(dp_activation(&y, dp__onnx_in_t(r, n, 0), (dp_activation_kind)n->kind, a, b));
    return dp__onnx_put(r, n, 0, y);
}

int dp__onnx_prep_dropout(const dp__onnx_graph *g, dp__onnx_node *n)
{
    n->a = g->opset < 12 ? dp__onnx_attr_float(n, "ratio", 0.5f) : 0.5f;
    if (!(n->a >= 0.0f && n->a <= 1.0f))
        return dp__onnx_node_error(g, n, "ratio %g is outside [0, 1]", (double)n->a);
    return dp__onnx_unused_output(g, n, 1, "mask");
}

int dp__onnx_run_dropout(dp__onnx_run *r, const dp__onnx_node *n)
{
    float ratio = n->a;
    if (r->g->opset >= 12)
        DP_TRY(dp__onnx_scalar_input(r, n, 1, n->a, &ratio));
    dp_dropout_params p = {.prob = ratio, .training = r->train, .layer = (uint32_t)n->layer};
    if (r->m)
        dp_model_dropout_params(r->m, n->layer, ratio, r->train, &p);
    dp_tensor_t *y;
    DP_TRY(dp_dropout(&y, dp__onnx_in_t(r, n, 0), &p));
    return dp__onnx_put(r, n, 0, y);
}

/* linear: y (N, D_out) = x (N, D_in) w + b (D_out), with w stored either as
 * nn.Linear does, (D_out, D_in) used transposed, or as the seed's torch.mm,
 * (D_in, D_out). Backward: dx written (=); dw, db accumulated into the
 * parameters' gradients.
 * Under bf16 precision the products take bf16 operands (x may be bf16; w
 * and the f32 dy are rounded) and sum in f32; y and dw stay f32, dx has
 * x's dtype (dp/ops.h). */
#include "ops/nodes.h"

/* dw and db of the batch's rows [row0, row0 + count). */
typedef struct weights_block {
    dp_device_t *dev;
    const dp_tensor_t *x, *dy;
    int64_t Din, Dout;
    int out_in;
    dp_precision precision;
    bool bias;
} weights_block;

static int weights_of_rows(void *ctx, int64_t row0, int64_t count, dp_tensor_t *const *out)
{
    const weights_block *wb = ctx;
    const char *x =
        (const char *)wb->x->data + (size_t)(row0 * wb->Din) * dp_dtype_size(wb->x->dtype);
    const float *dy = (const float *)wb->dy->data + row0 * wb->Dout;
    dp__gemm_args g = {.trans_a = true,
                       .alpha = 1.0f,
                       .beta = 0.0f,
                       .k = count,
                       .c = out[0]->data,
                       .precision = wb->precision};
    if (wb->out_in) { /* dw (Dout, Din) = dy^T x */
        g.m = wb->Dout, g.n = wb->Din, g.a = dy, g.lda = wb->Dout, g.b = x, g.ldb = wb->Din;
        g.b_dtype = wb->x->dtype;
    } else { /* dw (Din, Dout) = x^T dy */
        g.m = wb->Din, g.n = wb->Dout, g.a = x, g.lda = wb->Din, g.b = dy, g.ldb = wb->Dout;
        g.a_dtype = wb->x->dtype;
    }
    g.ldc = g.n;
    DP_TRY(wb->dev->ops->gemm(wb->dev, &g));
    if (!wb->bias)
        return 0;
    dp__bias_args a = {.dy = dy, .b = out[1]->data, .rows = count, .cols = wb->Dout};
    return wb->dev->ops->bias_grad(wb->dev, &a);
}

static int linear_backward(dp__node *node)
{
    const dp__linear_node *ln = (const dp__linear_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *w = node->inputs[1], *b = node->inputs[2];
    dp_tensor_t *dy = node->output->ag->grad;
    dp_device_t *dev = x->dev;
    int64_t N = x->shape[0], Din = x->shape[1], Dout = node->output->shape[1];
    int out_in = ln->layout == DP_WEIGHT_OUT_IN;
    dp_tensor_t *dx;

    /* dw's and db's sums over the batch, block by block when the sums are
     * split-invariant */
    weights_block wb = {dev, x, dy, Din, Dout, out_in, ln->precision, b != NULL};
    DP_TRY(dp__weight_grad_sums(dev, N, w, b, weights_of_rows, &wb));
    DP_TRY(dp__grad_begin(x, &dx));
    if (dx) { /* dx (N, Din) = dy w^T (in-out) or dy w (out-in) */
        dp__gemm_args g = {.trans_b = !out_in,
                           .m = N,
                           .n = Din,
                           .k = Dout,
                           .alpha = 1.0f,
                           .beta = 0.0f,
                           .a = dy->data,
                           .lda = Dout,
                           .b = w->data,
                           .ldb = out_in ? Din : Dout,
                           .c = dx->data,
                           .ldc = Din,
                           .c_dtype = dx->dtype,
                           .precision = ln->precision};
        DP_TRY(dp__gemm_rows(dev, &g));
        DP_TRY(dp__grad_end(x, dx));
    }
    return 0;
}

int dp_linear(dp_tensor_t **out, dp_tensor_t *x, dp_tensor_t *w, dp_tensor_t *b,
              dp_weight_layout layout)
{
    const char *op = dp__op_name(DP__OP_linear);
    char xs[64], ws[64];
    DP_TRY(dp__check_weight_args(op, x, w, b, 2));
    dp_tensor_t *ts[] = {x, w, b};
    dp_precision prec = dp_get_precision();
    DP_TRY(dp__precision_check(op, x->dev, prec));
    if (prec == DP_PRECISION_FP32) {
        DP_TRY(dp__as_f32(&x));
        ts[0] = x;
    }
    int out_in = layout == DP_WEIGHT_OUT_IN;
    int64_t N = x->shape[0], Din = x->shape[1];
    int64_t w_in = out_in ? w->shape[1] : w->shape[0];
    int64_t Dout = out_in ? w->shape[0] : w->shape[1];
    if (w_in != Din || (b && b->shape[0] != Dout)) {
        DP_ERROR("%s: input %s does not fit weight %s", op, dp_tensor_shape_str(x, xs, sizeof xs),
                 dp_tensor_shape_str(w, ws, sizeof ws));
        return DP_ESHAPE;
    }
    int64_t shape[2] = {N, Dout};
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, x->dev, DP_F32, 2, shape, 0));
    dp__gemm_args g = {.trans_b = out_in,
                       .m = N,
                       .n = Dout,
                       .k = Din,
                       .alpha = 1.0f,
                       .beta = 0.0f,
                       .a = x->data,
                       .lda = Din,
                       .b = w->data,
                       .ldb = out_in ? Din : Dout,
                       .c = y->data,
                       .ldc = Dout,
                       .a_dtype = x->dtype,
                       .precision = prec};
    DP_TRY(dp__gemm_rows(x->dev, &g));
    if (b) {
        dp__bias_args a = {.y = y->data, .b = b->data, .rows = N, .cols = Dout};
        DP_TRY(x->dev->ops->bias_add(x->dev, &a));
    }
    dp__tensor_written(y);
    if (dp__tape_needs_grad(ts, 3)) {
        dp__linear_node ln = {layout, prec};
        DP_TRY(dp__tape_record(DP__OP_linear, linear_backward, ts, 3, y, &ln, sizeof ln));
    }
    *out = y;
    return 0;
}

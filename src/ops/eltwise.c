/* Elementwise ops, any shape: relu (y = max(x, 0)), sigmoid
 * (y = 1 / (1 + exp(-x))), tanh and add (z = a + b). Outputs keep the
 * input's layout and dtype (f32 or bf16; add of an f32 and a bf16 tensor
 * is f32, as PyTorch promotes); backward writes (=) each input's share.
 * Sigmoid and tanh differentiate from their saved output:
 * dx = dy y (1 - y), dy (1 - y^2). */
#include "ops/op.h"

typedef struct activation_node {
    dp__eltwise_op backward_op;
} activation_node;

static int activation_backward(dp__node *node)
{
    const activation_node *an = (const activation_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *y = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__eltwise_args a = {.op = an->backward_op,
                          .a = y->ag->grad->data,
                          .b = y->data,
                          .out = dx->data,
                          .n = dp__numel(y->ndim, y->shape),
                          .dtype = y->dtype};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    return dp__grad_end(x, dx);
}

/* y = f(x) for a function whose gradient follows from y alone (relu's
 * too: y > 0 exactly where x > 0). */
static int activation(dp_tensor_t **out, dp_tensor_t *x, dp__op id, dp__eltwise_op forward,
                      dp__eltwise_op backward)
{
    const char *op = dp__op_name(id);
    DP_TRY(dp__check_rank(op, "input", x, -1));
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc_like(&y, x));
    dp__eltwise_args a = {.op = forward,
                          .a = x->data,
                          .out = y->data,
                          .n = dp__numel(x->ndim, x->shape),
                          .dtype = x->dtype};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(&x, 1)) {
        activation_node an = {backward};
        DP_TRY(dp__tape_record(id, activation_backward, &x, 1, y, &an, sizeof an));
    }
    *out = y;
    return 0;
}

int dp_relu(dp_tensor_t **y, dp_tensor_t *x)
{
    return activation(y, x, DP__OP_relu, DP__ELT_RELU, DP__ELT_RELU_BACKWARD);
}

int dp_sigmoid(dp_tensor_t **y, dp_tensor_t *x)
{
    return activation(y, x, DP__OP_sigmoid, DP__ELT_SIGMOID, DP__ELT_SIGMOID_BACKWARD);
}

int dp_tanh(dp_tensor_t **y, dp_tensor_t *x)
{
    return activation(y, x, DP__OP_tanh, DP__ELT_TANH, DP__ELT_TANH_BACKWARD);
}

/* Copies g into the gradient of x (same layout by construction). */
static int pass_gradient(dp_tensor_t *x, dp_tensor_t *g)
{
    dp_tensor_t *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    dp__eltwise_args a = {.op = DP__ELT_COPY,
                          .a = g->data,
                          .out = dx->data,
                          .n = dp__numel(x->ndim, x->shape),
                          .dtype = x->dtype};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    return dp__grad_end(x, dx);
}

/* Both inputs get z's gradient: b a copy, then a the buffer itself when it
 * can take it (nothing reads z's gradient after this node), else a copy. */
static int add_backward(dp__node *node)
{
    dp_tensor_t *g = node->output->ag->grad;
    DP_TRY(pass_gradient(node->inputs[1], g));
    if (dp__grad_adopt(node->inputs[0], g))
        return 0;
    return pass_gradient(node->inputs[0], g);
}

static int add_same_layout(dp_tensor_t **out, dp_tensor_t *a, dp_tensor_t *b, bool relu);

/* dp_add and dp_add_relu: the checks, then both operands in one layout and
 * one dtype for add_same_layout. */
static int add(dp_tensor_t **out, dp_tensor_t *a, dp_tensor_t *b, bool relu)
{
    const char *op = dp__op_name(DP__OP_add);
    char as[64], bs[64];
    DP_TRY(dp__check_rank(op, "a", a, -1));
    DP_TRY(dp__check_rank(op, "b", b, a->ndim));
    dp_tensor_t *ts[] = {a, b};
    DP_TRY(dp__check_same_device(op, ts, 2));
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] != b->shape[i]) {
            DP_ERROR("add: shapes %s and %s differ", dp_tensor_shape_str(a, as, sizeof as),
                     dp_tensor_shape_str(b, bs, sizeof bs));
            return DP_ESHAPE;
        }
    }
    /* A convolution's output (stored NHWC) and a tensor in logical order
     * (a residual conv(x) + x) meet in logical order: the NHWC one through
     * dp_reshape (recorded, its backward puts the gradient back in NHWC). */
    dp_tensor_t *given_a = a, *given_b = b;
    if (a->nhwc != b->nhwc) {
        dp_tensor_t **nhwc = a->nhwc ? &a : &b;
        DP_TRY(dp_reshape(nhwc, *nhwc, (*nhwc)->ndim, (*nhwc)->shape));
    }
    int rc = 0;
    if (a->dtype != b->dtype) { /* PyTorch's promotion: the sum is f32 */
        dp_tensor_t *a16 = a, *b16 = b;
        rc = dp__as_f32(&a);
        if (rc == 0)
            rc = dp__as_f32(&b);
        /* A logical copy cast is the cast's input only (enqueued already). */
        if (a != a16)
            dp__op_temp_free(a16, given_a);
        if (b != b16)
            dp__op_temp_free(b16, given_b);
    }
    if (rc == 0)
        rc = add_same_layout(out, a, b, relu);
    /* The logical copies belong to the caller where no tape owns them. */
    dp__op_temp_free(a, given_a);
    dp__op_temp_free(b, given_b);
    return rc;
}

/* z = a + b; with relu, y = max(a + b, 0) in the same sweep, recorded as
 * dp_add then dp_relu would record it (the same rows in dp_model_summary,
 * the same backward). z is then a view of y's memory: its own values are
 * never read again (add's backward needs none, relu's reads y). */
static int add_same_layout(dp_tensor_t **out, dp_tensor_t *a, dp_tensor_t *b, bool relu)
{
    dp_tensor_t *ts[] = {a, b};
    dp_tensor_t *y, *z = NULL;
    DP_TRY(dp__tape_alloc_like(&y, a));
    dp__eltwise_args e = {.op = relu ? DP__ELT_ADD_RELU : DP__ELT_ADD,
                          .a = a->data,
                          .b = b->data,
                          .out = y->data,
                          .n = dp__numel(a->ndim, a->shape),
                          .dtype = a->dtype};
    DP_TRY(a->dev->ops->eltwise(a->dev, &e));
    dp__tensor_written(y);
    if (dp__tape_needs_grad(ts, 2)) {
        if (relu)
            DP_TRY(dp__tape_view(&z, y));
        DP_TRY(dp__tape_record(DP__OP_add, add_backward, ts, 2, relu ? z : y, NULL, 0));
        if (relu) {
            activation_node an = {DP__ELT_RELU_BACKWARD};
            DP_TRY(dp__tape_record(DP__OP_relu, activation_backward, &z, 1, y, &an, sizeof an));
        }
    }
    *out = y;
    return 0;
}

int dp_add(dp_tensor_t **out, dp_tensor_t *a, dp_tensor_t *b)
{
    return add(out, a, b, false);
}

int dp_add_relu(dp_tensor_t **out, dp_tensor_t *a, dp_tensor_t *b)
{
    return add(out, a, b, true);
}

int dp_accumulate(dp_tensor_t *dst, dp_tensor_t *src)
{
    if (dp__numel(dst->ndim, dst->shape) != dp__numel(src->ndim, src->shape) ||
        dst->dev != src->dev || dst->dtype != DP_F32 || src->dtype != DP_F32) {
        DP_ERROR("accumulate: tensors differ in size, type or device");
        return DP_EINVAL;
    }
    dp__eltwise_args e = {.op = DP__ELT_ACCUMULATE,
                          .a = src->data,
                          .out = dst->data,
                          .n = dp__numel(dst->ndim, dst->shape)};
    DP_TRY(dst->dev->ops->eltwise(dst->dev, &e));
    dp__tensor_written(dst);
    return 0;
}

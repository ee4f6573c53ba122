/* The transposed convolution on a GPU: the passes of the convolution whose
 * transpose it is (conv2d.c, cuDNN), with the roles of input and output
 * swapped, and the bias on our kernels (eltwise.cu):
 *   forward          y = cudnnConvolutionBackwardData of x as the
 *                    convolution's output gradient, then y += b
 *   backward_data    dx = the convolution's forward of dy
 *   backward_weights dw = the convolution's weight gradient of (dy as its
 *                    input, x as its output gradient); db = sum dy
 * kernels.h's dp__conv2d_args gives the geometry both ways. */
#include "device/cuda/cuda.h"

/* The convolution's arguments from the transposed one's: its input is
 * the transposed output's side (y, or dy), its output gradient x. */
static dp__conv2d_args as_conv(const dp__conv2d_args *a)
{
    dp__conv2d_args c = *a;
    c.precision = DP_PRECISION_FP32;
    c.fuse_relu = false;
    c.b = c.db = (dp__tdesc){0};
    return c;
}

int dp__cuda_conv_transpose2d_forward(dp_device_t *dev, const dp__conv2d_args *a)
{
    dp__conv2d_args c = as_conv(a);
    c.x = a->y;  /* the convolution's input shape */
    c.dx = a->y; /* written by its backward-data pass */
    c.dy = a->x;
    DP_TRY(dp__cuda_conv2d_backward_data(dev, &c));
    if (!a->b.data || a->y.shape[0] == 0)
        return 0;
    dp__bias_args b = {.y = a->y.data,
                       .b = a->b.data,
                       .rows = a->y.shape[0] * a->y.shape[2] * a->y.shape[3],
                       .cols = a->y.shape[1]};
    return dp__cuda_bias_add(dev, &b);
}

int dp__cuda_conv_transpose2d_backward_data(dp_device_t *dev, const dp__conv2d_args *a)
{
    dp__conv2d_args c = as_conv(a);
    c.x = a->dy;
    c.y = a->dx;
    return dp__cuda_conv2d_forward(dev, &c);
}

int dp__cuda_conv_transpose2d_backward_weights(dp_device_t *dev, const dp__conv2d_args *a)
{
    dp__conv2d_args c = as_conv(a);
    c.x = a->dy;
    c.dy = a->x;
    DP_TRY(dp__cuda_conv2d_backward_weights(dev, &c));
    if (!a->db.data)
        return 0;
    dp__bias_args b = {.dy = a->dy.data,
                       .b = a->db.data,
                       .rows = a->dy.shape[0] * a->dy.shape[2] * a->dy.shape[3],
                       .cols = a->dy.shape[1]};
    return dp__cuda_bias_grad(dev, &b);
}

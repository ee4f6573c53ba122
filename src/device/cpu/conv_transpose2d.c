/* The transposed convolution on the CPU: oneDNN's direct deconvolution for
 * each pass (conv2d_onednn.c builds and caches its primitives beside the
 * convolution's), float32, activations in NHWC (a user's NCHW input is
 * taken as it is). No kernel choice: oneDNN has one implementation. */
#include "device/cpu/conv2d.h"

static int run_forward(void *p, void *ctx)
{
    return dp__cpu_deconv_onednn(ctx, DP__CONV_FORWARD, p);
}

static int run_backward_data(void *p, void *ctx)
{
    return dp__cpu_deconv_onednn(ctx, DP__CONV_BACKWARD_DATA, p);
}

static int run_backward_weights(void *p, void *ctx)
{
    return dp__cpu_deconv_onednn(ctx, DP__CONV_BACKWARD_WEIGHTS, p);
}

DP__CPU_ENTRY(conv_transpose2d_forward, dp__conv2d_args, run_forward)
DP__CPU_ENTRY(conv_transpose2d_backward_data, dp__conv2d_args, run_backward_data)
DP__CPU_ENTRY(conv_transpose2d_backward_weights, dp__conv2d_args, run_backward_weights)

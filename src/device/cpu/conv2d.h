/* The CPU convolution's implementations (conv2d.c chooses among them). */
#ifndef DP_DEVICE_CPU_CONV2D_H
#define DP_DEVICE_CPU_CONV2D_H

#include "device/conv_choice.h"
#include "device/cpu/cpu.h"

/* Runs `pass` of a with oneDNN's direct (NHWC or blocked) or Winograd
 * convolution, in the activations' type (f32, or bf16 with f32 weights
 * and weight gradients); DP_ENOTSUP when oneDNN has no such kernel here. */
int dp__cpu_conv_onednn(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl,
                        const dp__conv2d_args *a);

/* Sets *ref to whether oneDNN's (pass, impl) kernel for a is a reference
 * implementation (its "ref:" ones, far slower than the rest), building it
 * if need be; DP_ENOTSUP when oneDNN has no such kernel here. */
int dp__cpu_conv_onednn_is_ref(dp_device_t *dev, dp__conv_pass pass, dp__conv_impl impl,
                               const dp__conv2d_args *a, bool *ref);

/* Runs `pass` of a transposed convolution a (kernels.h) with oneDNN's
 * direct deconvolution, f32. */
int dp__cpu_deconv_onednn(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a);

/* Runs `pass` of a as im2col and one oneDNN matrix product per chunk of
 * samples (in the activations' type, f32 accumulation); DP_ENOTSUP for
 * activations not in NHWC. Groups 1 only. */
int dp__cpu_conv_gemm(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a);

#endif

/* The activations of dp_activation_kind (dp/ops.h) and their derivatives,
 * one value at a time, for the CUDA kernels and for the CPU's loops where
 * oneDNN has no such eltwise algorithm (hardsigmoid, selu): the same
 * formulas, with PyTorch's derivative at the kinks. Valid C and CUDA: host
 * and device functions under nvcc. */
#ifndef DP_DEVICE_ACTIVATION_MATH_H
#define DP_DEVICE_ACTIVATION_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define DP__ACT_FN __host__ __device__
#else
#define DP__ACT_FN
#endif

/* The kinds, as dp_activation_kind numbers them. */
enum {
    DP__ACT_HARDTANH = 0,
    DP__ACT_HARDSWISH = 1,
    DP__ACT_HARDSIGMOID = 2,
    DP__ACT_ELU = 3,
    DP__ACT_SELU = 4,
    DP__ACT_GELU = 5,
    DP__ACT_GELU_TANH = 6,
    DP__ACT_SILU = 7,
    DP__ACT_LINEAR = 8,
};

static inline DP__ACT_FN float dp__act_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* GELU's tanh approximation: 0.5 x (1 + tanh(k (x + 0.044715 x^3))). */
#define DP__GELU_K 0.7978845608028654f /* sqrt(2 / pi) */

static inline DP__ACT_FN float dp__act_forward(int kind, float x, float a, float b)
{
    switch (kind) {
    case DP__ACT_HARDTANH:
        return x < a ? a : x > b ? b : x;
    case DP__ACT_HARDSWISH:
        return x <= -3.0f ? 0.0f : x >= 3.0f ? x : x * (x + 3.0f) / 6.0f;
    case DP__ACT_HARDSIGMOID: {
        float v = a * x + b;
        return v <= 0.0f ? 0.0f : v >= 1.0f ? 1.0f : v;
    }
    case DP__ACT_ELU:
        return x > 0.0f ? x : a * expm1f(x);
    case DP__ACT_SELU:
        return b * (x > 0.0f ? x : a * expm1f(x));
    case DP__ACT_GELU:
        return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case DP__ACT_GELU_TANH:
        return 0.5f * x * (1.0f + tanhf(DP__GELU_K * (x + 0.044715f * x * x * x)));
    case DP__ACT_LINEAR:
        return a * x + b;
    default: /* DP__ACT_SILU */
        return x * dp__act_sigmoid(x);
    }
}

/* dy f'(x): hardtanh and hardsigmoid pass the gradient strictly inside
 * their bounds, hardswish uses (2x + 3) / 6 on [-3, 3] (PyTorch's
 * hardtanh_backward, hardsigmoid_backward, hardswish_backward). */
static inline DP__ACT_FN float dp__act_backward(int kind, float x, float dy, float a, float b)
{
    switch (kind) {
    case DP__ACT_HARDTANH:
        return x > a && x < b ? dy : 0.0f;
    case DP__ACT_HARDSWISH:
        return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
    case DP__ACT_HARDSIGMOID: {
        float v = a * x + b;
        return v > 0.0f && v < 1.0f ? dy * a : 0.0f;
    }
    case DP__ACT_ELU:
        return x > 0.0f ? dy : dy * a * expf(x);
    case DP__ACT_SELU:
        return x > 0.0f ? dy * b : dy * b * a * expf(x);
    case DP__ACT_GELU: {
        float cdf = 0.5f * (1.0f + erff(x * 0.7071067811865476f));
        float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
        return dy * (cdf + x * pdf);
    }
    case DP__ACT_GELU_TANH: {
        float inner = DP__GELU_K * (x + 0.044715f * x * x * x);
        float t = tanhf(inner);
        float d_inner = DP__GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner);
    }
    case DP__ACT_LINEAR:
        return dy * a;
    default: { /* DP__ACT_SILU */
        float s = dp__act_sigmoid(x);
        return dy * s * (1.0f + x * (1.0f - s));
    }
    }
}

#endif

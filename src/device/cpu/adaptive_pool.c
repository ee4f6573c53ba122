/* Adaptive average pooling on the CPU with plain loops, for the windows
 * oneDNN's pooling cannot express: sizes that differ from one output to the
 * next, and overlap (7 rows to 3: rows 0-2, 2-4, 4-6). The op layer sends
 * windows that tile the input evenly to the ordinary pooling kernel. */
#include "device/cpu/cpu.h"

#include <string.h>

#define PAR_MIN 32768

/* The window of output index i of `out` over `in` positions, PyTorch's:
 * [floor(i in / out), ceil((i + 1) in / out)). */
static int64_t window_start(int64_t i, int64_t in, int64_t out)
{
    return i * in / out;
}

static int64_t window_end(int64_t i, int64_t in, int64_t out)
{
    return ((i + 1) * in + out - 1) / out;
}

static int run_forward(void *p, void *ctx)
{
    dp__adaptive_pool_args *a = p;
    (void)ctx;
    const float *x = a->x.data;
    float *y = a->y.data;
    int64_t N = a->x.shape[0], C = a->x.shape[1], H = a->x.shape[2], W = a->x.shape[3];
    int64_t P = a->y.shape[2], Q = a->y.shape[3];
    if (a->x.nhwc) {
        /* Each output pixel sums rows of C contiguous floats. */
#pragma omp parallel for collapse(2) if (N * C * H * W > PAR_MIN)
        for (int64_t n = 0; n < N; n++) {
            for (int64_t ph = 0; ph < P; ph++) {
                int64_t h0 = window_start(ph, H, P), h1 = window_end(ph, H, P);
                for (int64_t qw = 0; qw < Q; qw++) {
                    int64_t w0 = window_start(qw, W, Q), w1 = window_end(qw, W, Q);
                    float *d = y + ((n * P + ph) * Q + qw) * C;
                    for (int64_t c = 0; c < C; c++)
                        d[c] = 0.0f;
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++) {
                            const float *s = x + ((n * H + h) * W + w) * C;
#pragma omp simd
                            for (int64_t c = 0; c < C; c++)
                                d[c] += s[c];
                        }
                    float inv = 1.0f / (float)((h1 - h0) * (w1 - w0));
                    for (int64_t c = 0; c < C; c++)
                        d[c] *= inv;
                }
            }
        }
        return 0;
    }
#pragma omp parallel for if (N * C * H * W > PAR_MIN)
    for (int64_t nc = 0; nc < N * C; nc++) {
        const float *s = x + nc * H * W;
        float *d = y + nc * P * Q;
        for (int64_t ph = 0; ph < P; ph++) {
            int64_t h0 = window_start(ph, H, P), h1 = window_end(ph, H, P);
            for (int64_t qw = 0; qw < Q; qw++) {
                int64_t w0 = window_start(qw, W, Q), w1 = window_end(qw, W, Q);
                float sum = 0.0f;
                for (int64_t h = h0; h < h1; h++)
                    for (int64_t w = w0; w < w1; w++)
                        sum += s[h * W + w];
                d[ph * Q + qw] = sum / (float)((h1 - h0) * (w1 - w0));
            }
        }
    }
    return 0;
}

/* dx = sum over the windows holding each input of dy / window size. Windows
 * overlap, so each thread scatters into an image (NHWC) or a plane (NCHW)
 * of its own. */
static int run_backward(void *p, void *ctx)
{
    dp__adaptive_pool_args *a = p;
    (void)ctx;
    const float *dy = a->dy.data;
    float *dx = a->dx.data;
    int64_t N = a->x.shape[0], C = a->x.shape[1], H = a->x.shape[2], W = a->x.shape[3];
    int64_t P = a->y.shape[2], Q = a->y.shape[3];
    if (a->x.nhwc) {
#pragma omp parallel for if (N * C * H * W > PAR_MIN)
        for (int64_t n = 0; n < N; n++) {
            float *img = dx + n * H * W * C;
            memset(img, 0, (size_t)(H * W * C) * sizeof *img);
            for (int64_t ph = 0; ph < P; ph++) {
                int64_t h0 = window_start(ph, H, P), h1 = window_end(ph, H, P);
                for (int64_t qw = 0; qw < Q; qw++) {
                    int64_t w0 = window_start(qw, W, Q), w1 = window_end(qw, W, Q);
                    float inv = 1.0f / (float)((h1 - h0) * (w1 - w0));
                    const float *g = dy + ((n * P + ph) * Q + qw) * C;
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++) {
                            float *d = img + (h * W + w) * C;
#pragma omp simd
                            for (int64_t c = 0; c < C; c++)
                                d[c] += g[c] * inv;
                        }
                }
            }
        }
    } else {
#pragma omp parallel for if (N * C * H * W > PAR_MIN)
        for (int64_t nc = 0; nc < N * C; nc++) {
            float *d = dx + nc * H * W;
            const float *g = dy + nc * P * Q;
            memset(d, 0, (size_t)(H * W) * sizeof *d);
            for (int64_t ph = 0; ph < P; ph++) {
                int64_t h0 = window_start(ph, H, P), h1 = window_end(ph, H, P);
                for (int64_t qw = 0; qw < Q; qw++) {
                    int64_t w0 = window_start(qw, W, Q), w1 = window_end(qw, W, Q);
                    float v = g[ph * Q + qw] / (float)((h1 - h0) * (w1 - w0));
                    for (int64_t h = h0; h < h1; h++)
                        for (int64_t w = w0; w < w1; w++)
                            d[h * W + w] += v;
                }
            }
        }
    }
    if (a->relu_mask) {
        const float *mask = a->relu_mask;
        int64_t n = N * C * H * W;
#pragma omp parallel for simd if (n > PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            dx[i] = mask[i] > 0.0f ? dx[i] : 0.0f;
    }
    return 0;
}

DP__CPU_ENTRY(adaptive_avg_pool_forward, dp__adaptive_pool_args, run_forward)
DP__CPU_ENTRY(adaptive_avg_pool_backward, dp__adaptive_pool_args, run_backward)

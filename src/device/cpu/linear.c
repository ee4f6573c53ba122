/* Matrix products and bias on the CPU. The product is oneDNN's sgemm, on the
 * worker's OpenMP team: Debian's OpenBLAS 0.3.21 does not recognise recent
 * Intel CPUs and silently uses SSE3 kernels, and its own thread pool would
 * fight oneDNN's for the same cores. */
#include "device/cpu/cpu.h"

static int run_gemm(void *p, void *ctx)
{
    dp__gemm_args *a = p;
    (void)ctx;
    if (a->m == 0 || a->n == 0)
        return 0;
    if (a->k == 0) {
        for (int64_t i = 0; i < a->m; i++)
            for (int64_t j = 0; j < a->n; j++)
                a->c[i * a->ldc + j] *= a->beta;
        return 0;
    }
    DP_DNNL_CHECK(dnnl_sgemm(a->trans_a ? 'T' : 'N', a->trans_b ? 'T' : 'N', a->m, a->n, a->k,
                             a->alpha, a->a, a->lda, a->b, a->ldb, a->beta, a->c, a->ldc));
    return 0;
}

int dp__cpu_gemm(dp_device_t *dev, const dp__gemm_args *a)
{
    return dp__cpu_push(dev, run_gemm, a, sizeof *a);
}

static int run_bias_add(void *p, void *ctx)
{
    dp__bias_args *a = p;
    (void)ctx;
    int64_t rows = a->rows, cols = a->cols;
    float *y = a->y;
    const float *b = a->b;
#pragma omp parallel for if (rows * cols > 32768)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            y[i * cols + j] += b[j];
    return 0;
}

int dp__cpu_bias_add(dp_device_t *dev, const dp__bias_args *a)
{
    return dp__cpu_push(dev, run_bias_add, a, sizeof *a);
}

static int run_bias_grad(void *p, void *ctx)
{
    dp__bias_args *a = p;
    (void)ctx;
    int64_t rows = a->rows, cols = a->cols;
    const float *dy = a->dy;
    float *db = a->b;
    for (int64_t j = 0; j < cols; j++)
        db[j] = 0.0f;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            db[j] += dy[i * cols + j];
    return 0;
}

int dp__cpu_bias_grad(dp_device_t *dev, const dp__bias_args *a)
{
    return dp__cpu_push(dev, run_bias_grad, a, sizeof *a);
}

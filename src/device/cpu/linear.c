/* Matrix products and bias on the CPU. The f32 product is oneDNN's sgemm,
 * on the worker's OpenMP team: Debian's OpenBLAS 0.3.21 does not recognise
 * recent Intel CPUs and silently uses SSE3 kernels, and its own thread pool
 * would fight oneDNN's for the same cores. The bf16 product is oneDNN's
 * matmul primitive on bf16 operands (AMX or AVX512-BF16), f32 accumulation;
 * the reference bf16 path is sgemm on operands rounded to bf16. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"

#include <string.h>

/* Elements spanned by a row-major matrix of `rows` rows, leading dim ld. */
static int64_t span(int64_t rows, int64_t cols, int64_t ld)
{
    return rows > 0 ? (rows - 1) * ld + cols : 0;
}

/* The stored extent of A and B: op(A) is m x k, so A is m x k or k x m. */
static int64_t span_a(const dp__gemm_args *a)
{
    return a->trans_a ? span(a->k, a->m, a->lda) : span(a->m, a->k, a->lda);
}

static int64_t span_b(const dp__gemm_args *a)
{
    return a->trans_b ? span(a->n, a->k, a->ldb) : span(a->k, a->n, a->ldb);
}

/* An operand as f32 rounded to bf16 (reference) in scratch `slot`. */
static const float *rounded(dp__cpu *cpu, int slot, const void *m, dp_dtype dtype, int64_t n)
{
    float *f = dp__cpu_scratch(cpu, slot, (size_t)(n ? n : 1) * sizeof *f);
    if (!f)
        return NULL;
    if (dtype == DP_BF16)
        dp__cpu_f32_from_bf16(f, m, n);
    else
        dp__cpu_round_bf16(f, m, n);
    return f;
}

/* An operand as bf16 (native): itself, or converted into scratch `slot`. */
static const void *as_bf16(dp__cpu *cpu, int slot, const void *m, dp_dtype dtype, int64_t n)
{
    if (dtype == DP_BF16)
        return m;
    void *h = dp__cpu_scratch(cpu, slot, (size_t)(n ? n : 1) * sizeof(dp__bf16));
    if (h)
        dp__cpu_bf16_from_f32(h, m, n);
    return h;
}

static int sgemm(const dp__gemm_args *a, const float *A, const float *B, float *C)
{
    DP_DNNL_CHECK(dnnl_sgemm(a->trans_a ? 'T' : 'N', a->trans_b ? 'T' : 'N', a->m, a->n, a->k,
                             a->alpha, A, a->lda, B, a->ldb, a->beta, C, a->ldc));
    return 0;
}

/* C = alpha A B (+ beta C) on bf16 operands (native kernels). */
static int gemm_native(dp__cpu *cpu, const dp__gemm_args *a)
{
    const void *A = as_bf16(cpu, 0, a->a, a->a_dtype, span_a(a));
    const void *B = as_bf16(cpu, 1, a->b, a->b_dtype, span_b(a));
    if (!A || !B)
        return DP_ENOMEM;
    dp__cpu_matmul mm;
    memset(&mm, 0, sizeof mm);
    mm.m = a->m, mm.n = a->n, mm.k = a->k;
    mm.a_strides[0] = a->trans_a ? 1 : a->lda, mm.a_strides[1] = a->trans_a ? a->lda : 1;
    mm.b_strides[0] = a->trans_b ? 1 : a->ldb, mm.b_strides[1] = a->trans_b ? a->ldb : 1;
    mm.c_strides[0] = a->ldc, mm.c_strides[1] = 1;
    mm.a_type = mm.b_type = dnnl_bf16;
    mm.c_type = a->c_dtype == DP_BF16 ? dnnl_bf16 : dnnl_f32;
    mm.alpha = a->alpha;
    mm.beta = a->beta;
    return dp__cpu_matmul_run(cpu, &mm, A, B, a->c, NULL);
}

/* The same on f32 kernels: sgemm over operands rounded to bf16. */
static int gemm_reference(dp__cpu *cpu, const dp__gemm_args *a)
{
    const float *A = rounded(cpu, 0, a->a, a->a_dtype, span_a(a));
    const float *B = rounded(cpu, 1, a->b, a->b_dtype, span_b(a));
    if (!A || !B)
        return DP_ENOMEM;
    if (a->c_dtype != DP_BF16)
        return sgemm(a, A, B, a->c);
    int64_t nc = span(a->m, a->n, a->ldc);
    float *C = dp__cpu_scratch(cpu, 2, (size_t)(nc ? nc : 1) * sizeof *C);
    if (!C)
        return DP_ENOMEM;
    if (a->beta != 0.0f)
        dp__cpu_f32_from_bf16(C, a->c, nc);
    DP_TRY(sgemm(a, A, B, C));
    dp__cpu_bf16_from_f32(a->c, C, nc);
    return 0;
}

static int run_gemm(void *p, void *ctx)
{
    dp__gemm_args *a = p;
    dp_device_t *dev = ctx;
    if (a->m == 0 || a->n == 0)
        return 0;
    if (a->k == 0) {
        DP_ASSERT(a->c_dtype != DP_BF16);
        float *c = a->c;
        for (int64_t i = 0; i < a->m; i++)
            for (int64_t j = 0; j < a->n; j++)
                c[i * a->ldc + j] *= a->beta;
        return 0;
    }
    if (a->precision == DP_PRECISION_BF16)
        return gemm_native(dev->impl, a);
    if (a->precision == DP_PRECISION_BF16_REFERENCE)
        return gemm_reference(dev->impl, a);
    DP_ASSERT(a->a_dtype == DP_F32 && a->b_dtype == DP_F32 && a->c_dtype == DP_F32);
    return sgemm(a, a->a, a->b, a->c);
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

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

typedef struct mm_key {
    int trans_a, trans_b, c_bf16, accumulate;
    int64_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
} mm_key;

typedef struct mm_prim {
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} mm_prim;

static void mm_prim_destroy(void *p)
{
    mm_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    dnnl_memory_t mems[] = {c->a, c->b, c->c};
    for (size_t i = 0; i < DP_COUNTOF(mems); i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    dp__free(c);
}

static int mm_build(dp__cpu *cpu, const mm_key *k, mm_prim **out)
{
    dnnl_memory_desc_t A, B, C;
    dnnl_dims_t ad = {k->m, k->k}, bd = {k->k, k->n}, cd = {k->m, k->n};
    dnnl_dims_t as = {k->trans_a ? 1 : k->lda, k->trans_a ? k->lda : 1};
    dnnl_dims_t bs = {k->trans_b ? 1 : k->ldb, k->trans_b ? k->ldb : 1};
    dnnl_dims_t cs = {k->ldc, 1};
    dnnl_memory_desc_init_by_strides(&A, 2, ad, dnnl_bf16, as);
    dnnl_memory_desc_init_by_strides(&B, 2, bd, dnnl_bf16, bs);
    dnnl_memory_desc_init_by_strides(&C, 2, cd, k->c_bf16 ? dnnl_bf16 : dnnl_f32, cs);
    dnnl_matmul_desc_t desc;
    DP_DNNL_CHECK(dnnl_matmul_desc_init(&desc, &A, &B, NULL, &C));
    dnnl_primitive_attr_t attr;
    DP_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    if (k->alpha != 1.0f)
        dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha);
    if (k->accumulate) {
        dnnl_post_ops_t ops;
        dnnl_post_ops_create(&ops);
        dnnl_post_ops_append_sum(ops, k->beta);
        dnnl_primitive_attr_set_post_ops(attr, ops);
        dnnl_post_ops_destroy(ops);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, cpu->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        DP_ERROR("oneDNN: no bf16 matrix product for %lldx%lldx%lld: status %d", (long long)k->m,
                 (long long)k->n, (long long)k->k, (int)st);
        return DP_EDEVICE;
    }
    mm_prim *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
    if (rc == 0 && (dnnl_memory_create(&c->a, &A, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
                    dnnl_memory_create(&c->b, &B, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
                    dnnl_memory_create(&c->c, &C, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
                    dnnl_primitive_create(&c->prim, pd) != dnnl_success)) {
        DP_ERROR("oneDNN: cannot create matrix product primitive");
        rc = DP_EDEVICE;
    }
    dnnl_primitive_desc_destroy(pd);
    if (rc < 0) {
        if (c)
            mm_prim_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* C = alpha A B (+ beta C) on bf16 operands (native kernels). */
static int gemm_native(dp__cpu *cpu, const dp__gemm_args *a)
{
    const void *A = as_bf16(cpu, 0, a->a, a->a_dtype, span_a(a));
    const void *B = as_bf16(cpu, 1, a->b, a->b_dtype, span_b(a));
    if (!A || !B)
        return DP_ENOMEM;
    mm_key k;
    memset(&k, 0, sizeof k);
    k.trans_a = a->trans_a;
    k.trans_b = a->trans_b;
    k.c_bf16 = a->c_dtype == DP_BF16;
    k.accumulate = a->beta != 0.0f;
    k.m = a->m, k.n = a->n, k.k = a->k, k.lda = a->lda, k.ldb = a->ldb, k.ldc = a->ldc;
    k.alpha = a->alpha;
    k.beta = a->beta;
    mm_prim *c = dp__cpu_prim_find(cpu, &k, sizeof k);
    if (!c) {
        DP_TRY(mm_build(cpu, &k, &c));
        DP_TRY(dp__cpu_prim_put(cpu, &k, sizeof k, c, mm_prim_destroy));
    }
    dnnl_memory_set_data_handle(c->a, (void *)A);
    dnnl_memory_set_data_handle(c->b, (void *)B);
    dnnl_memory_set_data_handle(c->c, a->c);
    dnnl_exec_arg_t args[3] = {
        {DNNL_ARG_SRC, c->a}, {DNNL_ARG_WEIGHTS, c->b}, {DNNL_ARG_DST, c->c}};
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, 3, args));
    return 0;
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

/* Matrix products through cuBLAS and the bias kernels (eltwise.cu), as
 * src/device/cpu/linear.c. cuBLAS is column-major: the row-major product
 * C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T, which is the
 * same call with A and B swapped and m and n swapped. The handle's math mode
 * is CUBLAS_DEFAULT_MATH (cuda_device.c): full float32, no TF32. */
#include "device/cuda/cuda.h"

static int run_gemm(void *p, void *ctx)
{
    dp__gemm_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    if (a->m == 0 || a->n == 0)
        return 0;
    if (a->m > INT32_MAX || a->n > INT32_MAX || a->k > INT32_MAX) {
        DP_ERROR("gemm: %lld x %lld x %lld exceeds cuBLAS's int sizes", (long long)a->m,
                 (long long)a->n, (long long)a->k);
        return DP_EINVAL;
    }
    DP_CUBLAS_CHECK(cublasSgemm(cu->cublas, a->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                a->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)a->n, (int)a->m,
                                (int)a->k, &a->alpha, a->b, (int)a->ldb, a->a, (int)a->lda,
                                &a->beta, a->c, (int)a->ldc));
    return 0;
}

int dp__cuda_gemm(dp_device_t *dev, const dp__gemm_args *a)
{
    return dp__cuda_push(dev, run_gemm, a, sizeof *a);
}

static int run_bias_add(void *p, void *ctx)
{
    dp__bias_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(dp__cuda_bias_add_launch(a->y, a->b, a->rows, a->cols, cu->stream),
                             "bias_add");
}

int dp__cuda_bias_add(dp_device_t *dev, const dp__bias_args *a)
{
    if (a->rows * a->cols == 0)
        return 0;
    return dp__cuda_push(dev, run_bias_add, a, sizeof *a);
}

static int run_bias_grad(void *p, void *ctx)
{
    dp__bias_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    return dp__cuda_launched(
        dp__cuda_bias_grad_launch(a->dy, a->b, a->rows, a->cols, 0, cu->stream), "bias_grad");
}

int dp__cuda_bias_grad(dp_device_t *dev, const dp__bias_args *a)
{
    if (a->cols == 0)
        return 0;
    return dp__cuda_push(dev, run_bias_grad, a, sizeof *a);
}

/* Batch normalisation on a GPU through cuDNN (spatial mode: statistics per
 * channel over N, H, W), in the tensor's own layout, as
 * src/device/cpu/batch_norm.c.
 *
 * cuDNN's training forward computes the batch statistics, normalises and
 * updates the running statistics in one call (the running variance with
 * the unbiased estimate, as PyTorch). It saves 1 / sqrt(var + eps) where
 * our contract saves the biased variance, so a small kernel converts after
 * the forward pass and back (into scratch) before the backward pass. The
 * fused ReLU is our eltwise kernel; the eval-mode backward pass is our own
 * (batch_norm_kernels.cu). SyncBatchNorm's split passes (the
 * batch_norm_sums kernels, and totals) are the CPU's alone for now: the op
 * list gives CUDA no batch_norm_sums, and the op refuses SyncBatchNorm
 * here. */
#include "device/cuda/cuda.h"

static const float one = 1.0f, zero = 0.0f;

typedef struct bn_descs {
    cudnnTensorDescriptor_t x, stat;
} bn_descs;

static void descs_destroy(bn_descs *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->stat)
        cudnnDestroyTensorDescriptor(d->stat);
}

static int descs_init(bn_descs *d, const dp__tdesc *x)
{
    d->x = d->stat = NULL;
    DP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->x));
    DP_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d->stat));
    dp__tdesc t = *x;
    t.nhwc = x->nhwc && x->shape[1] > 1;
    DP_TRY(dp__cuda_tensor_desc(d->x, &t));
    DP_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d->stat, d->x, CUDNN_BATCHNORM_SPATIAL));
    return 0;
}

static int forward(dp__cuda *cu, const dp__batch_norm_args *a, const bn_descs *d)
{
    int64_t C = a->x.shape[1];
    if (a->training) {
        DP_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
            cu->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x, a->x.data, d->x, a->y.data,
            d->stat, a->gamma, a->beta, (double)a->momentum, a->running_mean, a->running_var,
            (double)a->eps, a->save_mean, a->save_var));
        DP_TRY(dp__cuda_launched(dp__cuda_bn_invstd_to_var(a->save_var, C, a->eps, cu->stream),
                                 "batch_norm statistics"));
    } else {
        DP_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
            cu->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d->x, a->x.data, d->x, a->y.data,
            d->stat, a->gamma, a->beta, a->running_mean, a->running_var, (double)a->eps));
        if (a->save_mean) {
            size_t bytes = (size_t)C * sizeof(float);
            DP_CUDA_CHECK(cudaMemcpyAsync(a->save_mean, a->running_mean, bytes,
                                          cudaMemcpyDeviceToDevice, cu->stream));
            DP_CUDA_CHECK(cudaMemcpyAsync(a->save_var, a->running_var, bytes,
                                          cudaMemcpyDeviceToDevice, cu->stream));
        }
    }
    if (a->relu)
        DP_TRY(dp__cuda_launched(
            dp__cuda_eltwise_launch(&(dp__eltwise_args){.op = DP__ELT_RELU,
                                                        .a = a->y.data,
                                                        .out = a->y.data,
                                                        .n = dp__numel(4, a->x.shape)},
                                    cu->stream),
            "batch_norm relu"));
    return 0;
}

static int run_forward(void *p, void *ctx)
{
    dp__batch_norm_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    bn_descs d;
    int rc = descs_init(&d, &a->x);
    if (rc == 0)
        rc = forward(cu, a, &d);
    descs_destroy(&d);
    return rc;
}

static int backward(dp__cuda *cu, const dp__batch_norm_args *a, const bn_descs *d)
{
    int64_t C = a->x.shape[1];
    if (!a->training) {
        return dp__cuda_launched(dp__cuda_bn_backward_eval(a, cu->stream),
                                 "batch_norm backward (eval)");
    }
    void *inv_std;
    DP_TRY(dp__cuda_scratch(cu, (size_t)C * sizeof(float), &inv_std));
    DP_TRY(dp__cuda_launched(dp__cuda_bn_var_to_invstd(a->save_var, inv_std, C, a->eps, cu->stream),
                             "batch_norm statistics"));
    DP_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        cu->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, d->x, a->x.data, d->x,
        a->dy.data, d->x, a->dx.data, d->stat, a->gamma, a->dgamma, a->dbeta, (double)a->eps,
        a->save_mean, inv_std));
    return 0;
}

static int run_backward(void *p, void *ctx)
{
    dp__batch_norm_args *a = p;
    dp__cuda *cu = ((dp_device_t *)ctx)->impl;
    bn_descs d;
    int rc = descs_init(&d, &a->x);
    if (rc == 0)
        rc = backward(cu, a, &d);
    descs_destroy(&d);
    return rc;
}

int dp__cuda_batch_norm_forward(dp_device_t *dev, const dp__batch_norm_args *a)
{
    if (dp__numel(4, a->x.shape) == 0)
        return 0;
    return dp__cuda_push(dev, run_forward, a, sizeof *a);
}

int dp__cuda_batch_norm_backward(dp_device_t *dev, const dp__batch_norm_args *a)
{
    return dp__cuda_push(dev, run_backward, a, sizeof *a);
}

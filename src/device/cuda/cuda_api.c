/* The public dp_cuda_* and TF32 entry points. This one file of the folder is
 * built in every configuration (cmake/cuda.cmake): in a CPU-only build it
 * answers that there is no GPU, and holds CUDA's entry of the backend list
 * (device/backend_list.h) without a device table. */
#include "dp/tensor.h"

#include "core/internal.h"
#include "device/device.h"

#include <stdatomic.h>
#include <stdio.h>

#ifdef DP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* PyTorch's default: torch.backends.cudnn.allow_tf32 = True. */
static atomic_int tf32_allowed = 1;

void dp_set_tf32(bool allow)
{
    atomic_store(&tf32_allowed, allow ? 1 : 0);
}

bool dp_tf32_allowed(void)
{
    return atomic_load(&tf32_allowed) != 0;
}

bool dp_cuda_built(void)
{
#ifdef DP_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

#ifdef DP_HAVE_CUDA

int dp_cuda_device_count(void)
{
    int n = 0;
    /* No driver or no GPU: an error here means "none", not a failure. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

int dp_cuda_device_info(int ordinal, char *name, size_t size, size_t *total_bytes)
{
    if (ordinal < 0 || ordinal >= dp_cuda_device_count()) {
        DP_ERROR("cuda:%d: no such GPU (%d here)", ordinal, dp_cuda_device_count());
        return DP_EINVAL;
    }
    struct cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess) {
        DP_ERROR("CUDA: cudaGetDeviceProperties(%d) failed: %s", ordinal, cudaGetErrorString(e));
        return DP_EDEVICE;
    }
    if (name && size)
        snprintf(name, size, "%s", prop.name);
    if (total_bytes)
        *total_bytes = prop.totalGlobalMem;
    return 0;
}

#else

int dp_cuda_device_count(void)
{
    return 0;
}

int dp_cuda_device_info(int ordinal, char *name, size_t size, size_t *total_bytes)
{
    (void)name;
    (void)size;
    (void)total_bytes;
    DP_ERROR("cuda:%d: this build has no CUDA backend", ordinal);
    return DP_ENOTSUP;
}

/* CUDA's line of the backend list in a CPU-only build (a CUDA build's is in
 * cuda_device.c): no table, no devices. */
const dp__backend dp__cuda_backend = {
    .name = "cuda",
    .hardware = "GPU",
    .ops = NULL,
    .count = dp_cuda_device_count,
    .why_none = "this build has no CUDA backend",
};

#endif

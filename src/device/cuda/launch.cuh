// How the .cu files of this folder launch their kernels: the block size,
// the grid, the grid-stride loop, the launcher over one argument struct and
// the device table's entry that enqueues it.
#ifndef DP_DEVICE_CUDA_LAUNCH_CUH
#define DP_DEVICE_CUDA_LAUNCH_CUH

#include "device/cuda/cuda_kernels.h"

#include <cstdint>
#include <cuda_runtime.h>

namespace dp_cuda
{

// Threads of a block, unless a kernel says otherwise.
constexpr int kThreads = 256;

// Blocks of `threads` for n elements: at least one, and at most 65535 * 8,
// the grid-stride loops of the kernels covering the rest.
inline unsigned blocks_for(int64_t n, int threads = kThreads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b > 65535 * 8)
        b = 65535 * 8;
    return b < 1 ? 1u : (unsigned)b;
}

// kernel<<<blocks_for(n), kThreads>>>(args...) on stream: the launch of a
// kernel with a grid-stride loop over n elements (none for n = 0); returns
// its status.
template <typename... Params, typename... Args>
cudaError_t launch_over(int64_t n, cudaStream_t stream, void (*kernel)(Params...), Args... args)
{
    if (n <= 0)
        return cudaSuccess;
    kernel<<<blocks_for(n), kThreads, 0, stream>>>(args...);
    return cudaGetLastError();
}

// A dp__cuda_launcher over the argument struct Args, from a launch
// function that takes it typed.
template <typename Args, cudaError_t (*Launch)(const Args *, cudaStream_t)>
cudaError_t launcher(const void *args, cudaStream_t stream)
{
    return Launch(static_cast<const Args *>(args), stream);
}

} // namespace dp_cuda

// for (int64_t i = ...): the elements of [0, n) this thread visits, one grid
// of threads apart.
#define DP_CUDA_KERNEL_LOOP(i, n)                                                                  \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

// The device table's entry dp__cuda_<slot> (the op list's): enqueues
// launch(const Args *, cudaStream_t) on the device's worker over a copy of
// the arguments (dp__cuda_push_launch), named by its slot for DP_PROFILE.
#define DP_CUDA_ENTRY(slot, Args, launch)                                                          \
    extern "C" int dp__cuda_##slot(dp_device_t *dev, const Args *a)                                \
    {                                                                                              \
        return dp__cuda_push_launch(dev, dp_cuda::launcher<Args, launch>, #slot, a, sizeof *a);    \
    }

#endif

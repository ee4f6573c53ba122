// Grid sizing shared by the .cu files of this folder.
#ifndef DP_DEVICE_CUDA_LAUNCH_CUH
#define DP_DEVICE_CUDA_LAUNCH_CUH

#include <cstdint>

namespace dp_cuda {

// Blocks of `threads` for n elements: at least one, and at most 65535 * 8,
// the grid-stride loops of the kernels covering the rest.
inline unsigned blocks_for(int64_t n, int threads = 256)
{
    int64_t b = (n + threads - 1) / threads;
    if (b > 65535 * 8)
        b = 65535 * 8;
    return b < 1 ? 1u : (unsigned)b;
}

} // namespace dp_cuda

#endif

// The block reduction of this folder's kernels that sum in a fixed order:
// each thread of a block of T (a power of two) brings its own partial sum
// (a strided range in order), then the block adds the T partials in one
// tree, halving: part[t] += part[t + s] for s = T/2, T/4, ..., 1. The order
// depends on T alone, never on the grid or on timing, so every run gives the
// same bits (cuda_host.c repeats the tree on the host for the bias
// gradient's test).
#ifndef DP_DEVICE_CUDA_REDUCE_CUH
#define DP_DEVICE_CUDA_REDUCE_CUH

namespace dp_cuda
{

// The sum over the block's T threads of each one's v, returned to every
// thread. Every thread of the block calls it (it synchronises the block);
// part (T values in shared memory) may be used again when it returns.
template <int T, typename V> __device__ V block_sum(V *part, V v)
{
    part[threadIdx.x] = v;
    __syncthreads();
    for (int s = T / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    V total = part[0];
    __syncthreads();
    return total;
}

} // namespace dp_cuda

#endif

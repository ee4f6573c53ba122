// The transpose of a row-major f32 matrix on a GPU, as
// src/device/cpu/transpose.c: 32 x 32 tiles through shared memory, so that
// both the reads and the writes coalesce.
#include "device/cuda/cuda_kernels.h"

#include "device/cuda/launch.cuh"

#include <cuda_runtime.h>

namespace
{

constexpr int kTile = 32, kRows = 8;

__global__ void transpose_kernel(const float *src, float *dst, int64_t rows, int64_t cols)
{
    __shared__ float tile[kTile][kTile + 1]; // +1: no bank conflicts
    for (int64_t by = blockIdx.y; by * kTile < rows; by += gridDim.y)
        for (int64_t bx = blockIdx.x; bx * kTile < cols; bx += gridDim.x) {
            int64_t x = bx * kTile + threadIdx.x;
            for (int j = threadIdx.y; j < kTile; j += kRows) {
                int64_t y = by * kTile + j;
                if (x < cols && y < rows)
                    tile[j][threadIdx.x] = src[y * cols + x];
            }
            __syncthreads();
            int64_t tx = by * kTile + threadIdx.x; // a column of dst: a row of src
            for (int j = threadIdx.y; j < kTile; j += kRows) {
                int64_t ty = bx * kTile + j;
                if (tx < rows && ty < cols)
                    dst[ty * rows + tx] = tile[threadIdx.x][j];
            }
            __syncthreads();
        }
}

cudaError_t launch(const dp__transpose_args *a, cudaStream_t stream)
{
    int64_t gx = (a->cols + kTile - 1) / kTile, gy = (a->rows + kTile - 1) / kTile;
    dim3 grid((unsigned)(gx < 65535 ? gx : 65535), (unsigned)(gy < 65535 ? gy : 65535));
    transpose_kernel<<<grid, dim3(kTile, kRows), 0, stream>>>(a->src, a->dst, a->rows, a->cols);
    return cudaGetLastError();
}

} // namespace

DP_CUDA_ENTRY(transpose, dp__transpose_args, launch)

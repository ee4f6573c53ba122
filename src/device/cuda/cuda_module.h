/* The CUDA backend as a module: libdptrain-cuda.so, built beside
 * libdptrain.so and installed with it, holds the backend (this folder but
 * cuda_api.c and cuda_host.c) and NCCL's allreduce (src/comm/nccl_launch.c),
 * with cudart, cuBLAS(Lt), cuDNN and NCCL as its own dependencies. The
 * library's stub (cuda_api.c) counts GPUs through the driver alone and
 * loads the module when the first GPU opens, so that a program that opens
 * none (dptrain --version, dptrain model, a CPU run) never maps those
 * libraries: 227 MB at rest with them linked, 10 MB without. */
#ifndef DP_DEVICE_CUDA_MODULE_H
#define DP_DEVICE_CUDA_MODULE_H

#include "device/device.h"

#define DP__CUDA_MODULE_FILE "libdptrain-cuda.so"

/* What the stub finds in the module, as the symbol dp__cuda_module_entry.
 * A module of another build of the library (its version or device table
 * differ) is refused, not called. */
typedef struct dp__cuda_module {
    char version[16];  /* DP_VERSION_STRING */
    size_t table_size; /* sizeof(dp__device_ops) */
    const dp__device_ops *ops;
    /* cudaGetDeviceProperties' name and memory of GPU `ordinal`. */
    int (*info)(int ordinal, char *name, size_t size, size_t *total_bytes);
} dp__cuda_module;

#endif

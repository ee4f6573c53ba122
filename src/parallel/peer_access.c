/* Which devices' kernels may read which devices' buffers, checked before
 * the allreduce algorithms that add another device's buffer into their own
 * in a kernel: naive and ring, and the first step of mpi (bufs[0] +=
 * bufs[i]).
 *
 * CPU devices share this process's memory. A GPU's kernels read its own
 * memory, that of every logical device on it included, and another GPU's
 * only where peer access was enabled when the device opened; without it the
 * read is an illegal address that kills the CUDA context mid-step, so it is
 * refused up front instead. A CPU device cannot read a GPU's memory, nor a
 * GPU kernel a CPU device's pageable memory. NCCL and copies between
 * devices (dp__copy_between) need none of this. The backend answers for
 * two of its own devices (the device table's can_read). */
#include "core/internal.h"
#include "parallel/allreduce.h"

static bool is_gpu(const dp_device_t *dev)
{
    return !dp_device_has(dev, DP_DEVICE_HOST_MEMORY);
}

int dp__check_kernel_read(const char *what, dp_device_t *reader, dp_device_t *owner)
{
    bool gpu_reader = is_gpu(reader), gpu_owner = is_gpu(owner);
    if (!gpu_reader && !gpu_owner)
        return 0;
    if (gpu_reader && gpu_owner && reader->ops == owner->ops && reader->ops->can_read) {
        if (reader->ops->can_read(reader, owner))
            return 0;
        DP_ERROR("%s: %s cannot read the memory of %s: the two GPUs have no peer access; the "
                 "nccl algorithm sums across them without it",
                 what, reader->name, owner->name);
        return DP_ENOTSUP;
    }
    DP_ERROR("%s: %s cannot read the memory of %s in a kernel (a CPU device and a GPU)", what,
             reader->name, owner->name);
    return DP_ENOTSUP;
}

"""nn.parallel.DistributedDataParallel over the library's MPI ranks: the
module's parameters broadcast from rank 0 when it is wrapped, and after each
backward its gradients averaged over the ranks in buckets of bucket_cap_mb,
taken in reverse parameter order (the order backward produces them), by the
library's bucketed allreduce."""

import _dptrain

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel:
    """Wraps `module` for training under mpirun, one process per rank, each
    on its share of every batch (PyTorch's DistributedDataParallel)."""

    def __init__(self, module, device_ids=None, bucket_cap_mb=25, broadcast_buffers=True,
                 **kwargs):
        from dptrain import distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialized; call dptrain.distributed.init_process_group(\"mpi\")")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, not {bucket_cap_mb}")
        self.module = module
        self.device_ids = device_ids
        self.bucket_cap_mb = bucket_cap_mb
        self._params = [p for p in module.parameters() if p.requires_grad]
        _dptrain.dist_broadcast_tensors(self._params)

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    forward = __call__

    def parameters(self, recurse=True):
        return self.module.parameters(recurse)

"""nn.parallel.DistributedDataParallel over the library's MPI ranks
(dp/dist.h), as PyTorch's: one process per rank under `mpirun -np P`, each
on its share of every batch.

- When the module is wrapped, its parameters and buffers are broadcast from
  rank 0, so that every rank starts from the same weights.
- After each backward that follows a forward of the wrapper, the gradients
  are averaged over the ranks in buckets: parameters taken in reverse order
  (the order backward produces them), the first bucket up to
  min(1, bucket_cap_mb) MiB and the others up to bucket_cap_mb MiB, a
  parameter larger than a bucket alone in its own, as PyTorch's reducer and
  the library's own buckets (DataParallel's bucket_mb) cut them. Each bucket
  is one collective of the library (_dptrain.dist_collective: one
  MPI_Allreduce over the bucket's gradients, then divided by the ranks).

An element's average is the same whichever bucket holds it, so any
bucket_cap_mb gives the same bits; 2 ranks on halves of a batch give the
gradients of one process on the whole batch, to rounding."""

import weakref

import _dptrain
from dptrain.nn import Module

__all__ = ["DistributedDataParallel"]

_MIB = 1 << 20
# The wrappers whose module ran a forward since their last reduction.
_pending = weakref.WeakSet()


def _reduce_pending():
    """After a backward: every wrapper that ran a forward averages its
    gradients over the ranks."""
    for ddp in list(_pending):
        _pending.discard(ddp)
        ddp._reduce_gradients()


def _install_backward_hook():
    """Tensor.backward() then _reduce_pending(), installed once: PyTorch's
    reducer hooks the autograd engine; dptrain's backward is one call."""
    import dptrain
    tensor_class = dptrain.Tensor
    if getattr(tensor_class.backward, "_reduces_ddp", False):
        return
    backward = tensor_class.backward

    def backward_then_reduce(self, *args, **kwargs):
        result = backward(self, *args, **kwargs)
        _reduce_pending()
        return result

    backward_then_reduce._reduces_ddp = True
    backward_then_reduce.__doc__ = backward.__doc__
    tensor_class.backward = backward_then_reduce


def _buckets(params, bucket_cap_mb):
    """Indices into params, bucket by bucket, in reverse parameter order."""
    buckets, current, size = [], [], 0
    cap = min(1.0, bucket_cap_mb) * _MIB
    for i in reversed(range(len(params))):
        nbytes = params[i].numel() * 4
        if current and size + nbytes > cap:
            buckets.append(current)
            current, size = [], 0
            cap = bucket_cap_mb * _MIB
        current.append(i)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


class DistributedDataParallel(Module):
    """Wraps `module` for data-parallel training over the ranks of mpirun.

    device_ids: None, or a list of one device: this rank's (dptrain's
    device convention; the module must already be there). bucket_cap_mb:
    the gradient buckets' size in MiB (PyTorch's default, 25)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, bucket_cap_mb=25, find_unused_parameters=False,
                 **kwargs):
        super().__init__()
        from dptrain import distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("DistributedDataParallel: the default process group is not "
                               "initialized; call dptrain.distributed.init_process_group(\"mpi\")")
        if not isinstance(module, Module):
            raise TypeError("DistributedDataParallel: module must be a dptrain.nn.Module, not "
                            f"{type(module).__name__}")
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)) \
                or not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be a number above 0, "
                             f"not {bucket_cap_mb!r}")
        if device_ids is not None and len(device_ids) != 1:
            raise ValueError("DistributedDataParallel: device_ids must name one device (this "
                             f"rank's), not {len(device_ids)}")
        if dim != 0:
            raise ValueError("DistributedDataParallel: dim must be 0 (the batch dimension)")
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else None
        self.bucket_cap_mb = bucket_cap_mb
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self._sync = True
        params = [p for p in module.parameters() if p.requires_grad]
        if not params:
            raise ValueError("DistributedDataParallel: the module has no parameter that "
                             "requires a gradient")
        import dptrain
        buffers = [b for b in (module.buffers() if hasattr(module, "buffers") else ())
                   if b.dtype == dptrain.float32]
        # Every rank starts from rank 0's weights (and running statistics).
        _dptrain.dist_collective(params + buffers, "broadcast")
        self._params = params
        self._bucket_indices = _buckets(params, bucket_cap_mb)
        _install_backward_hook()

    @property
    def bucket_indices(self):
        """The buckets as lists of parameter indices, in the order they are
        reduced (reverse parameter order)."""
        return [list(b) for b in self._bucket_indices]

    def forward(self, *inputs, **kwargs):
        if self._sync and self.training:
            _pending.add(self)
        return self.module(*inputs, **kwargs)

    def no_sync(self):
        """A context in which backward accumulates gradients locally, not
        averaged over the ranks (gradient accumulation), as PyTorch's."""
        ddp = self

        class _NoSync:
            def __enter__(self):
                ddp._sync = False

            def __exit__(self, *exc):
                ddp._sync = True

        return _NoSync()

    def _reduce_gradients(self):
        for bucket in self._bucket_indices:
            grads = []
            for i in bucket:
                grad = self._params[i].grad
                if grad is None:
                    raise RuntimeError(
                        f"DistributedDataParallel: parameter {i} got no gradient in this "
                        "backward; every parameter must take part in the loss on every rank")
                grads.append(grad)
            _dptrain.dist_collective(grads, "mean")

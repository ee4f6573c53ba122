"""nn.parallel: scatter and gather (torch.chunk's sizes), replicate,
DataParallel, and DistributedDataParallel under mpirun."""

from .scatter_gather import scatter, scatter_kwargs, gather
from .data_parallel import DataParallel, replicate, parallel_apply, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["scatter", "scatter_kwargs", "gather", "replicate", "parallel_apply", "data_parallel",
           "DataParallel", "DistributedDataParallel"]

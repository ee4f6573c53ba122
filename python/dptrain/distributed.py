"""dptrain.distributed: PyTorch's process-group calls over the library's MPI
ranks (dp/dist.h). Under `mpirun -np P python3 script.py` each process is
one rank; without mpirun there is one rank, rank 0 of 1."""

import atexit

import _dptrain

__all__ = ["init_process_group", "destroy_process_group", "is_initialized",
           "is_available", "get_rank", "get_world_size", "barrier"]

_initialized = False
# MPI starts once per process: after destroy_process_group it cannot again.
_destroyed = False


def is_available():
    """Whether the library was built with MPI."""
    return _dptrain.dist_built()


def init_process_group(backend="mpi", init_method=None, world_size=-1, rank=-1, **kwargs):
    """Starts the process group (MPI_Init_thread under mpirun; without
    mpirun, one rank: rank 0 of 1). Only `backend="mpi"` exists: the ranks
    are mpirun's, so world_size and rank, if given, must agree with it."""
    global _initialized
    if backend != "mpi":
        raise ValueError(f"init_process_group: backend {backend!r} is not available; "
                         "dptrain has \"mpi\" (run under mpirun)")
    if _initialized:
        raise RuntimeError("init_process_group: the default process group is already initialized")
    if _destroyed:
        raise RuntimeError("init_process_group: the process group was destroyed; MPI starts "
                           "only once per process")
    _dptrain.dist_init()
    if world_size not in (-1, None) and world_size != _dptrain.dist_size():
        raise ValueError(f"init_process_group: world_size={world_size} but mpirun started "
                         f"{_dptrain.dist_size()} ranks")
    if rank not in (-1, None) and rank != _dptrain.dist_rank():
        raise ValueError(f"init_process_group: rank={rank} but this process is rank "
                         f"{_dptrain.dist_rank()}")
    _initialized = True
    atexit.register(_finalize_at_exit)


def _finalize_at_exit():
    """MPI_Finalize for a script that never called destroy_process_group, as
    PyTorch's scripts often do not: mpirun counts a rank that exits without
    it as failed."""
    if _initialized:
        destroy_process_group()


def is_initialized():
    return _initialized


def _require(what):
    if not _initialized:
        raise RuntimeError(f"{what}: the default process group is not initialized; "
                           "call dptrain.distributed.init_process_group(\"mpi\") first")


def get_rank():
    _require("get_rank")
    return _dptrain.dist_rank()


def get_world_size():
    _require("get_world_size")
    return _dptrain.dist_size()


def barrier():
    _require("barrier")
    _dptrain.dist_barrier()


def destroy_process_group():
    """Ends the process group (MPI_Finalize): no other MPI call may follow
    in this process, as with MPI itself."""
    global _initialized, _destroyed
    _require("destroy_process_group")
    _dptrain.dist_finalize()
    _initialized = False
    _destroyed = True
# MPI starts once per process: after destroy_process_group it cannot again.
_destroyed = False

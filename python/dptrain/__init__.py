"""dptrain: data-parallel training over CPU cores, GPUs and MPI ranks, with
PyTorch's names, so that `import dptrain as torch` runs d2l's "Multiple
GPUs" chapters and PyTorch's DataParallel tutorial.

Every op enqueues its work on its tensors' device and returns at once;
`numpy()`, `item()`, `float()`, `print`, `wait_to_read()`, `waitall()` and
`cuda.synchronize()` wait for the values (docs/python.md). "cuda:i" is
dptrain's device i: GPU i, or the CPU device cpu:i on a machine without
GPUs (docs/python-internals.md, "The one device convention")."""

import _dptrain

from ._dtype import dtype, float32, int32, bfloat16
from ._device import device
from ._tensor import Tensor, Size
from ._creation import (tensor, from_numpy, as_tensor, zeros, ones, full, empty, zeros_like,
                        ones_like, full_like, empty_like, arange, randn, rand, normal, randn_like,
                        rand_like, manual_seed, initial_seed, seed, randperm)
from ._random import Generator, default_generator, get_rng_state, set_rng_state
from ._grad_mode import (no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                         autocast, get_precision)
from ._serialization import save, load
from ._functions import (cat, concat, stack, chunk, split, mm, matmul, argmax, max, min, sum, mean,
                         flatten,
                         reshape, relu, sigmoid, tanh, softmax, log_softmax, t, transpose, eq,
                         numel, is_tensor, from_dlpack, waitall)

_dptrain._set_tensor_class(Tensor)

# PyTorch's other names of the three dtypes. int64 is int32: dptrain's
# integer type (labels, argmax, comparisons) is int32; `bool` (what `==`
# gives) is int32 0/1 too. float64 data is held as float32, as PyTorch's
# default dtype holds Python floats.
float = float32
int = int32
long = int32
int64 = int32
bool = int32
float64 = float32
double = float32

from . import cuda  # noqa: E402
from . import nn  # noqa: E402
from . import optim  # noqa: E402
from . import utils  # noqa: E402
from . import distributed  # noqa: E402
from . import backends  # noqa: E402
from ._train import train  # noqa: E402

__version__ = getattr(_dptrain, "__version__", "0.1.0")


def __getattr__(name):
    # The chapters' helpers load on first use: d2l imports matplotlib, vision
    # reads datasets.
    if name in ("d2l", "nd", "vision", "datasets"):
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'dptrain' has no attribute '{name}'")

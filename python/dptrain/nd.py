"""dptrain.nd: MXNet's NDArray names that d2l's MXNet edition (seed 002)
uses, over dptrain's tensors: `nd.ones`, `nd.zeros`, `nd.array`,
`nd.arange`, `nd.random.normal/uniform`, `nd.dot`, `nd.relu`,
`nd.flatten`, `nd.waitall`. An NDArray's `wait_to_read()` is
Tensor.wait_to_read (MXNet's name already)."""

import types

import numpy as np

from . import _creation
from . import _functions
from ._tensor import Tensor

__all__ = ["ones", "zeros", "array", "arange", "dot", "relu", "flatten", "waitall", "random",
           "NDArray"]

NDArray = Tensor


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _device(ctx):
    return None if ctx is None else ctx


def ones(shape, ctx=None, dtype=None):
    return _creation.ones(_shape(shape), dtype=dtype, device=_device(ctx))


def zeros(shape, ctx=None, dtype=None):
    return _creation.zeros(_shape(shape), dtype=dtype, device=_device(ctx))


def array(source_array, ctx=None, dtype=None):
    """MXNet's nd.array: float32 unless dtype says otherwise."""
    values = np.asarray(source_array)
    if dtype is None:
        values = values.astype(np.float32)
    return _creation.tensor(values, dtype=dtype, device=_device(ctx))


def arange(start, stop=None, step=1.0, ctx=None, dtype=None):
    """MXNet's nd.arange: float32 by default."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return _creation.tensor(values.astype(np.float32), dtype=dtype, device=_device(ctx))


def dot(lhs, rhs):
    return _functions.mm(lhs, rhs)


def relu(data):
    return _functions.relu(data)


def flatten(data):
    return data.flatten(1)


def waitall():
    _functions.waitall()


def _normal(loc=0.0, scale=1.0, shape=(1,), ctx=None, dtype=None):
    return _creation.normal(float(loc), float(scale), _shape(shape), device=_device(ctx))


def _uniform(low=0.0, high=1.0, shape=(1,), ctx=None, dtype=None):
    from ._grad_mode import no_grad
    with no_grad():
        return _creation.rand(_shape(shape), device=_device(ctx)) * float(high - low) + float(low)


random = types.SimpleNamespace(normal=_normal, uniform=_uniform)

"""Tensor.max() / min() over the library's global max pooling.

The library has no max reduction along a dimension; dp_global_max_pool2d
takes the max over (H, W) of (N, C, H, W), its gradient to the first
maximum. So the max over every element is the pool of (1, 1, 1, numel),
and the max along the last dimension (or any dimension whose later ones
all have size 1, or either dimension of a matrix, by a transpose) is the
pool of (rows, 1, 1, size). min(x) is -max(-x) (negation is exact). The
indices are argmax's (of -x for min): the first extreme, int32."""

import collections
import math

import _dptrain

_C = _dptrain.Tensor

# torch.return_types.max / min: a tuple with .values and .indices.
max_result = collections.namedtuple("max", ["values", "indices"])
min_result = collections.namedtuple("min", ["values", "indices"])


def _pool_rows(y, rows, size):
    """The max of each of `rows` runs of `size` elements of y, (rows, 1, 1, 1)."""
    return _dptrain.global_max_pool2d(_C.reshape(y, (rows, 1, 1, size)))


def extreme(x, dim, keepdim, func):
    """max (func "max") or min of x over every element (dim None: a 0-d
    tensor) or along dim (a (values, indices) pair, dim kept as size 1
    with keepdim), as torch."""
    shape = tuple(_C.shape.__get__(x))
    dtype = _C.dtype.__get__(x)
    numel = math.prod(shape)
    if dtype == "int32":
        raise NotImplementedError(f"{func}(): of an int32 tensor: dptrain's max kernel takes "
                                  f"floats (argmax() takes int32; or convert with .float())")
    if numel == 0:
        raise RuntimeError(f"{func}(): the {func} of an empty tensor {list(shape)} is undefined")
    y = x if dtype == "float32" else _C.cast(x, "float32")  # bf16 values are float32's
    if func == "min":
        y = -y
    if dim is None:
        v = _C.reshape(_pool_rows(y, 1, numel), ())
        indices = None
    else:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"{func}(): dim must be an int, not {type(dim).__name__}")
        nd = len(shape)
        d = dim + max(nd, 1) if dim < 0 else dim
        if not 0 <= d < max(nd, 1):
            raise IndexError(f"{func}(): dimension {dim} out of range for a {nd}-d tensor")
        if nd == 0:
            index = _dptrain.full((), 0, "int32", _C.device.__get__(x))
            return (max_result if func == "max" else min_result)(x, index)
        rows = math.prod(shape[:d])
        if all(s == 1 for s in shape[d + 1:]):
            v = _pool_rows(y, rows, shape[d])
        elif nd == 2 and d == 0:
            v = _pool_rows(y.t(), shape[1], shape[0])
        else:
            raise NotImplementedError(
                f"{func}(dim={dim}) of a {nd}-d tensor {list(shape)}: dptrain reduces the last "
                f"dimension (or either of a matrix); {func}() over every element and "
                f"argmax(dim=) work on any shape")
        out = shape[:d] + ((1,) if keepdim else ()) + shape[d + 1:]
        v = _C.reshape(v, out)
        indices = _C.argmax(y, d, keepdim)
    if func == "min":
        v = -v
    if dtype != "float32":
        v = _C.cast(v, dtype)
    if indices is None:
        return v
    return (max_result if func == "max" else min_result)(v, indices)

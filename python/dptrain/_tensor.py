"""dptrain.Tensor: `_dptrain.Tensor` (the extension's tensor over
dp_tensor_t: storage, ops, autograd, waits) with PyTorch's Python-level
surface: `Size` shapes, dtype and device objects, row indexing, `[:] =`,
conversions to NumPy and Python numbers, and printing as PyTorch prints.

Everything that reads values (`numpy()`, `item()`, `float()`, `print`)
waits for the commands that write them, with the GIL released."""

import numpy as np

import _dptrain

from . import _dtype, _reduce
from ._device import as_device, device_of_name, host_device
from ._tensor_str import tensor_repr

__all__ = ["Tensor", "Size"]

_C = _dptrain.Tensor
# The extension's attributes, which the properties below present as
# PyTorch's objects (the strings "float32", "cpu:0" and plain tuples).
_c_dtype = _C.dtype
_c_device = _C.device
_c_shape = _C.shape


class Size(tuple):
    """A tensor's shape: a tuple that prints as `dptrain.Size([15, 5])`."""

    def __repr__(self):
        return f"dptrain.Size([{', '.join(str(d) for d in self)}])"

    __str__ = __repr__

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n

    def __getitem__(self, i):
        got = tuple.__getitem__(self, i)
        return Size(got) if isinstance(i, slice) else got


def _resolve_shape(args, numel, func):
    """A shape from reshape's forms (reshape(2, -1), reshape((2, -1))), -1
    resolved from the element count."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    shape = []
    infer = None
    for i, d in enumerate(args):
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{func}(): shape must be ints, not {type(d).__name__} at position {i}")
        if d == -1:
            if infer is not None:
                raise RuntimeError(f"{func}(): only one dimension can be inferred")
            infer = i
        elif d < 0:
            raise RuntimeError(f"{func}(): invalid shape dimension {d}")
        shape.append(d)
    if infer is not None:
        known = 1
        for i, d in enumerate(shape):
            if i != infer:
                known *= d
        if known == 0 or numel % known:
            raise RuntimeError(f"{func}(): shape '{list(args)}' is invalid for input of size "
                               f"{numel}")
        shape[infer] = numel // known
    return tuple(shape)


def _dim_arg(dim, axis, func):
    """PyTorch's `dim=`, or NumPy's `axis=` which PyTorch also takes."""
    if dim is not None and axis is not None:
        raise TypeError(f"{func}(): give dim or axis, not both")
    return axis if dim is None else dim


class Tensor(_C):
    """A tensor on one of dptrain's devices (float32, int32 or bfloat16, up
    to 4 dimensions). Ops enqueue on the tensor's device and return at once."""

    # ---- what the tensor is ------------------------------------------------
    @property
    def shape(self):
        return Size(_c_shape.__get__(self))

    def size(self, dim=None):
        shape = _c_shape.__get__(self)
        if dim is None:
            return Size(shape)
        if not -len(shape) <= dim < len(shape):
            raise IndexError(f"size(): dimension {dim} out of range for a {len(shape)}-d tensor")
        return shape[dim]

    def dim(self):
        return self.ndim

    @property
    def dtype(self):
        return _dtype.from_name(_c_dtype.__get__(self))

    @property
    def device(self):
        return device_of_name(_c_device.__get__(self))

    @property
    def is_cuda(self):
        return _c_device.__get__(self).startswith("cuda")

    def is_floating_point(self):
        return self.dtype.is_floating_point

    @property
    def data(self):
        return self.detach()

    @property
    def T(self):
        return self.t()

    def __len__(self):
        shape = _c_shape.__get__(self)
        if not shape:
            raise TypeError("len() of a 0-d tensor")
        return shape[0]

    def __hash__(self):
        return id(self)

    # ---- rows: indexing and [:] assignment ----------------------------------
    def __getitem__(self, index):
        shape = _c_shape.__get__(self)
        if index is Ellipsis:
            return self
        if isinstance(index, slice):
            if index == slice(None):
                return self
            if not shape:
                raise IndexError("slice of a 0-d tensor")
            start, stop, step = index.indices(shape[0])
            if step != 1:
                raise ValueError(f"tensor indexing: only row slices with step 1 are supported "
                                 f"(rows {index.start}:{index.stop}:{index.step})")
            return self.rows(start, max(start, stop))
        if isinstance(index, int) and not isinstance(index, bool) or hasattr(index, "__index__") \
                and not isinstance(index, (_C, bool)):
            i = index.__index__()
            if not shape:
                raise IndexError("invalid index of a 0-d tensor")
            if not -shape[0] <= i < shape[0]:
                raise IndexError(f"index {i} is out of bounds for dimension 0 with size {shape[0]}")
            if i < 0:
                i += shape[0]
            # Row i without its dimension: an element of a vector is 0-d.
            return _C.reshape(self.rows(i, i + 1), tuple(shape[1:]))
        raise TypeError(f"tensor indexing: only an int, a row slice (a:b) or [:] are supported, "
                        f"not {type(index).__name__}")

    def __setitem__(self, index, value):
        if not (index is Ellipsis or index == slice(None)):
            raise TypeError(f"tensor assignment: only t[:] = value is supported, not t[{index!r}]")
        if isinstance(value, _C):
            if value is not self:
                self.copy_(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            self.fill_(float(value))
        else:
            self.copy_(_from_data(value, self.dtype, _c_device.__get__(self)))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # ---- shapes -------------------------------------------------------------
    def reshape(self, *shape):
        return _C.reshape(self, _resolve_shape(shape, self.numel(), "reshape"))

    view = reshape

    def flatten(self, start_dim=0, end_dim=-1):
        shape = _c_shape.__get__(self)
        if not shape:
            return _C.reshape(self, (1,))
        n = len(shape)
        s, e = start_dim % n, end_dim % n
        middle = 1
        for d in shape[s:e + 1]:
            middle *= d
        return _C.reshape(self, tuple(shape[:s]) + (middle,) + tuple(shape[e + 1:]))

    def unsqueeze(self, dim):
        shape = list(_c_shape.__get__(self))
        shape.insert(dim if dim >= 0 else dim + len(shape) + 1, 1)
        return _C.reshape(self, tuple(shape))

    def squeeze(self, dim=None):
        shape = _c_shape.__get__(self)
        if dim is None:
            return _C.reshape(self, tuple(d for d in shape if d != 1))
        dim %= max(len(shape), 1)
        if shape and shape[dim] == 1:
            return _C.reshape(self, tuple(shape[:dim]) + tuple(shape[dim + 1:]))
        return self

    # ---- reductions, with PyTorch's dim= and NumPy's axis= ----------------
    def sum(self, dim=None, keepdim=False, *, axis=None, dtype=None):
        out = _C.sum(self, _dim_arg(dim, axis, "sum"), keepdim)
        return out if dtype is None else out.type(dtype)

    def mean(self, dim=None, keepdim=False, *, axis=None, dtype=None):
        if dtype is None and _c_dtype.__get__(self) == "int32":
            raise TypeError("mean(): the mean of an int32 tensor is not an int32: convert it "
                            "with .float() first (or pass dtype=dptrain.float32)")
        if dtype is not None:
            return self.type(dtype).mean(dim, keepdim, axis=axis)
        out = _C.mean(self, _dim_arg(dim, axis, "mean"), keepdim)
        return out if dtype is None else out.type(dtype)

    def argmax(self, dim=None, keepdim=False, *, axis=None):
        return _C.argmax(self, _dim_arg(dim, axis, "argmax"), keepdim)

    def max(self, dim=None, keepdim=False):
        return _reduce.extreme(self, dim, keepdim, "max")

    def min(self, dim=None, keepdim=False):
        return _reduce.extreme(self, dim, keepdim, "min")

    def __eq__(self, other):
        return self.eq(other)

    def mm(self, other):
        return _dptrain.mm(self, other)

    def matmul(self, other):
        return self @ other

    # ---- dtypes and devices ---------------------------------------------
    def type(self, dtype=None, non_blocking=False):
        if dtype is None:
            return {"float32": "dptrain.FloatTensor", "int32": "dptrain.IntTensor",
                    "bfloat16": "dptrain.BFloat16Tensor"}[_c_dtype.__get__(self)]
        return self.cast(_dtype.as_dtype(dtype, "type").name)

    def float(self):
        return self.cast("float32")

    def int(self):
        return self.cast("int32")

    long = int

    def bfloat16(self):
        return self.cast("bfloat16")

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype), to(other): PyTorch's forms."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("copy", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, _C):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _dtype.dtype) or a in (float, int):
                dtype = a
            elif isinstance(a, bool):
                continue  # non_blocking given by position
            else:
                device = a
        out = self
        if dtype is not None:
            out = out.cast(_dtype.as_dtype(dtype, "to").name)
        if device is not None:
            out = _C.to(out, as_device(device, "to"))
        return out

    def cuda(self, device=None, non_blocking=False):
        return _C.to(self, as_device(0 if device is None else device, "cuda"))

    def cpu(self):
        return _C.to(self, host_device())

    # ---- values on the host (each waits) ------------------------------------
    def numpy(self, force=False):
        """The values as a NumPy array: sharing the memory of a tensor on a
        CPU device (as PyTorch's numpy()), a copy from a GPU; bf16 as float32.
        A tensor that requires grad refuses, as PyTorch's (force=True reads
        a detached copy)."""
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return self._host_array()

    def _host_array(self):
        """numpy()'s values without its grad check (printing, __array__)."""
        t = self.detach() if self.requires_grad else self
        if t.dtype is _dtype.bfloat16:
            t = t.cast("float32")
        if not _c_device.__get__(t).startswith("cpu"):
            t = _C.to(t, host_device())
        t.wait_to_read()
        return np.from_dlpack(t)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()  # PyTorch's __array__ refuses a tensor requiring grad too
        return a if dtype is None else a.astype(dtype, copy=False)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __format__(self, spec):
        if self.ndim == 0 or self.numel() == 1 and spec:
            return format(self.item(), spec)
        return format(str(self), spec)

    def __repr__(self):
        suffixes = []
        name = _c_device.__get__(self)
        if name != host_device():
            suffixes.append(f"device='{name}'")
        if self.dtype is _dtype.bfloat16:
            suffixes.append("dtype=dptrain.bfloat16")
        if self.requires_grad:
            suffixes.append("requires_grad=True" if self.is_leaf else "grad_fn=<Backward>")
        values = self._host_array()
        return tensor_repr(values, values.dtype.kind == "f", suffixes)

    __str__ = __repr__



def _from_data(data, dtype, device):
    """A tensor holding a copy of `data` (nested lists, numbers, NumPy
    arrays, anything with __array__)."""
    from ._creation import tensor
    return tensor(data, dtype=dtype, device=device)

"""Making tensors: from data (`tensor`, `from_numpy`, `as_tensor`), filled
(`zeros`, `ones`, `full`, `arange`) and random (`randn`, `rand`, `normal`),
with PyTorch's signatures (`randn(2, 3)`, `randn((2, 3))`, `randn(size=(2,
3))`).

Random numbers come from PyTorch's CPU generator (_random.py): a script
seeded with `manual_seed(s)` draws the numbers PyTorch draws for s, made on
the host and copied to the device."""

import numpy as np

import _dptrain

from . import _dtype
from ._device import as_device, host_device
from ._random import manual_seed, initial_seed, seed, next_seed, _gen

__all__ = ["tensor", "from_numpy", "as_tensor", "zeros", "ones", "full", "empty", "zeros_like",
           "ones_like", "full_like", "empty_like", "arange", "randn", "rand", "normal",
           "randn_like", "rand_like", "manual_seed", "initial_seed", "seed", "next_seed",
           "randperm"]

def _size(args, kw, func):
    """The shape from randn(2, 3), randn((2, 3)), randn([2, 3]) or size=
    (kw: the call's other keyword arguments, which must be only size=)."""
    size = kw.pop("size", None)
    if kw:
        raise TypeError(f"{func}() got an unexpected keyword argument '{next(iter(kw))}'")
    if size is not None:
        if args:
            raise TypeError(f"{func}(): give the size as positional ints or as size=, not both")
        args = (size,)
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    for d in args:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"{func}(): size must be ints, not {type(d).__name__}")
        if d < 0:
            raise ValueError(f"{func}(): size must be >= 0, got {list(args)}")
    return tuple(args)


def _device_name(device, func):
    return host_device() if device is None else as_device(device, func)


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_()
    return t


def _array(data, func):
    """NumPy's view of `data` in one of the library's element types."""
    if isinstance(data, _dptrain.Tensor):
        return data._host_array()
    a = np.asarray(data)
    if a.dtype == object:
        raise TypeError(f"{func}(): could not make a tensor of {type(data).__name__} data")
    if a.dtype.kind == "f":
        return a.astype(np.float32, copy=False)
    if a.dtype.kind in "iub":
        if a.size and (a.max() > 2**31 - 1 or a.min() < -2**31):
            raise ValueError(f"{func}(): integer data out of int32's range (dptrain's integer "
                             f"type is int32)")
        return a.astype(np.int32, copy=False)
    raise TypeError(f"{func}(): data of NumPy dtype {a.dtype} has no dptrain dtype")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`: Python floats give float32,
    ints and bools int32 (PyTorch's int64), NumPy arrays their own type."""
    a = _array(data, "tensor")
    want = _dtype.as_dtype(dtype, "tensor") if dtype is not None else (
        _dtype.float32 if a.dtype == np.float32 else _dtype.int32)
    if len(a.shape) > 4:
        raise ValueError(f"tensor(): {a.ndim} dimensions; dptrain's tensors have at most 4")
    host = a.astype(np.int32 if want is _dtype.int32 else np.float32, copy=False)
    host = np.ascontiguousarray(host).reshape(a.shape)  # 0-d stays 0-d: tensor(3.0) is ()
    t = _dptrain.from_bytes(host.tobytes(), host.shape, "int32" if want is _dtype.int32 else
                            "float32", _device_name(device, "tensor"))
    if want is _dtype.bfloat16:
        t = t.cast("bfloat16")
    return _finish(t, requires_grad)


def from_numpy(array):
    """A tensor sharing `array`'s memory (float32 or int32, C-contiguous), as
    torch.from_numpy: a write through one is read through the other. Other
    NumPy types are copied into float32 or int32."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy(): expected np.ndarray, got {type(array).__name__}")
    if array.dtype in (np.float32, np.int32) and array.flags.c_contiguous and array.ndim <= 4:
        return _dptrain.from_dlpack(array)
    return tensor(array)


def as_tensor(data, dtype=None, device=None):
    """`data` itself when it is a tensor of that dtype and device; a NumPy
    array's memory where from_numpy shares it; else a copy."""
    if isinstance(data, _dptrain.Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and dtype is None and device is None:
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    size = _size((size,) if isinstance(size, int) else tuple(size), {}, "full")
    if dtype is None:
        dtype = _dtype.int32 if isinstance(fill_value, int) and not isinstance(fill_value, bool) \
            else _dtype.float32
    name = _dtype.as_dtype(dtype, "full").name
    t = _dptrain.full(size, float(fill_value), "float32" if name == "bfloat16" else name,
                      _device_name(device, "full"))
    if name == "bfloat16":
        t = t.cast("bfloat16")
    return _finish(t, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size(size, kw, "zeros")
    return full(shape, 0.0, dtype=dtype or _dtype.float32, device=device,
                requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size(size, kw, "ones")
    return full(shape, 1.0, dtype=dtype or _dtype.float32, device=device,
                requires_grad=requires_grad)


empty = zeros


def zeros_like(t, dtype=None, device=None, requires_grad=False):
    return full(tuple(t.shape), 0.0, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def ones_like(t, dtype=None, device=None, requires_grad=False):
    return full(tuple(t.shape), 1.0, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    return full(tuple(t.shape), fill_value, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


empty_like = zeros_like


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, step)
    return tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _random(draw, size, dtype, device, requires_grad, func):
    """A float32 tensor of `size` from draw(n) -> n float32 as bytes, then
    cast to dtype (bf16 draws are float32 draws rounded: PyTorch draws bf16
    by another kernel, so those differ from PyTorch's)."""
    if dtype is not None and _dtype.as_dtype(dtype, func) is _dtype.int32:
        raise TypeError(f"{func}(): random numbers are floating point, not int32")
    name = _device_name(device, func)
    n = 1
    for d in size:
        n *= d
    t = _dptrain.from_bytes(draw(n), size, "float32", name)
    if dtype is not None and _dtype.as_dtype(dtype, func) is not _dtype.float32:
        t = t.cast("bfloat16")
    return _finish(t, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """Standard normal numbers: torch.randn's for the same generator state."""
    rng = _gen(generator, "randn")._rng
    return _random(lambda n: rng.normal(n, 0.0, 1.0), _size(size, kw, "randn"), dtype,
                   device, requires_grad, "randn")


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **kw):
    """Uniform numbers in [0, 1): torch.rand's for the same generator state."""
    rng = _gen(generator, "rand")._rng
    return _random(lambda n: rng.uniform(n, 0.0, 1.0), _size(size, kw, "rand"), dtype,
                   device, requires_grad, "rand")


def uniform(low, high, size, *, generator=None, dtype=None, device=None):
    """U[low, high) numbers, as torch.empty(size).uniform_(low, high)."""
    rng = _gen(generator, "uniform_")._rng
    return _random(lambda n: rng.uniform(n, float(low), float(high)), tuple(size), dtype,
                   device, False, "uniform_")


def randn_like(t, dtype=None, device=None, requires_grad=False):
    return randn(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device,
                 requires_grad=requires_grad)


def rand_like(t, dtype=None, device=None, requires_grad=False):
    return rand(tuple(t.shape), dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """normal(mean, std, size): N(mean, std^2) numbers of float mean and std,
    as torch.normal's (and Tensor.normal_'s)."""
    if size is None:
        raise TypeError("normal(): give size= (tensor means and stds are not supported)")
    if not isinstance(std, (int, float)) or std < 0:
        raise ValueError(f"normal(): std must be a number >= 0, not {std!r}")
    rng = _gen(generator, "normal")._rng
    return _random(lambda n: rng.normal(n, float(mean), float(std)), _size((size,), {}, "normal"),
                   dtype, device, requires_grad, "normal")


def randperm(n, *, generator=None, dtype=None, device=None):
    """A permutation of 0 .. n-1: torch.randperm's for the same generator
    state (int32, dptrain's integer type)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"randperm(): n must be an int >= 0, not {n!r}")
    order = np.frombuffer(_gen(generator, "randperm")._rng.randperm(n), np.int64)
    return tensor(order.astype(np.int32), dtype=dtype, device=device)

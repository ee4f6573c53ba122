"""The tensor functions of PyTorch's top-level namespace (torch.cat,
torch.mm, torch.argmax, ...) over the extension's ops."""

import builtins

import _dptrain

__all__ = ["cat", "concat", "stack", "chunk", "split", "mm", "matmul", "argmax", "max", "min",
           "sum", "mean",
           "flatten", "reshape", "relu", "sigmoid", "tanh", "softmax", "log_softmax", "t",
           "transpose", "eq", "numel", "is_tensor", "from_dlpack", "waitall", "chunk_sizes"]


def _tensor_arg(x, func, arg="input"):
    if not isinstance(x, _dptrain.Tensor):
        raise TypeError(f"{func}(): argument '{arg}' must be Tensor, not {type(x).__name__}")
    return x


def _tensors_arg(xs, func):
    if isinstance(xs, _dptrain.Tensor) or not isinstance(xs, (list, tuple)):
        raise TypeError(f"{func}(): argument 'tensors' must be a tuple or list of Tensors, not "
                        f"{type(xs).__name__}")
    if not xs:
        raise ValueError(f"{func}(): expected a non-empty list of Tensors")
    for i, x in enumerate(xs):
        _tensor_arg(x, func, f"tensors[{i}]")
    return list(xs)


def cat(tensors, dim=0, *, axis=None):
    """Concatenates along dim 0 (rows) or 1 (channels), on the first
    tensor's device."""
    dim = dim if axis is None else axis
    xs = _tensors_arg(tensors, "cat")
    return _dptrain.cat(xs, dim)


concat = cat


def stack(tensors, dim=0):
    """torch.stack along dim 0: each tensor gets a leading axis of 1, then cat."""
    xs = _tensors_arg(tensors, "stack")
    if dim != 0:
        raise ValueError(f"stack(): only dim=0 is supported, not {dim}")
    return _dptrain.cat([x.reshape((1,) + tuple(x.shape)) for x in xs], 0)


def chunk_sizes(n, chunks):
    """torch.chunk's sizes of n rows in `chunks` pieces: ceil(n / chunks)
    each, the last what is left, and fewer pieces when rows run out."""
    if chunks <= 0:
        raise ValueError(f"chunk(): chunks must be > 0, not {chunks}")
    step = -(-n // chunks) if n else 0
    sizes = []
    left = n
    while left > 0:
        sizes.append(builtins.min(step, left))
        left -= step
    return sizes or [0]


def chunk(input, chunks, dim=0):
    """torch.chunk along rows: `chunks` views of ceil(n / chunks) rows."""
    x = _tensor_arg(input, "chunk")
    if dim != 0:
        raise ValueError(f"chunk(): only dim=0 (rows) is supported, not {dim}")
    if isinstance(chunks, builtins.bool) or not isinstance(chunks, builtins.int):
        raise TypeError(f"chunk(): chunks must be an int, not {type(chunks).__name__}")
    out, start = [], 0
    for size in chunk_sizes(len(x), chunks):
        out.append(x.rows(start, start + size))
        start += size
    return tuple(out)


def split(tensor, split_size_or_sections, dim=0):
    """torch.split along rows: pieces of split_size rows, or of the sizes given."""
    x = _tensor_arg(tensor, "split")
    if dim != 0:
        raise ValueError(f"split(): only dim=0 (rows) is supported, not {dim}")
    n = len(x)
    if isinstance(split_size_or_sections, builtins.int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split(): split_size must be > 0, not {step}")
        sizes = [builtins.min(step, n - s) for s in range(0, n, step)]
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise ValueError(f"split(): sizes {sizes} do not sum to the {n} rows")
    out, start = [], 0
    for size in sizes:
        out.append(x.rows(start, start + size))
        start += size
    return tuple(out)


def mm(input, mat2):
    """(N, K) @ (K, M), in floats."""
    a, b = _tensor_arg(input, "mm"), _tensor_arg(mat2, "mm", "mat2")
    for name, x in (("input", a), ("mat2", b)):
        if _dptrain.Tensor.dtype.__get__(x) == "int32":
            raise TypeError(f"mm(): argument '{name}' must be a float tensor, not int32: convert "
                            f"it with .float()")
    return _dptrain.mm(a, b)


def matmul(input, other):
    return _tensor_arg(input, "matmul") @ _tensor_arg(other, "matmul", "other")


def max(input, dim=None, keepdim=False):
    """torch.max(x) (a 0-d tensor) or torch.max(x, dim) ((values, indices))."""
    return _tensor_arg(input, "max").max(dim, keepdim)


def min(input, dim=None, keepdim=False):
    return _tensor_arg(input, "min").min(dim, keepdim)


def argmax(input, dim=None, keepdim=False, *, axis=None):
    return _tensor_arg(input, "argmax").argmax(dim, keepdim, axis=axis)


def sum(input, dim=None, keepdim=False, *, axis=None, dtype=None):
    return _tensor_arg(input, "sum").sum(dim, keepdim, axis=axis, dtype=dtype)


def mean(input, dim=None, keepdim=False, *, axis=None, dtype=None):
    return _tensor_arg(input, "mean").mean(dim, keepdim, axis=axis, dtype=dtype)


def flatten(input, start_dim=0, end_dim=-1):
    return _tensor_arg(input, "flatten").flatten(start_dim, end_dim)


def reshape(input, shape):
    return _tensor_arg(input, "reshape").reshape(shape)


def relu(input):
    return _dptrain.relu(_tensor_arg(input, "relu"))


def sigmoid(input):
    return _dptrain.sigmoid(_tensor_arg(input, "sigmoid"))


def tanh(input):
    return _dptrain.tanh(_tensor_arg(input, "tanh"))


def softmax(input, dim):
    from .nn import functional
    return functional.softmax(input, dim)


def log_softmax(input, dim):
    from .nn import functional
    return functional.log_softmax(input, dim)


def t(input):
    return _tensor_arg(input, "t").t()


def transpose(input, dim0, dim1):
    x = _tensor_arg(input, "transpose")
    if x.ndim != 2 or {dim0 % 2, dim1 % 2} != {0, 1}:
        raise ValueError("transpose(): only the two dimensions of a 2-d tensor can be swapped")
    return x.t()


def eq(input, other):
    return _tensor_arg(input, "eq").eq(other)


def numel(input):
    return _tensor_arg(input, "numel").numel()


def is_tensor(obj):
    return isinstance(obj, _dptrain.Tensor)


def from_dlpack(ext_tensor):
    """A tensor sharing the memory of a DLPack producer (a NumPy array, a
    PyTorch CPU tensor), both ways: a write through one is read through
    the other."""
    return _dptrain.from_dlpack(ext_tensor)


def waitall():
    """Waits for every command enqueued on every device (MXNet's
    nd.waitall()), with the GIL released; Ctrl-C interrupts the wait."""
    _dptrain.waitall()

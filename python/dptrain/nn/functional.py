"""dptrain.nn.functional: every op the library has, with PyTorch's argument
names, defaults and keyword forms (`F.conv2d(input=X, weight=W, bias=b)`,
`F.avg_pool2d(input=h, kernel_size=(2, 2), stride=(2, 2))`). Each checks
its arguments here, so that a wrong call raises TypeError or ValueError
naming the argument, and then makes one library call."""

import builtins

import _dptrain

__all__ = ["conv2d", "conv_transpose2d", "linear", "relu", "relu6", "leaky_relu", "elu", "selu",
           "gelu", "silu", "hardswish", "hardsigmoid", "hardtanh", "sigmoid", "tanh", "prelu",
           "softmax", "log_softmax", "avg_pool2d", "max_pool2d", "adaptive_avg_pool2d",
           "batch_norm", "dropout", "cross_entropy", "flatten", "mse_loss"]

_T = _dptrain.Tensor


_c_dtype = _T.dtype


def _tensor(x, func, arg, optional=False, floating=True):
    """x checked: a Tensor (or None where optional), of a float dtype where
    the op computes in floats (TypeError naming the argument otherwise)."""
    if x is None and optional:
        return None
    if not isinstance(x, _T):
        raise TypeError(f"{func}(): argument '{arg}' must be Tensor, not {type(x).__name__}")
    if floating and _c_dtype.__get__(x) == "int32":
        raise TypeError(f"{func}(): argument '{arg}' must be a float tensor (float32 or "
                        f"bfloat16), not int32: convert it with .float()")
    return x


def _int(v, func, arg, low=None):
    if isinstance(v, builtins.bool) or not isinstance(v, builtins.int):
        raise TypeError(f"{func}(): argument '{arg}' must be an int, not {type(v).__name__}")
    if low is not None and v < low:
        raise ValueError(f"{func}(): argument '{arg}' must be >= {low}, not {v}")
    return v


def _pair(v, func, arg, low=0):
    """PyTorch's `2` or `(2, 3)`: a pair of ints, each >= low."""
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            v = (v[0], v[0])
        if len(v) != 2:
            raise ValueError(f"{func}(): argument '{arg}' must be an int or a pair of ints, "
                             f"not {len(v)} values")
        return (_int(v[0], func, arg, low), _int(v[1], func, arg, low))
    v = _int(v, func, arg, low)
    return (v, v)


def _number(v, func, arg):
    if isinstance(v, builtins.bool) or not isinstance(v, (builtins.int, builtins.float)):
        raise TypeError(f"{func}(): argument '{arg}' must be a number, not {type(v).__name__}")
    return builtins.float(v)


def _channel_dim(x, dim, func):
    """The library's softmax runs over axis 1 (the classes of (N, C) or the
    channels of (N, C, H, W)): `dim` must name it."""
    if dim is None:
        dim = 0 if x.ndim in (0, 1, 3) else 1  # PyTorch's implicit choice
    if isinstance(dim, builtins.bool) or not isinstance(dim, builtins.int):
        raise TypeError(f"{func}(): argument 'dim' must be an int, not {type(dim).__name__}")
    if x.ndim < 2 or dim % x.ndim != 1:
        raise ValueError(f"{func}(): dptrain computes {func} over dim 1 of a 2-d to 4-d tensor; "
                         f"got dim={dim} for shape {list(x.shape)}")
    return 1


# ---- convolutions and linear maps ------------------------------------------------

def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """y (N, K, P, Q) = conv(input (N, C, H, W), weight (K, C/groups, R, S)) + bias (K)."""
    f = "conv2d"
    x, w = _tensor(input, f, "input"), _tensor(weight, f, "weight")
    b = _tensor(bias, f, "bias", optional=True)
    stride = _pair(stride, f, "stride", 1)
    dilation = _pair(dilation, f, "dilation", 1)
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise ValueError("conv2d(): padding='same' is not supported for strided "
                                 "convolutions")
            r, s = w.shape[2], w.shape[3]
            if (dilation[0] * (r - 1)) % 2 or (dilation[1] * (s - 1)) % 2:
                raise ValueError("conv2d(): padding='same' needs an odd kernel extent here")
            padding = (dilation[0] * (r - 1) // 2, dilation[1] * (s - 1) // 2)
        else:
            raise ValueError(f"conv2d(): invalid padding string {padding!r}, should be one of "
                             f"'valid', 'same'")
    padding = _pair(padding, f, "padding", 0)
    groups = _int(groups, f, "groups", 1)
    return _dptrain.conv2d(x, w, b, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    f = "conv_transpose2d"
    x, w = _tensor(input, f, "input"), _tensor(weight, f, "weight")
    b = _tensor(bias, f, "bias", optional=True)
    return _dptrain.conv_transpose2d(x, w, b, _pair(stride, f, "stride", 1),
                                     _pair(padding, f, "padding", 0),
                                     _pair(output_padding, f, "output_padding", 0),
                                     _int(groups, f, "groups", 1),
                                     _pair(dilation, f, "dilation", 1))


def linear(input, weight, bias=None):
    """y (N, out) = input (N, in) weight (out, in)^T + bias (out)."""
    f = "linear"
    return _dptrain.linear(_tensor(input, f, "input"), _tensor(weight, f, "weight"),
                           _tensor(bias, f, "bias", optional=True))


# ---- activations -----------------------------------------------------------------

def relu(input, inplace=False):
    return _dptrain.relu(_tensor(input, "relu", "input"))


def sigmoid(input):
    return _dptrain.sigmoid(_tensor(input, "sigmoid", "input"))


def tanh(input):
    return _dptrain.tanh(_tensor(input, "tanh", "input"))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    f = "leaky_relu"
    return _dptrain.leaky_relu(_tensor(input, f, "input"), _number(negative_slope, f,
                                                                   "negative_slope"))


def _activation(input, kind, alpha, beta, func):
    return _dptrain.activation(_tensor(input, func, "input"), kind, alpha, beta)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    f = "hardtanh"
    lo, hi = _number(min_val, f, "min_val"), _number(max_val, f, "max_val")
    if lo > hi:
        raise ValueError(f"hardtanh(): min_val ({lo}) must not exceed max_val ({hi})")
    return _activation(input, "hardtanh", lo, hi, f)


def relu6(input, inplace=False):
    return _activation(input, "hardtanh", 0.0, 6.0, "relu6")


def hardswish(input, inplace=False):
    return _activation(input, "hardswish", 0.0, 0.0, "hardswish")


def hardsigmoid(input, inplace=False):
    return _activation(input, "hardsigmoid", 1.0 / 6.0, 0.5, "hardsigmoid")


def elu(input, alpha=1.0, inplace=False):
    return _activation(input, "elu", _number(alpha, "elu", "alpha"), 0.0, "elu")


def selu(input, inplace=False):
    return _activation(input, "selu", 1.6732632423543772, 1.0507009873554805, "selu")


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu(): approximate must be 'none' or 'tanh', not {approximate!r}")
    return _activation(input, "gelu" if approximate == "none" else "gelu_tanh", 0.0, 0.0, "gelu")


def silu(input, inplace=False):
    return _activation(input, "silu", 0.0, 0.0, "silu")


def prelu(input, weight):
    f = "prelu"
    return _dptrain.prelu(_tensor(input, f, "input"), _tensor(weight, f, "weight"))


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = _tensor(input, "softmax", "input")
    _channel_dim(x, dim, "softmax")
    return _dptrain.softmax(x)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    x = _tensor(input, "log_softmax", "input")
    _channel_dim(x, dim, "log_softmax")
    return _dptrain.log_softmax(x)


# ---- pooling --------------------------------------------------------------------

def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over windows of input (N, C, H, W); stride None is the kernel size."""
    f = "avg_pool2d"
    x = _tensor(input, f, "input")
    kernel = _pair(kernel_size, f, "kernel_size", 1)
    stride = kernel if stride is None or stride == [] else _pair(stride, f, "stride", 1)
    if divisor_override is not None:
        raise ValueError("avg_pool2d(): divisor_override is not supported")
    return _dptrain.avg_pool2d(x, kernel, stride, _pair(padding, f, "padding", 0),
                               builtins.bool(ceil_mode), builtins.bool(count_include_pad))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    f = "max_pool2d"
    x = _tensor(input, f, "input")
    if return_indices:
        raise ValueError("max_pool2d(): return_indices=True is not supported")
    kernel = _pair(kernel_size, f, "kernel_size", 1)
    stride = kernel if stride is None or stride == [] else _pair(stride, f, "stride", 1)
    return _dptrain.max_pool2d(x, kernel, stride, _pair(padding, f, "padding", 0),
                               _pair(dilation, f, "dilation", 1), builtins.bool(ceil_mode))


def adaptive_avg_pool2d(input, output_size):
    f = "adaptive_avg_pool2d"
    x = _tensor(input, f, "input")
    if isinstance(output_size, (tuple, list)) and None in output_size:
        output_size = tuple(x.shape[2 + i] if s is None else s for i, s in enumerate(output_size))
    return _dptrain.adaptive_avg_pool2d(x, _pair(output_size, f, "output_size", 1))


# ---- normalisation, dropout --------------------------------------------------------

def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch norm over (N, C), (N, C, L) or (N, C, H, W): batch statistics in
    training (updating running_mean and running_var in place), else the
    running ones."""
    f = "batch_norm"
    x = _tensor(input, f, "input")
    rm = _tensor(running_mean, f, "running_mean", optional=True)
    rv = _tensor(running_var, f, "running_var", optional=True)
    w = _tensor(weight, f, "weight", optional=True)
    b = _tensor(bias, f, "bias", optional=True)
    if not training and (rm is None or rv is None):
        raise ValueError("batch_norm(): running_mean and running_var are needed when not training")
    m = 0.1 if momentum is None else _number(momentum, f, "momentum")
    return _dptrain.batch_norm(x, rm, rv, w, b, builtins.bool(training), m,
                               _number(eps, f, "eps"))


def dropout(input, p=0.5, training=True, inplace=False):
    f = "dropout"
    x = _tensor(input, f, "input")
    p = _number(p, f, "p")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    return _dptrain.dropout(x, p, builtins.bool(training))


# ---- losses ---------------------------------------------------------------------

def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """-log softmax(input (N, K))[target (N) int32], reduced by `reduction`
    ('mean', 'sum' or 'none'), with PyTorch's label smoothing."""
    f = "cross_entropy"
    x, y = _tensor(input, f, "input"), _tensor(target, f, "target", floating=False)
    if _c_dtype.__get__(y) != "int32":
        raise TypeError("cross_entropy(): argument 'target' must hold class indices (int32), "
                        "not probabilities")
    if weight is not None:
        raise ValueError("cross_entropy(): class weights are not supported")
    if size_average is not None or reduce is not None:
        raise ValueError("cross_entropy(): size_average and reduce are deprecated; use reduction=")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    smoothing = _number(label_smoothing, f, "label_smoothing")
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"cross_entropy(): label_smoothing must be between 0.0 and 1.0, "
                         f"got {smoothing}")
    loss = _dptrain.cross_entropy(x, y, reduction, smoothing)
    # The library's reduced loss has shape (1); PyTorch's is 0-d.
    return loss if reduction == "none" else loss.reshape(())


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """mean or sum of (input - target)^2, from the elementwise ops."""
    f = "mse_loss"
    d = _tensor(input, f, "input") - _tensor(target, f, "target")
    sq = d * d
    if reduction == "none":
        return sq
    if reduction == "sum":
        return sq.sum()
    if reduction == "mean":
        return sq.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def flatten(input, start_dim=0, end_dim=-1):
    return _tensor(input, "flatten", "input", floating=False).flatten(start_dim, end_dim)

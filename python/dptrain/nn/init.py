"""nn.init: PyTorch's initialisers, each filling a tensor in place (under
no_grad) with draws from dptrain's generator, by PyTorch's formulas for
the bounds and standard deviations: after the same manual_seed, the same
numbers as PyTorch's (_random.py)."""

import math

from .._grad_mode import no_grad
from .. import _creation

__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "_calculate_fan_in_and_fan_out"]


def calculate_gain(nonlinearity, param=None):
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    shape = tensor.shape
    receptive = 1
    for d in shape[2:]:
        receptive *= d
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _check(tensor, func):
    from .._tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{func}(): tensor must be a Tensor, not {type(tensor).__name__}")


def _fill_from(tensor, values):
    with no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills with U(a, b) draws."""
    _check(tensor, "uniform_")
    if not a <= b:
        raise ValueError(f"uniform_(): expects a <= b, got a={a}, b={b}")
    with no_grad():
        values = _creation.uniform(a, b, tuple(tensor.shape), generator=generator,
                                   device=tensor.device)
    return _fill_from(tensor, values)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills with N(mean, std^2) draws."""
    _check(tensor, "normal_")
    if std < 0:
        raise ValueError(f"normal_(): std must be >= 0, got {std}")
    with no_grad():
        values = _creation.normal(float(mean), float(std), tuple(tensor.shape),
                                  generator=generator, device=tensor.device)
    return _fill_from(tensor, values)


def constant_(tensor, val):
    _check(tensor, "constant_")
    with no_grad():
        tensor.fill_(float(val))
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a), a = gain sqrt(6 / (fan_in + fan_out))."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound), bound = sqrt(3) gain / sqrt(fan)."""
    _check(tensor, "kaiming_uniform_")
    fan = _fan(tensor, mode)
    if fan == 0:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std  # PyTorch's order of operations: its bits
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    _check(tensor, "kaiming_normal_")
    fan = _fan(tensor, mode)
    if fan == 0:
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan), generator)


# PyTorch's deprecated names without the underscore.
uniform, normal, constant = uniform_, normal_, constant_
xavier_uniform, xavier_normal = xavier_uniform_, xavier_normal_
kaiming_uniform, kaiming_normal = kaiming_uniform_, kaiming_normal_

"""Conv2d, ConvTranspose2d and Linear, with PyTorch's constructor
arguments, repr and default initialisation: weights kaiming_uniform_(a =
sqrt(5)), biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), drawn from dptrain's
generator."""

import math

from .. import _creation
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Conv2d", "ConvTranspose2d", "Linear"]


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def _check_count(value, name, cls):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{cls}: {name} must be a positive int, got {value!r}")


def _reset(weight, bias):
    """PyTorch's reset_parameters of Conv2d and Linear."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class _ConvNd(Module):
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                 bias, padding_mode, output_padding, device, dtype):
        super().__init__()
        cls = type(self).__name__
        _check_count(in_channels, "in_channels", cls)
        _check_count(out_channels, "out_channels", cls)
        _check_count(groups, "groups", cls)
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(f"{cls}: padding_mode {padding_mode!r} is not supported; "
                             f"dptrain pads with zeros")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             f"{{'valid', 'same'}}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.dilation = _pair(dilation)
        self.output_padding = _pair(output_padding)
        self.groups = groups
        self.padding_mode = padding_mode
        for name, v in (("kernel_size", self.kernel_size), ("stride", self.stride),
                        ("dilation", self.dilation)):
            if len(v) != 2 or not all(isinstance(x, int) and x > 0 for x in v):
                raise ValueError(f"{cls}: {name} must be a positive int or a pair of them, "
                                 f"got {v!r}")
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(_creation.zeros(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(_creation.zeros(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset(self.weight, self.bias)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0, 0):
            s += ", padding={padding}"
        if self.dilation != (1, 1):
            s += ", dilation={dilation}"
        if self.output_padding != (0, 0):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        return s.format(**self.__dict__)


class Conv2d(_ConvNd):
    """y (N, out, P, Q) = conv(x (N, in, H, W)) with weight (out, in/groups, kH, kW)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, 0, device, dtype)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class ConvTranspose2d(_ConvNd):
    """The transpose of Conv2d: weight (in, out/groups, kH, kW)."""

    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
                         bias, padding_mode, output_padding, device, dtype)

    def forward(self, input, output_size=None):
        if output_size is not None:
            raise ValueError("ConvTranspose2d: output_size is not supported; give output_padding")
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class Linear(Module):
    """y (N, out_features) = x (N, in_features) weight^T + bias."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _check_count(in_features, "in_features", "Linear")
        _check_count(out_features, "out_features", "Linear")
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_creation.zeros((out_features, in_features), device=device,
                                                dtype=dtype))
        if bias:
            self.bias = Parameter(_creation.zeros(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        _reset(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")

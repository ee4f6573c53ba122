"""Grad mode (`no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`)
and `autocast`, as context managers and decorators with PyTorch's names,
over the extension's process-wide switches."""

import functools

import _dptrain

from . import _dtype

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "autocast", "get_precision"]


class _GradMode:
    """Sets grad mode on entry and puts the previous mode back on exit."""

    _mode = None

    def __init__(self):
        self._previous = []

    def __enter__(self):
        self._previous.append(_dptrain.set_grad_enabled(self._mode))
        return self

    def __exit__(self, *exc):
        _dptrain.set_grad_enabled(self._previous.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Ops inside record nothing: their outputs need no gradient (the
    seed's `with torch.no_grad(): param -= lr * param.grad / batch_size`)."""
    _mode = False


class enable_grad(_GradMode):
    _mode = True


class inference_mode(_GradMode):
    """no_grad under PyTorch's other name."""
    _mode = False

    def __init__(self, mode=True):
        super().__init__()
        self._mode = not mode


class set_grad_enabled:
    """Sets grad mode at once (a function call), or for a `with` block."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): mode must be a bool, not {type(mode).__name__}")
        self._previous = _dptrain.set_grad_enabled(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _dptrain.set_grad_enabled(self._previous)
        return False


def is_grad_enabled():
    return _dptrain.is_grad_enabled()


def get_precision():
    """The precision ops run in now: "fp32", "bf16" or "bf16-reference"."""
    return _dptrain.get_precision()


class autocast:
    """autocast("cpu", dtype=dptrain.bfloat16): convolutions and matrix
    products inside run on bf16 operands with float32 sums (the library's
    bf16 precision), natively where the CPU has AVX512-BF16 or AMX, else on
    the reference path (bf16-rounded operands on float32 kernels: the same
    products). `precision="bf16-reference"` asks for the reference path
    everywhere. Everything else (losses, batch norm's statistics, the
    optimizer's state) stays float32, as PyTorch's CPU autocast."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None,
                 precision=None):
        if not isinstance(device_type, str):
            raise TypeError(f"autocast(): device_type must be a str, not "
                            f"{type(device_type).__name__}")
        if device_type not in ("cpu", "cuda"):
            raise ValueError(f"autocast(): device_type must be 'cpu' or 'cuda', not "
                             f"{device_type!r}")
        dtype = _dtype.bfloat16 if dtype is None else _dtype.as_dtype(dtype, "autocast")
        if dtype is not _dtype.bfloat16:
            raise ValueError(f"autocast(): dptrain's reduced precision is dptrain.bfloat16, "
                             f"not {dtype}")
        if precision not in (None, "bf16", "bf16-reference"):
            raise ValueError(f"autocast(): precision must be 'bf16' or 'bf16-reference', "
                             f"not {precision!r}")
        self.enabled = bool(enabled)
        self.precision = precision
        self._previous = []

    def __enter__(self):
        if not self.enabled:
            self._previous.append(_dptrain.set_precision("fp32"))
            return self
        if self.precision is not None:
            self._previous.append(_dptrain.set_precision(self.precision))
            return self
        try:
            self._previous.append(_dptrain.set_precision("bf16"))
        except (RuntimeError, ValueError):
            # No native bf16 on this CPU: the reference path gives the same products.
            self._previous.append(_dptrain.set_precision("bf16-reference"))
        return self

    def __exit__(self, *exc):
        _dptrain.set_precision(self._previous.pop())
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(dtype=_dtype.bfloat16, enabled=self.enabled, precision=self.precision):
                return fn(*args, **kwargs)
        return wrapper

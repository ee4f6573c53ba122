"""nn.parallel.scatter and gather, as torch.nn.parallel's: a tensor is cut
into torch.chunk's row counts (ceil(N / n) each, fewer pieces when rows
run out), one piece per device; lists, tuples and dicts are scattered
element by element and zipped; anything else is repeated per device."""

import _dptrain

from ..._device import as_device

__all__ = ["scatter", "scatter_kwargs", "gather"]


def _device_names(devices, func):
    if isinstance(devices, (str, int)) or not hasattr(devices, "__iter__"):
        raise TypeError(f"{func}(): devices must be a list of devices, not "
                        f"{type(devices).__name__}")
    names = [as_device(d, func, "devices") for d in devices]
    if not names:
        raise ValueError(f"{func}(): devices is empty")
    return names


def scatter(inputs, target_gpus, dim=0):
    """One piece of `inputs` per device of target_gpus (rows split as
    torch.chunk); a structure of tensors gives a list of structures."""
    if dim != 0:
        raise ValueError(f"scatter(): only dim=0 (rows) is supported, not {dim}")
    names = _device_names(target_gpus, "scatter")

    def scatter_map(obj):
        if isinstance(obj, _dptrain.Tensor):
            return list(_dptrain.scatter(obj, names))
        if isinstance(obj, tuple) and len(obj) > 0:
            if hasattr(obj, "_fields"):  # a namedtuple
                return [type(obj)(*args) for args in zip(*map(scatter_map, obj))]
            return list(zip(*map(scatter_map, obj)))
        if isinstance(obj, list) and len(obj) > 0:
            return [list(i) for i in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(i) for i in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in names]

    try:
        return scatter_map(inputs)
    finally:
        scatter_map = None  # the closure refers to itself: break the cycle


def scatter_kwargs(inputs, kwargs, target_gpus, dim=0):
    """scatter of the positional and keyword arguments, padded to one count."""
    scattered_inputs = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered_inputs) < len(scattered_kwargs):
        scattered_inputs.extend(() for _ in range(len(scattered_kwargs) - len(scattered_inputs)))
    elif len(scattered_kwargs) < len(scattered_inputs):
        scattered_kwargs.extend({} for _ in range(len(scattered_inputs) - len(scattered_kwargs)))
    return tuple(scattered_inputs), tuple(scattered_kwargs)


def gather(outputs, target_device, dim=0):
    """The devices' outputs concatenated by rows on target_device, keeping
    the structure (tuples, lists, dicts) of each output."""
    if dim != 0:
        raise ValueError(f"gather(): only dim=0 (rows) is supported, not {dim}")
    name = as_device(target_device, "gather", "target_device")

    def gather_map(outs):
        out = outs[0]
        if isinstance(out, _dptrain.Tensor):
            return _dptrain.gather(list(outs), name)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outs])) for k in out)
        if isinstance(out, (list, tuple)):
            gathered = [gather_map(list(parts)) for parts in zip(*outs)]
            if hasattr(out, "_fields"):
                return type(out)(*gathered)
            return type(out)(gathered)
        raise TypeError(f"gather(): outputs must be tensors (or tuples, lists, dicts of them), "
                        f"not {type(out).__name__}")

    try:
        return gather_map(outputs)
    finally:
        gather_map = None

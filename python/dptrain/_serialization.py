"""dptrain.save and dptrain.load: state dicts as safetensors files, with
PyTorch's names (`features.0.weight`, `bn.running_mean`), which PyTorch
reads with safetensors.torch.load_file and loads strictly."""

import os

import _dptrain

from ._device import as_device

__all__ = ["save", "load"]


def _path(f, func):
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    raise TypeError(f"{func}(): f must be a file path (str or os.PathLike), not "
                    f"{type(f).__name__}: dptrain writes safetensors files by name")


def save(obj, f):
    """Writes a state dict ({name: Tensor}, from `module.state_dict()`) to
    the safetensors file `f`."""
    if hasattr(obj, "state_dict") and not isinstance(obj, dict):
        raise TypeError("save(): dptrain saves state dicts, not whole objects; "
                        "pass model.state_dict()")
    if not isinstance(obj, dict):
        raise TypeError(f"save(): obj must be a dict of name -> Tensor, not {type(obj).__name__}")
    for name, value in obj.items():
        if not isinstance(name, str):
            raise TypeError(f"save(): state dict keys must be str, not {type(name).__name__}")
        if not isinstance(value, _dptrain.Tensor):
            raise TypeError(f"save(): {name!r} is a {type(value).__name__}, not a Tensor")
    plain = {name: (t.detach() if t.requires_grad else t) for name, t in obj.items()}
    _dptrain.save_safetensors(_path(f, "save"), plain)


def load(f, map_location=None, weights_only=None):
    """The state dict in the safetensors file `f`: {name: Tensor}, in the
    file's order, on cpu:0 or on `map_location`."""
    tensors = _dptrain.load_safetensors(_path(f, "load"))
    if map_location is not None:
        name = as_device(map_location, "load")
        tensors = {k: v.to(name) for k, v in tensors.items()}
    return tensors

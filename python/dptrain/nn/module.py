"""nn.Module: PyTorch's base class, subclassed in Python with a Python
`forward`. Assigning a Parameter, a Module or a registered buffer to an
attribute registers it; `state_dict()` names everything as PyTorch does
(`features.0.weight`, `bn.running_mean`), so checkpoints cross both ways."""

from collections import OrderedDict, namedtuple

import _dptrain

from .._tensor import Tensor
from .._grad_mode import no_grad
from .._device import as_device
from .. import _dtype
from .parameter import Parameter, Buffer

__all__ = ["Module"]

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    first = lines.pop(0)
    return first + "\n" + "\n".join(spaces * " " + line for line in lines)


class Module:
    """Base class of every layer and model; subclasses define `forward`."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()

    # ---- registration ---------------------------------------------------------
    def _require_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name, param):
        self._require_init("parameters")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f"parameter name can't contain \".\" or be empty: {name!r}")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (dptrain.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._require_init("buffers")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f"buffer name can't contain \".\" or be empty: {name!r}")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, _dptrain.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(dptrain Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        self._require_init("child modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f"module name can't contain \".\" or be empty: {name!r}")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            self._require_init("parameters")
            self._forget(name)
            params[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(dptrain.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self._require_init("child modules")
            self._forget(name)
            d["_modules"][name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(dptrain.nn.Module or None expected)")
            d["_modules"][name] = None
        elif isinstance(value, Buffer):
            self._forget(name)
            self.register_buffer(name, value.data, value.persistent)
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, _dptrain.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(dptrain Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name):
        d = self.__dict__
        d.pop(name, None)
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d:
                d[key].pop(name, None)
        if "_non_persistent_buffers_set" in d:
            d["_non_persistent_buffers_set"].discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            table = d.get(key)
            if table is not None and name in table:
                return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(key, ()):
                del self.__dict__[key][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # ---- running ------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- walking the tree -----------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo and remove_duplicate:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state dicts ----------------------------------------------------------
    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """{name: tensor}: each module's parameters, then its persistent
        buffers, then its children's, under PyTorch's dotted names."""
        if args:
            destination = args[0]
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies the values of `state_dict` into the parameters and buffers
        of the same names; with strict, missing or unexpected keys raise
        RuntimeError with PyTorch's text."""
        if not hasattr(state_dict, "items"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        pending = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, _dptrain.Tensor):
                errors.append(f'While copying the parameter named "{key}", expected Tensor '
                              f'from checkpoint but received {type(value)}')
                continue
            if tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{Tensor.size(value)} from checkpoint, the shape in current model "
                              f"is {Tensor.size(target)}.")
                continue
            pending.append((target, value))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            # PyTorch's text, on one line (PyTorch puts each error on a line of its own).
            raise RuntimeError("Error(s) in loading state_dict for {}: {}".format(
                type(self).__name__, " ".join(e.strip() for e in errors)))
        with no_grad():
            for target, value in pending:
                source = value
                if source.dtype is not target.dtype:
                    source = source.type(target.dtype)
                if source.device != target.device:
                    source = source.to(target.device)
                target.copy_(source)
        for m in self.modules():
            hook = getattr(m, "_state_loaded", None)
            if hook is not None:
                hook()
        return _IncompatibleKeys(missing, unexpected)

    # ---- modes, devices, gradients ------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def _apply_to_tensors(self, move):
        """Replaces each parameter by a Parameter over move(its values) and
        each buffer by move(buffer), in every module (PyTorch's _apply)."""
        for m in self.modules():
            for name, p in m._parameters.items():
                if p is None:
                    continue
                moved = move(p.detach())
                if moved.device != p.device or moved.dtype is not p.dtype:
                    m._parameters[name] = Parameter(moved, requires_grad=p.requires_grad)
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = move(b)
        return self

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype): moves (or casts) every
        parameter and buffer; returns self, as PyTorch. Optimizers made
        before hold the old parameters: make them after `to`."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for a in args:
            if isinstance(a, _dptrain.Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, _dtype.dtype):
                dtype = a
            elif not isinstance(a, bool):
                device = a
        name = None if device is None else as_device(device, "to")
        want = None if dtype is None else _dtype.as_dtype(dtype, "to")

        def move(t):
            if want is not None and t.dtype.is_floating_point and t.dtype is not want:
                t = t.type(want)
            if name is not None and t.device._name != name:
                t = t.to(name)
            return t
        return self._apply_to_tensors(move)

    def cuda(self, device=None):
        return self.to(0 if device is None else device)

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(_dtype.float32)

    def bfloat16(self):
        return self.to(_dtype.bfloat16)

    def apply(self, fn):
        """fn(m) on every submodule, children first, then on self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ---- printing ------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"

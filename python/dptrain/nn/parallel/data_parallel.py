"""nn.DataParallel with PyTorch's semantics, for any Module (Python
forwards included).

Each forward: the inputs are cut by rows as torch.chunk (`scatter`); the
module runs as it is on device_ids[0] and as a replica on each other device,
whose parameters are `p.to(device)` (recorded: backward sums every
replica's gradient into the module's own parameters) and whose buffers
are copies (only device_ids[0]'s updates, the module's own, are kept);
the outputs are concatenated on output_device (`gather`). The replicas'
forwards are issued one after another, but each op only enqueues on its
device, so the devices compute concurrently."""

import _dptrain

from ... import cuda
from ..._device import as_device, device_of_name
from ..._grad_mode import no_grad
from ..module import Module
from .scatter_gather import scatter_kwargs, gather

__all__ = ["DataParallel", "replicate", "parallel_apply", "data_parallel"]


def _replica_of(module, device, memo):
    """A shallow copy of `module` (and, recursively, of its children) whose
    parameters and buffers live on `device`."""
    if id(module) in memo:
        return memo[id(module)]
    replica = object.__new__(type(module))
    state = module.__dict__.copy()
    params = type(module._parameters)()
    for name, p in module._parameters.items():
        params[name] = None if p is None else p.to(device)
    buffers = type(module._buffers)()
    with no_grad():
        for name, b in module._buffers.items():
            buffers[name] = None if b is None else b.to(device)
    state["_parameters"] = params
    state["_buffers"] = buffers
    state["_non_persistent_buffers_set"] = set(module._non_persistent_buffers_set)
    memo[id(module)] = replica
    state["_modules"] = type(module._modules)(
        (name, None if child is None else _replica_of(child, device, memo))
        for name, child in module._modules.items())
    replica.__dict__.update(state)
    return replica


def replicate(network, devices, detach=False):
    """One module per device: `network` itself on the device its parameters
    are on, a replica (parameters copied with `to`, differentiably unless
    detach) on each other."""
    names = [as_device(d, "replicate", "devices") for d in devices]
    home = _home_device(network)
    replicas = []
    for name in names:
        if name == home:
            replicas.append(network)
        elif detach:
            with no_grad():
                replicas.append(_replica_of(network, name, {}))
        else:
            replicas.append(_replica_of(network, name, {}))
    return replicas


def parallel_apply(modules, inputs, kwargs_tup=None, devices=None):
    """modules[i](*inputs[i], **kwargs_tup[i]) for each i, in turn: each call
    only enqueues work on its device, so the devices run together."""
    if len(modules) != len(inputs):
        raise ValueError(f"parallel_apply(): {len(modules)} modules but {len(inputs)} inputs")
    if kwargs_tup is None:
        kwargs_tup = ({},) * len(modules)
    outputs = []
    for module, args, kwargs in zip(modules, inputs, kwargs_tup):
        if not isinstance(args, (list, tuple)):
            args = (args,)
        outputs.append(module(*args, **kwargs))
    return outputs


def _home_device(module):
    """The device of the module's first parameter or buffer (cpu:0 if none)."""
    for t in module.parameters():
        return _dptrain.Tensor.device.__get__(t)
    for t in module.buffers():
        return _dptrain.Tensor.device.__get__(t)
    return None


class DataParallel(Module):
    """DataParallel(module, device_ids=None, output_device=None, dim=0).

    device_ids None: every device of the convention (cuda.device_count()).
    The module's parameters and buffers must be on device_ids[0]."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel: module must be a dptrain.nn.Module, not "
                            f"{type(module).__name__}")
        if dim != 0:
            raise ValueError(f"DataParallel: only dim=0 (rows) is supported, not {dim}")
        if device_ids is None:
            device_ids = list(range(cuda.device_count()))
        names = [as_device(d, "DataParallel", "device_ids") for d in device_ids]
        if not names:
            raise ValueError("DataParallel: device_ids is empty")
        if len(set(names)) != len(names):
            raise ValueError(f"DataParallel: device_ids names a device twice: {names}")
        if output_device is None:
            output_device = names[0]
        self.dim = dim
        self.module = module
        # PyTorch keeps the devices' indices (dptrain's device i of the convention).
        self.device_ids = [int(n.partition(":")[2]) for n in names]
        self.output_device = device_of_name(as_device(output_device, "DataParallel",
                                                      "output_device"))
        self.src_device_obj = device_of_name(names[0])
        self._names = names
        if len(names) == 1:
            module.to(names[0])

    def _check_home(self):
        home = self._names[0]
        for t in list(self.module.parameters()) + list(self.module.buffers()):
            where = _dptrain.Tensor.device.__get__(t)
            if where != home:
                raise RuntimeError(f"module must have its parameters and buffers on device "
                                   f"{home} (device_ids[0]) but found one of them on device: "
                                   f"{where}")

    def forward(self, *inputs, **kwargs):
        self._check_home()
        inputs, kwargs = scatter_kwargs(inputs, kwargs, self._names, self.dim)
        if not inputs and not kwargs:
            inputs, kwargs = ((),), ({},)
        if len(self._names) == 1:
            return self.module(*inputs[0], **kwargs[0])
        replicas = replicate(self.module, self._names[:len(inputs)])
        outputs = parallel_apply(replicas, inputs, kwargs)
        return gather(outputs, self.output_device._name, self.dim)

    def replicate(self, module, device_ids):
        return replicate(module, device_ids)

    def scatter(self, inputs, kwargs, device_ids):
        return scatter_kwargs(inputs, kwargs, device_ids, self.dim)

    def parallel_apply(self, replicas, inputs, kwargs):
        return parallel_apply(replicas, inputs, kwargs)

    def gather(self, outputs, output_device):
        return gather(outputs, output_device, self.dim)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """The functional form: one DataParallel forward of `module` on `inputs`."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    wrapper = DataParallel(module, device_ids, output_device, dim)
    return wrapper(*inputs, **(module_kwargs or {}))

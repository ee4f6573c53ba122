"""dptrain.device and the one device convention (docs/python-internals.md).

"cuda:i" is dptrain's device i in the order `--devices N` takes them: GPU i,
or, on a machine without GPUs, the CPU device cpu:i of N. "cpu" alone is
the host device, apart from those as on a GPU machine: cpu:N on a machine
without GPUs (cpu:0 with GPUs); it prints as `device(type='cpu')`. A device
object names the device it resolves to: on a CPU-only machine
`device("cuda:1")` is `device(type='cpu', index=1)`, so what is printed is
where the work runs."""

import _dptrain

__all__ = ["device", "as_device", "device_of_name"]


class device:
    """device("cpu"), device("cpu:1"), device("cuda:0"), device("cuda", 1), device(0)."""

    __slots__ = ("type", "index", "_name")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            self.type, self.index, self._name = type.type, type.index, type._name
            return
        if isinstance(type, int) and not isinstance(type, bool) and index is None:
            type, index = "cuda", type  # torch.device(0) is cuda:0
        if not isinstance(type, str):
            raise TypeError(f"device(): expected a string or a device, not {type!r}")
        if index is not None:
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise ValueError(f"device(): index must be an int >= 0, not {index!r}")
            if ":" in type:
                raise ValueError(f"device(): type {type!r} already holds an index; "
                                 f"index={index} given too")
            asked = f"{type}:{index}"
        else:
            asked = type
        name = _dptrain.canonical_device(asked)
        kind, _, number = name.partition(":")
        self._name = name
        self.type = kind
        # The host device ("cpu") keeps PyTorch's index None; any other names its index.
        self.index = None if name == host_device() else int(number)

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        if not isinstance(other, device):
            return NotImplemented
        return self._name == other._name

    def __hash__(self):
        return hash(self._name)

    def __reduce__(self):
        return (device, (str(self),))


_BY_NAME = {}
_HOST = []


def host_device():
    """The canonical name of "cpu", where tensors are made when no device
    is given (PyTorch's default device) and where batches arrive."""
    if not _HOST:
        _HOST.append(_dptrain.canonical_device("cpu"))
    return _HOST[0]


def device_of_name(name):
    """The device object for the extension's canonical name ("cpu:0"), cached."""
    d = _BY_NAME.get(name)
    if d is None:
        d = _BY_NAME[name] = device(name)
    return d


def as_device(value, func="to", arg="device"):
    """The canonical name ("cpu:1") of a device, a name or an int (GPU i of
    the convention); TypeError naming the argument otherwise."""
    if isinstance(value, device):
        return value._name
    if isinstance(value, str):
        return _dptrain.canonical_device(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return _dptrain.canonical_device(f"cuda:{value}")
    raise TypeError(f"{func}(): {arg} must be a dptrain.device, a str or an int, not "
                    f"{type(value).__name__}")

"""dptrain.cuda: PyTorch's torch.cuda calls over the device convention
(docs/python-internals.md): "GPU i" is dptrain's device i, a GPU where
there are GPUs, else the CPU device cpu:i. So `device_count()` is how many
devices the convention has (never 0), `is_available()` is always true, and
the chapters' multi-GPU code runs data-parallel over CPU devices."""

import _dptrain

from ._device import as_device

__all__ = ["device_count", "is_available", "synchronize", "current_device", "get_device_name",
           "set_device", "manual_seed", "manual_seed_all", "empty_cache"]


def device_count():
    """How many devices "cuda:0" .. "cuda:N-1" name: the GPUs, else the
    CPU devices (the cores this process may use, or DPTRAIN_DEVICES)."""
    return _dptrain.device_count()


def is_available():
    """True wherever a device is: always (CPU devices stand in for GPUs)."""
    return _dptrain.device_count() > 0


def current_device():
    return 0


def set_device(device):
    """Only device 0 can be current: ops run where their tensors are."""
    if as_device(device, "set_device") != as_device(0, "set_device"):
        raise ValueError("set_device(): dptrain runs each op on its tensors' device; only "
                         "cuda:0 can be the current device")


def get_device_name(device=None):
    """The device in words: the GPU's name, or "cpu:1 (CPU device, N threads)"."""
    index = 0 if device is None else device
    if not isinstance(index, int):
        index = int(as_device(index, "get_device_name").partition(":")[2])
    return _dptrain.device_name(index)


def synchronize(device=None):
    """Waits for the commands enqueued so far: on `device`, or (None) on
    every device, which is what the chapter's loop means by it. The wait
    releases the GIL; Ctrl-C interrupts it with KeyboardInterrupt."""
    if device is None:
        _dptrain.waitall()
    else:
        _dptrain.synchronize(as_device(device, "synchronize"))


def manual_seed(seed):
    from ._creation import manual_seed as seed_all
    seed_all(seed)


manual_seed_all = manual_seed


def empty_cache():
    """Nothing to do: the library's caching allocator reuses memory itself."""

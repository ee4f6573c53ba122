"""dptrain.backends: process-wide settings of the kernels, as torch.backends.

PyTorch's torch.backends.cudnn.benchmark times cuDNN's algorithms afresh in
every process and keeps nothing; dptrain's `conv_algo="auto"` keeps what it
measured in a cache file per machine (docs/precision-and-kernels.md), so that
the same run repeated runs the same kernels and gives the same bits.
"""
import atexit
import os

import _dptrain

__all__ = ["conv_algo", "conv_algo_cache", "fusion"]

_ENV = "DPTRAIN_CONV_ALGO_CACHE"
_saving = False


def conv_algo_cache(path=""):
    """Sets the convolution kernels' cache file that later runs of this
    process read and add to (dptrain.train with conv_algo="auto", which
    the keyword conv_algo_cache= overrides for one run, and conv_algo("auto")
    below), and returns the setting it replaces.

    path: a file (str or os.PathLike); None: no cache (every run measures
    afresh); "" (the default): $XDG_CACHE_HOME/dptrain/conv-algos.txt, else
    ~/.cache/dptrain/conv-algos.txt. The setting is the environment's
    DPTRAIN_CONV_ALGO_CACHE, so processes started from this one inherit it.
    The value returned is in the same terms: a path, None or "".
    """
    before = os.environ.get(_ENV, "")
    if path is None:
        os.environ[_ENV] = "off"
    elif path == "":
        os.environ.pop(_ENV, None)
    else:
        path = os.fspath(path)
        if not isinstance(path, str) or path == "off":
            raise ValueError(f"conv_algo_cache: {path!r}: expected a file name, None or \"\"")
        os.environ[_ENV] = path
    return None if before == "off" else before


def _save_measured():
    _dptrain.conv_algo_cache_save(None)


def conv_algo(name):
    """Sets how the convolutions this process calls (F.conv2d, nn.Conv2d)
    pick their kernels, and returns the setting it replaces:

    "direct"    the direct kernels (the default; PyTorch's
                torch.backends.cudnn.benchmark = False);
    "auto"      each shape's fastest kernels, timed the first time the shape
                runs (benchmark = True): the choices in conv_algo_cache()'s
                file are read first, and those measured are added to it
                when the process exits, so the next process runs the same
                kernels without timing them, as `dptrain train` does;
    "winograd"  Winograd where the CPU has it for the shape (float32 3x3).

    The environment's DPTRAIN_CONV_ALGO, where set, is the setting at
    import. dptrain.train(conv_algo=...) sets its own for its run.
    """
    before = _dptrain.set_conv_algo(name)
    if name == "auto":
        global _saving
        _dptrain.conv_algo_cache_read(None)
        if not _saving:
            atexit.register(_save_measured)
            _saving = True
    return before


def fusion(enabled):
    """Sets whether conv2d -> relu -> avg_pool2d, called one after the other
    (the seed's LeNet, an nn.Sequential of Conv2d, ReLU, AvgPool2d), runs as
    one op, and returns the setting it replaces (True by default; the
    environment's DPTRAIN_FUSION=0 turns it off at import).

    conv2d returns a tensor whose value is computed when something reads it;
    relu of it another; avg_pool2d of either computes the pool in one
    kernel where the layer fits (the built-in LeNet's first layer), else the
    convolution with its ReLU fused, then the pool. Values and gradients
    are the separate ops' (the convolution's sums in another order, as
    between any two kernels); a tensor read later gets the value it had at
    its call (docs/python-internals.md, "Deferred convolutions").
    """
    return _dptrain._set_fusion(bool(enabled))


if os.environ.get("DPTRAIN_CONV_ALGO"):
    conv_algo(os.environ["DPTRAIN_CONV_ALGO"])

"""dptrain.backends: process-wide settings of the kernels, as torch.backends.

PyTorch's torch.backends.cudnn.benchmark times cuDNN's algorithms afresh in
every process and keeps nothing; dptrain's `conv_algo="auto"` keeps what it
measured in a cache file per machine (docs/precision-and-kernels.md), so that
the same run repeated runs the same kernels and gives the same bits.
"""
import os

__all__ = ["conv_algo_cache"]

_ENV = "DPTRAIN_CONV_ALGO_CACHE"


def conv_algo_cache(path=""):
    """Sets the convolution kernels' cache file that later runs of this
    process read and add to (dptrain.train with conv_algo="auto", which
    the keyword conv_algo_cache= overrides for one run), and returns the
    setting it replaces.

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

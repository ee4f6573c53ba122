"""dptrain.backends.conv_algo_cache: the convolution kernels' cache file of
the runs dptrain.train makes with conv_algo="auto":

- set to a file, a run measures and writes this machine's section there, and
  a second run reads it, measures nothing and trains the same weights bit
  for bit;
- None measures afresh and writes no file; the call returns the setting it
  replaced.
"""
import os

import numpy as np

import dptrain

# The first 512 Fashion-MNIST images, 2 devices, LeNet, its kernels timed.
RUN = dict(dataset="fashion-mnist", limit_train=512, limit_test=256, batch_size=128, epochs=1,
           progress="never", conv_algo="auto", devices=2, seed=5, no_shuffle=True)


def weights(path):
    return {k: np.asarray(v) for k, v in dptrain.load(path).items()}


def test_a_second_run_reads_the_cache_and_repeats_the_weights(tmp_path):
    cache = tmp_path / "kernels" / "conv-algos.txt"
    before = dptrain.backends.conv_algo_cache(cache)
    try:
        dptrain.train(checkpoint=str(tmp_path / "a.st"), **RUN)
        text = cache.read_text()
        assert "\n[dptrain=" in text and ": forward=" in text
        dptrain.train(checkpoint=str(tmp_path / "b.st"), **RUN)
        assert cache.read_text() == text  # nothing new measured, nothing added
        a, b = weights(tmp_path / "a.st"), weights(tmp_path / "b.st")
        assert a.keys() == b.keys() and len(a) > 0
        for k in a:
            assert np.array_equal(a[k], b[k]), k
        assert dptrain.backends.conv_algo_cache(None) == str(cache)
        dptrain.train(**RUN)
        assert cache.read_text() == text
    finally:
        dptrain.backends.conv_algo_cache(before)
    assert os.environ.get("DPTRAIN_CONV_ALGO_CACHE") in (None, "off")


# dptrain.backends.conv_algo: the front end's convolutions' kernel choice.
CONV_SCRIPT = """
import sys, _dptrain, dptrain
from dptrain.nn import functional as F
before = dptrain.backends.conv_algo(sys.argv[1])
x = dptrain.randn(4, 3, 12, 12).requires_grad_()
w = dptrain.randn(5, 3, 3, 3).requires_grad_()
F.conv2d(x, w, padding=1).sum().backward()
print(before, _dptrain.get_precision(), float((w.grad * w.grad).sum()) > 0)
if len(sys.argv) > 2:  # what this process measured, added to the file now
    print("saved", _dptrain.conv_algo_cache_save(None))
"""


def run_conv(tmp_path, cache, *args, env=None):
    import subprocess
    import sys
    script = tmp_path / "conv.py"
    script.write_text(CONV_SCRIPT)
    environ = dict(os.environ, DPTRAIN_CONV_ALGO_CACHE=str(cache), **(env or {}))
    proc = subprocess.run([sys.executable, str(script), *args], env=environ,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")


def test_conv_algo_auto_measures_once_and_keeps_it_in_the_cache_file(tmp_path):
    cache = tmp_path / "conv-algos.txt"
    out = run_conv(tmp_path, cache, "auto")
    assert out[0] == "direct fp32 True"  # the default, replaced
    text = cache.read_text()  # added at exit
    assert "f32 3x12x12 k5 3x3 s1x1 p1x1: forward=" in text and "backward_weights=" in text
    # a second process reads the choices: nothing measured, nothing to add
    out = run_conv(tmp_path, cache, "auto", "save")
    assert out[1] == "saved None" and cache.read_text() == text
    # DPTRAIN_CONV_ALGO sets it at import; "direct" measures nothing
    out = run_conv(tmp_path, tmp_path / "other.txt", "direct", env={"DPTRAIN_CONV_ALGO": "auto"})
    assert out[0] == "auto fp32 True"
    assert not (tmp_path / "other.txt").exists()


def test_conv_algo_refuses_a_name_it_does_not_know():
    try:
        dptrain.backends.conv_algo("fastest")
    except ValueError as e:
        assert "conv_algo(): 'fastest' is not one of auto, direct or winograd" in str(e)
    else:
        raise AssertionError("conv_algo('fastest') was accepted")

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

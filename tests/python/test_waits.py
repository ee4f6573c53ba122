"""Waits: every op returns at once, reads wait with the GIL released, and
Ctrl-C interrupts a waiting call with KeyboardInterrupt within half a
second, leaving the engine usable."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import _dptrain as C
from dpy_helpers import N, T

# The extension's own methods, not the package's overrides.
pytestmark = pytest.mark.usefixtures("base_tensor_class")


def long_work(seconds=1.0):
    """About `seconds` of convolutions on cpu:0, enqueued: the last output,
    and the seconds issuing them took. One is timed first, so the amount
    fits a machine of any speed (the second: the first chooses the kernel)."""
    rng = np.random.default_rng(0)
    # 9.7 GFLOP a convolution: about 60 ms where oneDNN's JIT kernels run
    # on 2 cores (17 of them fill the second), more on a slower machine.
    x = T(rng.normal(size=(32, 64, 64, 64)))
    w = T(rng.normal(size=(64, 64, 3, 3)) * 0.02)
    # The first call of a shape also chooses its kernel (timing the
    # candidates): the second one is the convolution's own time.
    C.conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1).wait_to_read()
    start = time.perf_counter()
    C.conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1).wait_to_read()
    # Few commands, each long: a device's queue holds a bounded number of
    # commands, and issuing more than that waits for the first to finish.
    count = int(min(24, max(4, seconds / (time.perf_counter() - start))))
    start = time.perf_counter()
    for _ in range(count):
        x = C.conv2d(x, w, None, (1, 1), (1, 1), (1, 1), 1)
    return x, time.perf_counter() - start


def test_ops_return_before_the_work_is_done():
    y, issued = long_work()
    start = time.perf_counter()
    assert y.wait_to_read() is y
    done = issued + time.perf_counter() - start
    assert issued < 0.5 * done, f"issuing took {issued:.3f} s of {done:.3f} s"
    C.waitall()
    C.synchronize("cpu:0")
    C.synchronize()


def test_ctrl_c_interrupts_a_wait_and_the_engine_goes_on():
    y, _ = long_work()
    sent = []

    def interrupt():
        time.sleep(0.3)
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        y.sum().item()
    latency = time.perf_counter() - sent[0]
    assert latency < 0.5, f"KeyboardInterrupt came {latency:.3f} s after SIGINT"
    C.waitall()  # the commands already enqueued ran on
    assert np.isfinite(N(y)).all()
    assert (T([1.0, 2.0]) * 2.0).tolist() == [2.0, 4.0]

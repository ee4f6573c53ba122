"""Claim 4: zero-copy interchange with NumPy and PyTorch through DLPack.

A dptrain CPU tensor and the array numpy.from_dlpack / torch.from_dlpack
make of it share memory: a write through one is read through the other
(dptrain's writes are asynchronous, so the test waits for them with
wait_to_read before reading through the other side, as a user must). The
reverse too: dptrain.from_dlpack of a NumPy array or a torch tensor. A
bfloat16 tensor reaches torch as torch.bfloat16 with the same bits, and
back.

The NumPy checks run in this process. The torch checks run in
claims_dlpack_torch.py under the first Python that has torch (this one if
it does), importing the same dptrain build; without torch they are skipped
with the reason, a failure under DP_REQUIRE_TORCH=1 (make test-interop).
"""
import subprocess

import numpy as np
import pytest

import claims_run
import dptrain


def test_numpy_reads_and_writes_dptrain_memory():
    t = dptrain.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4)) * 1.0
    assert t.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    a = np.from_dlpack(t)
    assert a.dtype == np.float32 and a.shape == (3, 4)
    assert a.tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()
    a[2, 1] = -3.5  # a write through numpy ...
    assert t.tolist()[2][1] == -3.5  # ... is read through dptrain
    t[:] = t * 0 + 9.0  # a write through dptrain ...
    t.wait_to_read()
    assert a.tolist() == [[9.0] * 4] * 3  # ... is read through numpy


def test_numpy_shares_int32_memory():
    t = dptrain.tensor([4, 5, 6], dtype=dptrain.int32)
    a = np.from_dlpack(t)
    assert a.dtype == np.int32 and a.tolist() == [4, 5, 6]
    a[0] = -1
    assert t.tolist() == [-1, 5, 6]


def test_numpy_keeps_the_memory_alive_after_the_tensor_dies():
    t = dptrain.from_numpy(np.full((4, 5), 3.0, dtype=np.float32)) + 1.0
    a = np.from_dlpack(t)
    del t
    assert a.tolist() == [[4.0] * 5] * 4


def test_an_activation_in_another_layout_reaches_numpy_with_its_values():
    # A convolution's output may be stored blocked or NHWC on the CPU; the
    # consumer still gets (N, C, H, W) in logical order.
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = dptrain.nn.functional.conv2d(dptrain.from_numpy(x), dptrain.from_numpy(w))
    got = np.from_dlpack(y)
    assert got.shape == (2, 4, 4, 4)
    expected = np.zeros((2, 4, 4, 4), dtype=np.float64)
    for i in range(4):
        for j in range(4):
            expected[:, :, i, j] = np.einsum("nchw,kchw->nk", x[:, :, i:i + 3, j:j + 3], w)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_dptrain_reads_and_writes_numpy_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dptrain.from_dlpack(a)
    assert t.dtype == dptrain.float32 and tuple(t.shape) == (2, 3)
    a[1, 1] = 100.0
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 100.0, 5.0]]
    t[:] = t * 2.0
    t.wait_to_read()
    assert a.tolist() == [[0.0, 2.0, 4.0], [6.0, 200.0, 10.0]]
    u = t + 1.0  # the shared tensor feeds ops like any other
    assert u.tolist() == [[1.0, 3.0, 5.0], [7.0, 201.0, 11.0]]


def test_from_numpy_shares_memory_as_pytorch():
    # torch.from_numpy: "The returned tensor and ndarray share the same memory."
    a = np.zeros(5, dtype=np.float32)
    t = dptrain.from_numpy(a)
    a[3] = 8.0
    assert t.tolist() == [0.0, 0.0, 0.0, 8.0, 0.0]


def test_numpy_array_protocol():
    t = dptrain.tensor([[1.0, 2.0], [3.0, 4.0]]) * 2.0
    a = np.asarray(t)
    assert a.dtype == np.float32 and a.tolist() == [[2.0, 4.0], [6.0, 8.0]]


@pytest.fixture(scope="module")
def torch_checks():
    """claims_dlpack_torch.py's `ok NAME` / `FAIL NAME: ...` lines, run once."""
    python = claims_run.need_torch_python()
    proc = subprocess.run([python, f"{claims_run.HERE}/claims_dlpack_torch.py"],
                          capture_output=True, text=True, timeout=300,
                          env=claims_run.script_env("torch"))
    results = {}
    for line in proc.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        name, _, detail = rest.partition(":")
        results[name] = (verdict, detail.strip())
    return results, proc


@pytest.mark.parametrize("check", [
    "torch_reads_and_writes_dptrain_memory", "dptrain_reads_and_writes_torch_memory",
    "dptrain_reads_torch_int32", "bf16_reaches_torch_as_bfloat16",
    "bf16_reaches_dptrain_from_torch"])
def test_torch(torch_checks, check):
    results, proc = torch_checks
    assert check in results, f"no result for {check}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    verdict, detail = results[check]
    assert verdict == "ok", detail

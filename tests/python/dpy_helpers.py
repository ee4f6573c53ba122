"""Helpers of the extension's tests (test_tensor, test_autograd, test_waits,
test_dlpack): tensors from NumPy arrays through _dptrain itself, values back,
and finite differences in float64."""
import numpy as np

import _dptrain as C


def T(a, dtype="float32", device="cpu:0", requires_grad=False):
    a = np.ascontiguousarray(a, dtype=np.int32 if dtype == "int32" else np.float32)
    t = C.from_bytes(a.tobytes(), a.shape, "int32" if dtype == "int32" else "float32", device)
    if dtype == "bfloat16":
        t = t.cast("bfloat16")
    return t.requires_grad_() if requires_grad else t


def N(t):
    """t's values as a NumPy array (a copy; waits)."""
    dtype = {"float32": np.float32, "int32": np.int32}.get(t.dtype)
    if dtype is None:
        return np.array(t.tolist(), dtype=np.float32)
    return np.frombuffer(t.to_bytes(), dtype=dtype).reshape(t.shape).copy()


def finite_difference(f, arrays, eps=1e-6):
    """The gradient of the float64 function f(*arrays) -> float with respect
    to each array, by central differences."""
    arrays = [np.array(a, dtype=np.float64) for a in arrays]
    grads = []
    for a in arrays:
        g = np.zeros_like(a)
        flat, gflat = a.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            keep = flat[i]
            flat[i] = keep + eps
            up = f(*arrays)
            flat[i] = keep - eps
            down = f(*arrays)
            flat[i] = keep
            gflat[i] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what=""):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert np.all(np.isfinite(actual)), f"{what}: non-finite values {actual}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)

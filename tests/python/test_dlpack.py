"""DLPack both ways with NumPy: a CPU tensor and an array share memory (a
write through one is read through the other), legacy and versioned
capsules, bf16 as DLPack's bfloat16, the copy a blocked activation needs,
and the refusals."""
import ctypes

import numpy as np
import pytest

import _dptrain as C
from dpy_helpers import N, T

# The extension's own methods, not the package's overrides.
pytestmark = pytest.mark.usefixtures("base_tensor_class")


def test_numpy_into_dptrain_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = C.from_dlpack(a)
    assert t.shape == (2, 3) and t.dtype == "float32" and t.device == C.canonical_device("cpu")
    a[0, 0] = 42.0
    assert t.tolist()[0][0] == 42.0  # NumPy's write, read by dptrain
    t.fill_(7.0)
    C.waitall()
    assert a.tolist() == [[7.0] * 3] * 2  # dptrain's write, read by NumPy
    i = C.from_dlpack(np.array([1, 2, 3], np.int32))
    assert i.dtype == "int32" and i.tolist() == [1, 2, 3]


def test_the_tensor_keeps_the_array_alive():
    a = np.arange(1000, dtype=np.float32)
    t = C.from_dlpack(a)
    del a
    u = t * 2.0
    assert N(u)[999] == 1998.0
    del t
    C.waitall()
    assert N(u)[10] == 20.0


def test_dptrain_into_numpy_shares_memory():
    t = T(np.zeros((2, 2)))
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    a[1, 1] = 5.0
    assert t.tolist() == [[0.0, 0.0], [0.0, 5.0]]
    t += 1.0
    C.waitall()
    assert a.tolist() == [[1.0, 1.0], [1.0, 6.0]]


def capsule_dtype(capsule, versioned):
    """(code, bits) of the DLTensor inside a capsule, read with ctypes."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    name = b"dltensor_versioned" if versioned else b"dltensor"
    p = get(capsule, name)
    # DLTensor: data (8), device (8), ndim (4), dtype {code u8, bits u8, lanes u16}.
    # Versioned: version (8), manager_ctx (8), deleter (8), flags (8), then the DLTensor.
    base = p + (32 if versioned else 0)
    code = ctypes.c_uint8.from_address(base + 20).value
    bits = ctypes.c_uint8.from_address(base + 21).value
    flags = ctypes.c_uint64.from_address(p + 24).value if versioned else None
    return code, bits, flags


def test_capsules_legacy_versioned_and_bf16():
    t = T([1.5, -2.25, 3.0])
    legacy = t.__dlpack__()
    assert capsule_dtype(legacy, False)[:2] == (2, 32)  # kDLFloat, 32 bits
    shared = C.from_dlpack(legacy)
    versioned = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    code, bits, flags = capsule_dtype(versioned, True)
    assert (code, bits, flags) == (2, 32, 0)  # shared, not copied
    t.fill_(9.0)
    C.waitall()
    assert shared.tolist() == [9.0, 9.0, 9.0]
    b = T([1.5, -2.25, 3.0]).cast("bfloat16")
    cap = b.__dlpack__(max_version=(1, 0))
    assert capsule_dtype(cap, True)[:2] == (4, 16)  # kDLBfloat, 16 bits
    back = C.from_dlpack(cap)
    assert back.dtype == "bfloat16" and back.tolist() == [1.5, -2.25, 3.0]


def test_a_blocked_activation_is_copied_in_logical_order():
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(2, 3, 5, 5)), rng.normal(size=(4, 3, 3, 3))
    y = C.conv2d(T(x), T(w), None, (1, 1), (1, 1), (1, 1), 1)
    a = np.from_dlpack(y)
    np.testing.assert_array_equal(a, N(y))  # logical (N, C, H, W) order either way
    _, _, flags = capsule_dtype(y.__dlpack__(max_version=(1, 0)), True)
    if flags & 2:  # copied: its memory is not in row-major order
        with pytest.raises(BufferError, match="copy=False"):
            y.__dlpack__(max_version=(1, 0), copy=False)


def test_refusals():
    with pytest.raises(TypeError, match="no dptrain dtype"):
        C.from_dlpack(np.zeros(3))  # float64
    with pytest.raises(BufferError, match="C-contiguous"):
        C.from_dlpack(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="at most 4"):
        C.from_dlpack(np.zeros((1, 1, 1, 1, 2), np.float32))
    with pytest.raises(TypeError, match="no __dlpack__"):
        C.from_dlpack([1.0, 2.0])
    t = T([1.0])
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, 0), copy=False)
    assert C.from_dlpack(t) is t

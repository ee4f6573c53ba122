"""dptrain's top level against NumPy and PyTorch: Tensor's Python surface
(Size, indexing, [:] =, conversions, printing), dtypes, devices, creation,
random numbers, grad mode, the tensor functions, save/load."""
import math

import numpy as np
import pytest

import dptrain
from dptrain import nn

try:
    import torch
except ImportError:  # the comparisons with PyTorch are skipped, visibly
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def test_size_prints_as_pytorch_and_is_a_tuple():
    x = dptrain.zeros(15, 5)
    assert isinstance(x.shape, tuple) and x.shape == (15, 5)
    assert repr(x.size()) == "dptrain.Size([15, 5])"
    assert str(x.shape) == "dptrain.Size([15, 5])"
    assert x.size(1) == 5 and x.size(-2) == 15
    assert x.shape[1:] == dptrain.Size([5]) and repr(x.shape[1:]) == "dptrain.Size([5])"
    with pytest.raises(IndexError):
        x.size(2)


def test_rows_ints_and_slices_read_the_right_values():
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    x = dptrain.tensor(a)
    np.testing.assert_array_equal(x[2].numpy(), a[2])
    np.testing.assert_array_equal(x[-1].numpy(), a[-1])
    np.testing.assert_array_equal(x[1:4].numpy(), a[1:4])
    np.testing.assert_array_equal(x[4:].numpy(), a[4:])
    assert x[:] is x
    assert [row.tolist() for row in x] == a.tolist()
    with pytest.raises(IndexError, match="out of bounds"):
        x[6]
    with pytest.raises(ValueError, match="step 1"):
        x[::2]
    with pytest.raises(TypeError, match="indexing"):
        x[1, 2]


def test_assignment_of_all_rows_only():
    x = dptrain.zeros(2, 3)
    x[:] = dptrain.ones(2, 3) * 3.0
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 3, np.float32))
    x[:] = 7
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 7, np.float32))
    x[:] += dptrain.ones(2, 3)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 8, np.float32))
    with pytest.raises(TypeError, match=r"only t\[:\] = value"):
        x[0] = 1.0


def test_conversions_wait_and_give_python_numbers():
    x = dptrain.tensor([2.5])
    assert float(x) == 2.5 and int(dptrain.tensor([7])) == 7
    assert len(dptrain.zeros(4, 2)) == 4
    assert f"{dptrain.tensor([1.25]):.1f}" == "1.2"
    a = np.array(dptrain.tensor([[1.0, 2.0]]))
    assert a.dtype == np.float32 and a.tolist() == [[1.0, 2.0]]
    assert x.float().dtype is dptrain.float32
    assert x.type(dptrain.int32).dtype is dptrain.int32
    assert x.type() == "dptrain.FloatTensor"
    with pytest.raises(TypeError, match="0-d"):
        len(dptrain.zeros(()))


def test_numpy_shares_the_memory_of_a_cpu_tensor():
    x = dptrain.zeros(3)
    view = x.numpy()
    x[:] = dptrain.ones(3) * 4.0
    x.wait_to_read()
    assert view.tolist() == [4.0, 4.0, 4.0]


def test_dtypes_and_their_pytorch_names():
    assert dptrain.float is dptrain.float32 and dptrain.long is dptrain.int32
    assert dptrain.int64 is dptrain.int32 and dptrain.bool is dptrain.int32
    assert repr(dptrain.bfloat16) == "dptrain.bfloat16"
    assert dptrain.tensor([1, 2]).dtype is dptrain.int32
    assert dptrain.tensor([1.0, 2]).dtype is dptrain.float32
    assert dptrain.tensor(np.array([1, 2], np.int64)).dtype is dptrain.int32
    b = dptrain.tensor([1.0, 2.0], dtype=dptrain.bfloat16)
    assert b.dtype is dptrain.bfloat16 and b.float().tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="dtype"):
        dptrain.zeros(2, dtype="complex64")


def test_devices_follow_the_convention():
    n = dptrain.cuda.device_count()
    assert n >= 1 and dptrain.cuda.is_available()
    d = dptrain.device("cuda:0")
    assert d == dptrain.device("cuda", 0) and hash(d) == hash(dptrain.device(0))
    last = dptrain.device(f"cuda:{n - 1}")
    assert repr(last) == f"device(type='{last.type}', index={last.index})"
    assert str(dptrain.device("cpu")) == "cpu"
    assert repr(dptrain.device("cpu")) == "device(type='cpu')"
    x = dptrain.ones(2).to(last)
    assert x.device == last and x.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError):
        dptrain.device(f"cuda:{n + 5}")
    with pytest.raises(TypeError):
        dptrain.device(1.5)


def test_creation_values():
    assert dptrain.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert dptrain.ones((2,)).tolist() == [1.0, 1.0]
    assert dptrain.full((2,), 3).dtype is dptrain.int32
    assert dptrain.full((1, 2), 1.5).tolist() == [[1.5, 1.5]]
    np.testing.assert_array_equal(dptrain.arange(5).numpy(), np.arange(5))
    np.testing.assert_allclose(dptrain.arange(0, 1, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = dptrain.from_numpy(a)
    a[0, 0] = 42.0
    assert t[0].tolist()[0] == 42.0  # shares memory, as torch.from_numpy
    assert dptrain.zeros_like(t).shape == (2, 3)
    with pytest.raises(ValueError, match=">= 0"):
        dptrain.zeros(-1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        dptrain.ones(2, sizes=(2,))


def test_random_numbers_are_seeded_and_have_their_moments():
    dptrain.manual_seed(0)
    a = dptrain.randn(size=(200, 500)).numpy().copy()
    dptrain.manual_seed(0)
    b = dptrain.randn(200, 500).numpy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean()) < 0.01 and abs(a.std() - 1) < 0.01
    c = dptrain.randn(200, 500).numpy()
    assert not np.array_equal(b, c)
    u = dptrain.rand(100000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = dptrain.normal(3.0, 0.5, size=(100000,)).numpy()
    assert abs(n.mean() - 3) < 0.01 and abs(n.std() - 0.5) < 0.01


def test_grad_mode_switches():
    assert dptrain.is_grad_enabled()
    w = dptrain.ones(3).requires_grad_()
    with dptrain.no_grad():
        assert not dptrain.is_grad_enabled()
        y = w * 2.0
    assert not y.requires_grad and dptrain.is_grad_enabled()
    prev = dptrain.set_grad_enabled(False)
    assert not dptrain.is_grad_enabled()
    with dptrain.enable_grad():
        assert dptrain.is_grad_enabled()
    dptrain.set_grad_enabled(True)

    @dptrain.no_grad()
    def f():
        return dptrain.is_grad_enabled()
    assert f() is False and dptrain.is_grad_enabled()
    del prev


def test_functions_against_numpy():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((5, 3), np.float32), rng.standard_normal((3, 4), np.float32)
    np.testing.assert_allclose(dptrain.mm(dptrain.tensor(a), dptrain.tensor(b)).numpy(), a @ b,
                               rtol=1e-5, atol=1e-6)
    x = dptrain.tensor(a)
    np.testing.assert_allclose(dptrain.sum(x).item(), a.sum(), rtol=1e-5)
    np.testing.assert_allclose(x.mean(dim=0).numpy(), a.mean(0), rtol=1e-5, atol=1e-6)
    assert dptrain.argmax(x, dim=1).tolist() == a.argmax(1).tolist()
    assert x.argmax(axis=1).tolist() == a.argmax(1).tolist()
    parts = dptrain.chunk(dptrain.tensor(np.arange(10, dtype=np.float32)), 3)
    assert [len(p) for p in parts] == [4, 4, 2]
    assert [len(p) for p in dptrain.chunk(dptrain.zeros(10, 2), 4)] == [3, 3, 3, 1]
    assert dptrain.cat([x, x]).shape == (10, 3)
    np.testing.assert_array_equal(dptrain.cat([x[:2], x[2:]]).numpy(), a)
    assert dptrain.stack([x[0], x[1]]).tolist() == a[:2].tolist()
    assert x.reshape(3, -1).shape == (3, 5) and x.view(-1).shape == (15,)
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        x.reshape(4, -1)
    with pytest.raises(TypeError, match="'input' must be Tensor"):
        dptrain.mm(a, b)


def test_printing_waits_and_marks_devices_and_grads():
    n = dptrain.cuda.device_count()
    x = dptrain.tensor([[1.0, 2.0]])
    assert repr(x) == "tensor([[1., 2.]])"
    if n > 1:
        assert repr(x.to("cuda:1")).endswith("device='" + dptrain.device("cuda:1")._name + "')")
    w = dptrain.ones(2).requires_grad_()
    assert repr(w) == "tensor([1., 1.], requires_grad=True)"
    assert "grad_fn=" in repr(w * 2.0)
    assert repr(dptrain.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(dptrain.tensor([1.0, 2.0], dtype=dptrain.bfloat16)) == \
        "tensor([1., 2.], dtype=dptrain.bfloat16)"


@needs_torch
@pytest.mark.parametrize("case", [
    [[1.0, 2.0], [3.0, 4.0]],
    [0.5, -1.25, 3.0],
    [1e-5, 1.0, 3.5],
    [5e-5, 2e-5],
    [123456789.0, 1.0],
    [[0.0, 0.0]],
    "randn_2000",
    "randn_3x4x5",
    [1, -20, 300],
])
def test_repr_equals_pytorch(case):
    if case == "randn_2000":
        values = np.random.default_rng(0).standard_normal(2000).astype(np.float32)
    elif case == "randn_3x4x5":
        values = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    else:
        values = np.array(case)
        values = values.astype(np.float32 if values.dtype.kind == "f" else np.int32)
    ours = repr(dptrain.tensor(values))
    theirs = repr(torch.tensor(values)).replace("torch.", "dptrain.")
    if values.dtype == np.int32:
        theirs = theirs.replace(", dtype=dptrain.int32", "")  # int32 is dptrain's integer type
    assert ours == theirs


@needs_torch
def test_save_writes_pytorch_names_that_torch_loads_strictly(tmp_path):
    from safetensors.torch import load_file
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                        nn.Linear(8, 3))
    path = str(tmp_path / "net.safetensors")
    dptrain.save(net.state_dict(), path)
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8, 3))
    loaded = load_file(path)
    ref.load_state_dict(loaded, strict=True)
    np.testing.assert_array_equal(ref[4].weight.detach().numpy(), net[4].weight.detach().numpy())
    back = dptrain.load(path)
    assert list(back) == list(net.state_dict())
    np.testing.assert_array_equal(back["0.weight"].numpy(), net[0].weight.detach().numpy())
    with pytest.raises(TypeError, match="state_dict"):
        dptrain.save(net, path)


def test_autocast_sets_and_restores_the_precision():
    before = dptrain.get_precision()
    with dptrain.autocast("cpu", dtype=dptrain.bfloat16):
        inside = dptrain.get_precision()
    assert inside in ("bf16", "bf16-reference") and dptrain.get_precision() == before
    with dptrain.autocast("cpu", precision="bf16-reference"):
        assert dptrain.get_precision() == "bf16-reference"
    with pytest.raises(ValueError, match="bfloat16"):
        dptrain.autocast("cpu", dtype=dptrain.int32)
    x = dptrain.randn(4, 8)
    w = dptrain.randn(3, 8)
    exact = nn.functional.linear(x, w).detach().numpy().copy()
    with dptrain.autocast("cpu", precision="bf16-reference"):
        low = nn.functional.linear(x, w).float().detach().numpy()
    # bf16 operands: close to the float32 product, and not equal to it.
    assert np.max(np.abs(low - exact)) < 0.1 and not np.array_equal(low, exact)
    assert math.isfinite(float(low.sum()))

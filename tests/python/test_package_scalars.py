"""The package against PyTorch's shapes and rules (NumPy's values where
torch is not installed): the host device "cpu" apart from the "GPUs",
to()'s identity, 0-d tensors, max/min, an op whose optional tensor is None,
matmul's messages, and NumPy's own error for a bf16 DLPack capsule."""
import re

import numpy as np
import pytest

import _dptrain
import dptrain
from dptrain import nn
from dptrain.nn import functional as F

try:
    import torch
except ImportError:
    torch = None


def host_name():
    """What "cpu" must resolve to: cpu:N beside CPU devices cpu:0 .. cpu:N-1
    standing for GPUs, cpu:0 where the N are GPUs."""
    n = dptrain.cuda.device_count()
    return "cpu:0" if _dptrain.gpu_count() > 0 else f"cpu:{n}"


# ---- the device convention ---------------------------------------------------

def test_cpu_is_the_host_device_apart_from_the_gpus():
    host = host_name()
    n = dptrain.cuda.device_count()
    assert _dptrain.canonical_device("cpu") == host
    assert host not in [_dptrain.canonical_device(f"cuda:{i}") for i in range(n)]
    assert repr(dptrain.device("cpu")) == "device(type='cpu')" and str(dptrain.device("cpu")) == "cpu"
    x = dptrain.ones(2, 3)  # no device: the host, PyTorch's default device
    assert x.device == dptrain.device("cpu") and repr(x.device) == "device(type='cpu')"
    assert _dptrain.Tensor.device.__get__(x) == host
    a = np.arange(4, dtype=np.float32)
    assert _dptrain.Tensor.device.__get__(dptrain.from_dlpack(a)) == host
    if _dptrain.gpu_count() == 0:
        assert repr(dptrain.device("cuda:1" if n > 1 else "cuda:0")) == \
            f"device(type='cpu', index={1 if n > 1 else 0})"


def test_to_is_the_identity_where_the_tensor_is_and_get_params_copies():
    x = dptrain.ones(3)
    assert x.to("cpu") is x and x.to(x.device) is x
    g = x.to("cuda:0")
    assert g is not x and g.device == dptrain.device("cuda:0") != x.device
    assert g.to("cuda:0") is g
    # Seed 003's get_params: parameters made on "cpu", copied to each GPU,
    # each copy a leaf with its own gradient; the originals stay untracked.
    W = dptrain.ones(2)
    n = min(2, dptrain.cuda.device_count())
    copies = []
    for i in range(n):
        p = W.to(f"cuda:{i}")
        p.requires_grad_()
        copies.append(p)
    assert not W.requires_grad and all(p.is_leaf and p.requires_grad for p in copies)
    for i, p in enumerate(copies):
        (p * float(i + 2)).sum().backward()
        assert p.grad.tolist() == [float(i + 2)] * 2
    assert W.grad is None


def test_a_none_bias_needs_no_gradient():
    X, W = dptrain.ones(1, 1, 4, 4), dptrain.ones(2, 1, 3, 3)
    assert not F.conv2d(X, W).requires_grad
    assert not F.conv2d(X, W, None).requires_grad
    assert not F.linear(dptrain.ones(2, 3), dptrain.ones(4, 3)).requires_grad
    assert not F.conv_transpose2d(X, dptrain.ones(1, 2, 3, 3)).requires_grad
    W.requires_grad_()
    y = F.conv2d(X, W)
    assert y.requires_grad and not y.is_leaf
    y.sum().backward()
    assert W.grad.tolist() == np.full((2, 1, 3, 3), 4.0).tolist()  # 2x2 outputs, each 1


# ---- 0-d tensors ---------------------------------------------------------------

def test_reductions_losses_and_elements_are_0_d():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = dptrain.tensor(a)
    assert x.sum().shape == () and x.mean().shape == () and x.sum().ndim == 0
    assert repr(x.sum().shape) == "dptrain.Size([])"
    assert x.sum().item() == 15.0 and x.mean().item() == 2.5
    v = dptrain.tensor([1.0, 2.0, 3.0])
    assert v[1].shape == () and v[1].item() == 2.0 and v[-1].item() == 3.0
    assert x[1].shape == (3,) and x[1].tolist() == [3.0, 4.0, 5.0]
    s = dptrain.tensor(3.0)
    assert s.shape == () and s.item() == 3.0 and s.tolist() == 3.0
    assert s.reshape(1).shape == (1,) and s.reshape(1, 1).shape == (1, 1) and s.reshape(()) is s
    assert dptrain.ones(1, 1).reshape(()).shape == () and dptrain.ones(1).reshape([]).item() == 1.0
    assert _dptrain.from_bytes(np.float32(2.5).tobytes(), (), "float32", "cpu").shape == ()
    with pytest.raises(ValueError, match="reshape"):
        dptrain.ones(2).reshape(())
    logits = np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], np.float32)
    labels = np.array([1, 2])
    for reduction in ("mean", "sum"):
        loss = nn.CrossEntropyLoss(reduction=reduction)(dptrain.tensor(logits),
                                                         dptrain.tensor(labels))
        assert loss.shape == () and loss.ndim == 0, reduction
        if torch is not None:
            want = torch.nn.CrossEntropyLoss(reduction=reduction)(torch.tensor(logits),
                                                                   torch.tensor(labels))
            assert tuple(want.shape) == () and loss.item() == pytest.approx(want.item(), rel=1e-6)
    assert nn.CrossEntropyLoss(reduction="none")(dptrain.tensor(logits),
                                                 dptrain.tensor(labels)).shape == (2,)


def test_0_d_gradients_flow():
    w = dptrain.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (w[1] * 5.0).backward()
    assert w.grad.tolist() == [0.0, 5.0, 0.0]
    u = dptrain.tensor([1.0, 2.0], requires_grad=True)
    (u.sum().reshape(1, 1) * 3.0).sum().backward()  # a 0-d into (1, 1) and back
    assert u.grad.tolist() == [3.0, 3.0]
    logits = dptrain.tensor([[1.0, 2.0, 0.5]], requires_grad=True)
    loss = F.cross_entropy(logits, dptrain.tensor([1]))
    loss.backward()
    p = np.exp([1.0, 2.0, 0.5]) / np.exp([1.0, 2.0, 0.5]).sum()
    np.testing.assert_allclose(logits.grad.numpy()[0], p - np.eye(3)[1], rtol=1e-5)


# ---- max and min -------------------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((7,), None), ((7,), 0), ((3, 4), None), ((3, 4), 0),
                                       ((3, 4), 1), ((3, 4), -1), ((2, 3, 4), 2),
                                       ((2, 3, 1), 1), ((), None), ((), 0)])
@pytest.mark.parametrize("func", ["max", "min"])
def test_max_min_match_numpy_with_the_gradient_to_the_extreme(shape, dim, func):
    a = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    x = dptrain.tensor(a, requires_grad=True)
    pick, arg = (np.max, np.argmax) if func == "max" else (np.min, np.argmin)
    for keepdim in ((False,) if dim is None else (False, True)):
        x.grad = None
        got = getattr(x, func)() if dim is None else getattr(x, func)(dim, keepdim)
        if dim is None:
            values = got
            assert values.shape == () and values.item() == float(pick(a))
            grad = np.zeros(a.size, np.float32)
            grad[arg(a)] = 1.0
        else:
            values, indices = got
            assert got.values is values and got.indices is indices
            want = pick(a, axis=dim, keepdims=keepdim)
            assert values.shape == want.shape and indices.shape == want.shape
            np.testing.assert_array_equal(values.detach().numpy(), want)
            np.testing.assert_array_equal(indices.numpy(), arg(a, axis=dim).reshape(want.shape)
                                          if a.ndim else 0)
            grad = np.zeros_like(a)
            if a.ndim:
                np.put_along_axis(grad, np.expand_dims(arg(a, axis=dim), dim), 1.0, axis=dim)
            else:
                grad = np.float32(1.0)
        (values * 1.0).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy().reshape(-1), np.reshape(grad, -1))
    assert getattr(dptrain, func)(x.detach()).item() == float(pick(a))


def test_max_says_what_it_lacks():
    with pytest.raises(NotImplementedError, match=r"max\(dim=1\) of a 3-d tensor.*argmax"):
        dptrain.ones(2, 3, 4).max(dim=1)
    with pytest.raises(NotImplementedError, match="int32"):
        dptrain.tensor([1, 2]).max()
    with pytest.raises(IndexError, match="out of range"):
        dptrain.ones(2, 3).min(dim=2)
    b = dptrain.tensor([1.0, 5.0, 2.0]).type(dptrain.bfloat16)
    assert b.max().dtype == dptrain.bfloat16 and b.max().item() == 5.0


# ---- errors --------------------------------------------------------------------

def test_matmul_and_mm_name_themselves():
    a, b = dptrain.ones(2, 3), dptrain.ones(2, 3)
    for call, name in ((lambda: a @ b, "matmul"), (lambda: dptrain.matmul(a, b), "matmul"),
                       (lambda: a.matmul(b), "matmul"), (lambda: dptrain.mm(a, b), "mm"),
                       (lambda: a.mm(b), "mm"), (lambda: dptrain.ones(3) @ b, "matmul")):
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert message.startswith(f"{name}(): ") and "linear" not in message and "\n" not in message
    with pytest.raises(TypeError, match=r"^matmul\(\): .*int32"):
        dptrain.tensor([[1, 2]]) @ dptrain.ones(2, 1)
    assert (dptrain.ones(2, 3) @ dptrain.ones(3, 4)).tolist() == [[3.0] * 4] * 2


def test_numpy_raises_its_own_error_for_a_bf16_capsule():
    t = dptrain.ones(2).type(dptrain.bfloat16)
    with pytest.raises(Exception) as info:
        np.from_dlpack(t)
    assert not isinstance(info.value, SystemError), repr(info.value)
    assert isinstance(info.value, (TypeError, BufferError, RuntimeError, ValueError))
    assert re.search(r"dtype|type", str(info.value), re.I), str(info.value)
    assert np.from_dlpack(dptrain.ones(2)).tolist() == [1.0, 1.0]  # the next call works
    assert t.float().tolist() == [1.0, 1.0]

"""_dptrain.Tensor against NumPy: creation, attributes, reads, the number
protocol with tensors and Python numbers, in-place forms, the methods that
are ops, and the functional ops' values; wrong calls raise the right
exception with a one-line message naming the argument."""
import numpy as np
import pytest

import _dptrain as C
from dpy_helpers import N, T, assert_close

# The extension's own methods, not the package's overrides.
pytestmark = pytest.mark.usefixtures("base_tensor_class")

rng = np.random.default_rng(37)


def test_from_bytes_round_trip_and_attributes():
    a = rng.normal(size=(2, 3, 4)).astype(np.float32)
    t = T(a)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.numel() == 24
    assert t.dtype == "float32" and t.device == "cpu:0"
    assert not t.requires_grad and t.is_leaf and t.grad is None
    np.testing.assert_array_equal(N(t), a)
    assert t.tolist() == a.tolist()
    i = T([[1, -2], [3, 4]], "int32")
    assert i.dtype == "int32" and i.tolist() == [[1, -2], [3, 4]]
    assert T([2.5]).item() == 2.5 and float(T([2.5])) == 2.5 and int(T([7], "int32")) == 7


def test_full_and_torch_rng():
    assert C.full((2, 2), 3.5, "float32", "cpu").tolist() == [[3.5, 3.5], [3.5, 3.5]]
    assert C.full(3, 2, "int32", "cpu").tolist() == [2, 2, 2]
    g = C.TorchRNG(5)
    a = np.frombuffer(g.normal(1000, 0.0, 1.0), np.float32)
    assert not np.array_equal(a, np.frombuffer(g.normal(1000, 0.0, 1.0), np.float32))
    g.manual_seed(5)  # restarts the stream
    np.testing.assert_array_equal(a, np.frombuffer(g.normal(1000, 0.0, 1.0), np.float32))
    assert abs(a.mean()) < 0.1 and abs(a.std() - 1) < 0.1
    u = np.frombuffer(C.TorchRNG(5).uniform(1000, 0.0, 1.0), np.float32)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    # on any device the same numbers: they are drawn on the host
    x = C.from_bytes(a.tobytes(), (1000,), "float32", "cpu:1")
    np.testing.assert_array_equal(N(x), a)
    with pytest.raises(ValueError, match="not a state"):
        g.set_state(b"x")
    with pytest.raises(ValueError, match="n must be >= 0"):
        g.normal(-1, 0.0, 1.0)


def test_bfloat16_cast_rounds_to_nearest_even():
    a = np.array([1.0, 1.00390625, 1.01171875, -3.14159], np.float32)
    t = T(a).cast("bfloat16")
    assert t.dtype == "bfloat16"
    bits = a.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(np.array(t.tolist(), np.float32), rounded)
    np.testing.assert_array_equal(N(t.cast("float32")), rounded)


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_binary_with_tensors_and_numbers(op):
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.uniform(0.5, 2, size=(3, 4)).astype(np.float32)
    row = rng.uniform(0.5, 2, size=(4,)).astype(np.float32)
    f = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op]
    py = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
          "/": lambda x, y: x / y}[op]
    assert_close(N(py(T(a), T(b))), f(a, b), what=f"tensor {op} tensor")
    assert_close(N(py(T(a), T(row))), f(a, row), what=f"tensor {op} row (broadcast)")
    assert_close(N(py(T(a), 2.5)), f(a, np.float32(2.5)), what=f"tensor {op} 2.5")
    assert_close(N(py(1.5, T(b))), f(np.float32(1.5), b), what=f"1.5 {op} tensor")


def test_matmul_neg_and_shape_errors():
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(4, 5))
    assert_close(N(T(a) @ T(b)), a @ b, rtol=1e-5, atol=1e-5)
    assert_close(N(-T(a)), -a)
    with pytest.raises(ValueError, match="shape|broadcast|mismatch"):
        T(a) + T(b)
    assert (T(a).__add__("x")) is NotImplemented
    with pytest.raises(TypeError):
        T(a) + "x"


def test_inplace_writes_the_same_memory():
    a = rng.normal(size=(2, 3)).astype(np.float32)
    t = T(a)
    shared = np.from_dlpack(t)
    ident = id(t)
    t += 1.0
    t *= T(np.full((2, 3), 2.0))
    t -= 0.5
    t /= 4.0
    assert id(t) == ident
    expected = ((a + 1) * 2 - 0.5) / 4
    C.waitall()
    assert_close(shared, expected, what="the memory NumPy shares")
    t.fill_(3.0)
    C.waitall()
    assert shared.tolist() == [[3.0] * 3] * 2
    t.zero_()
    t.copy_(T(np.arange(6).reshape(2, 3)))
    assert N(t).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError, match="sizes do not match"):
        t.copy_(T(np.zeros(5)))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions(dim, keepdim):
    a = rng.normal(size=(3, 5)).astype(np.float32)
    a[1, 2] = a[1, 4] = 9.0  # argmax takes the first of equal maxima
    t = T(a)
    if dim is None:
        assert_close(t.sum().item(), a.sum(dtype=np.float64), rtol=1e-5)
        assert_close(t.mean().item(), a.mean(dtype=np.float64), rtol=1e-5)
        assert t.argmax().item() == int(np.argmax(a))
        return
    assert_close(N(t.sum(dim, keepdim)), a.sum(dim, keepdims=keepdim), rtol=1e-5, atol=1e-5)
    assert_close(N(t.mean(dim, keepdim)), a.mean(dim, keepdims=keepdim), rtol=1e-5, atol=1e-6)
    assert N(t.argmax(dim, keepdim)).tolist() == np.argmax(a, dim, keepdims=keepdim).tolist()


def test_int_sum_eq_and_casts():
    y = T([1, 2, 3, 2], "int32")
    p = T([1.0, 2.0, 0.0, 2.0])
    same = p.cast("int32").eq(y)
    assert same.dtype == "int32" and same.tolist() == [1, 1, 0, 1]
    assert same.sum().item() == 3 and same.sum().dtype == "int32"
    assert p.eq(2.0).tolist() == [0, 1, 0, 1]
    assert T([-1.7, 2.9]).cast("int32").tolist() == [-1, 2]  # toward zero, as torch
    with pytest.raises(TypeError, match="dtype"):
        y.mean()  # torch refuses the mean of integers too


def test_reshape_t_rows_to_clone_detach():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = T(a)
    assert N(t.reshape((-1, 4))).tolist() == a.reshape(-1, 4).tolist()
    assert N(t.reshape(24)).tolist() == a.reshape(24).tolist()
    with pytest.raises(ValueError, match="reshape"):
        t.reshape((5, -1))
    m = T(a.reshape(6, 4))
    assert N(m.t()).tolist() == a.reshape(6, 4).T.tolist()
    assert N(m.rows(2, 5)).tolist() == a.reshape(6, 4)[2:5].tolist()
    with pytest.raises(IndexError, match="rows"):
        m.rows(4, 9)
    assert m.to(m.device) is m  # already there: torch's identity
    # "cpu" is the host device, apart from cuda:0 (cpu:0 of N without GPUs): a copy.
    host = T(a.reshape(6, 4), device="cpu")
    moved = host.to("cuda:0")
    assert host.to("cpu") is host and moved is not host
    assert moved.device == C.canonical_device("cuda:0") != host.device
    assert N(moved).tolist() == N(host).tolist()
    tracked = T(a.reshape(6, 4), requires_grad=True)
    assert tracked.to(tracked.device) is tracked
    other = m.to("cpu:1")
    assert other.device == "cpu:1" and N(other).tolist() == N(m).tolist()
    c = m.clone()
    c.fill_(0)
    assert N(m).sum() == a.sum()
    d = m.detach()
    d.fill_(1)  # detach shares the memory of an untracked tensor, as torch
    assert N(m).sum() == 24


def test_functional_ops_against_numpy():
    x = rng.normal(size=(2, 3, 6, 6)).astype(np.float32)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    b = rng.normal(size=(4,)).astype(np.float32)
    y = N(C.conv2d(T(x), T(w), T(b), (1, 1), (1, 1), (1, 1), 1))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))).astype(np.float64)
    ref = np.zeros((2, 4, 6, 6))
    for i in range(6):
        for j in range(6):
            ref[:, :, i, j] = np.einsum("nchw,kchw->nk", xp[:, :, i:i + 3, j:j + 3], w) + b
    assert_close(y, ref, rtol=1e-4, atol=1e-4, what="conv2d")
    mp = N(C.max_pool2d(T(x), (2, 2), (2, 2), (0, 0), (1, 1), False))
    assert_close(mp, x.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)), what="max_pool2d")
    ap = N(C.avg_pool2d(T(x), (2, 2), (2, 2), (0, 0), False, True))
    assert_close(ap, x.reshape(2, 3, 3, 2, 3, 2).mean(axis=(3, 5)), rtol=1e-5, what="avg_pool2d")
    assert_close(N(C.adaptive_avg_pool2d(T(x), (1, 1))), x.mean(axis=(2, 3), keepdims=True),
                 rtol=1e-5, what="adaptive_avg_pool2d")
    assert_close(N(C.relu(T(x))), np.maximum(x, 0), what="relu")
    assert_close(N(C.sigmoid(T(x))), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-5,
                 what="sigmoid")
    assert_close(N(C.tanh(T(x))), np.tanh(x), rtol=1e-5, atol=1e-6, what="tanh")
    assert_close(N(C.flatten(T(x))), x.reshape(2, -1), what="flatten")
    z = rng.normal(size=(4, 5)).astype(np.float64)
    sm = np.exp(z - z.max(1, keepdims=True))
    sm /= sm.sum(1, keepdims=True)
    assert_close(N(C.softmax(T(z))), sm, rtol=1e-5, what="softmax")
    assert_close(N(C.log_softmax(T(z))), np.log(sm), rtol=1e-5, atol=1e-6, what="log_softmax")
    labels = np.array([0, 3, 4, 1])
    per_row = -np.log(sm[np.arange(4), labels])
    yl = T(labels, "int32")
    assert_close(C.cross_entropy(T(z), yl, "mean", 0.0).item(), per_row.mean(), rtol=1e-5)
    assert_close(C.cross_entropy(T(z), yl, "sum", 0.0).item(), per_row.sum(), rtol=1e-5)
    assert_close(N(C.cross_entropy(T(z), yl, "none", 0.0)), per_row, rtol=1e-5)
    smooth = (1 - 0.1) * per_row - 0.1 / 5 * np.log(sm).sum(1)
    assert_close(C.cross_entropy(T(z), yl, "mean", 0.1).item(), smooth.mean(), rtol=1e-5)
    w2 = rng.normal(size=(3, 5))
    assert_close(N(C.linear(T(z), T(w2), T(b[:3]))), z @ w2.T + b[:3], rtol=1e-5, atol=1e-5,
                 what="linear")
    assert_close(N(C.mm(T(z), T(w2.T))), z @ w2.T, rtol=1e-5, atol=1e-5, what="mm")
    assert_close(N(C.cat([T(z), T(z[:2])], 0)), np.concatenate([z, z[:2]]), what="cat rows")
    assert_close(N(C.cat([T(x), T(x[:, :1])], 1)), np.concatenate([x, x[:, :1]], 1),
                 what="cat channels")


def test_batch_norm_training_and_running_statistics():
    x = rng.normal(2.0, 3.0, size=(4, 3, 5, 5)).astype(np.float32)
    rm, rv = T(np.zeros(3)), T(np.ones(3))
    g, b = rng.normal(size=3), rng.normal(size=3)
    y = N(C.batch_norm(T(x), rm, rv, T(g), T(b), True, 0.1, 1e-5))
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    ref = (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * g[:, None, None] \
        + b[:, None, None]
    assert_close(y, ref, rtol=1e-4, atol=1e-4, what="batch_norm")
    assert_close(N(rm), 0.1 * mean, rtol=1e-5, atol=1e-6, what="running_mean")
    assert_close(N(rv), 0.9 + 0.1 * x.var(axis=(0, 2, 3), ddof=1), rtol=1e-5, what="running_var")
    e = N(C.batch_norm(T(x), rm, rv, None, None, False, 0.1, 1e-5))
    assert_close(e, (x - N(rm)[:, None, None]) / np.sqrt(N(rv)[:, None, None] + 1e-5),
                 rtol=1e-4, atol=1e-4, what="batch_norm eval, no affine")


def test_dropout_masks_and_seed():
    x = T(np.ones((64, 64)))
    C.dropout_seed(1)
    a, b = N(C.dropout(x, 0.5, True)), N(C.dropout(x, 0.5, True))
    assert set(np.unique(a)) == {0.0, 2.0} and abs((a == 0).mean() - 0.5) < 0.05
    assert not np.array_equal(a, b)  # a new mask each call
    C.dropout_seed(1)
    np.testing.assert_array_equal(N(C.dropout(x, 0.5, True)), a)  # the seed restarts the masks
    np.testing.assert_array_equal(N(C.dropout(x, 0.5, False)), N(x))


@pytest.mark.parametrize("call, exc, words", [
    (lambda: C.conv2d(T(np.zeros((1, 1, 4, 4))), T(np.zeros((2, 1, 3))), None, (1, 1), (0, 0),
                      (1, 1), 1), ValueError, "conv2d(): weight has 3 dimensions"),
    (lambda: C.conv2d(T(np.zeros((1, 2, 4, 4))), T(np.zeros((2, 1, 3, 3))), None, (1, 1), (0, 0),
                      (1, 1), 1), ValueError, "conv2d(): input has 2 channels"),
    (lambda: C.conv2d([1], T(np.zeros((2, 1, 3, 3))), None, (1, 1), (0, 0), (1, 1), 1), TypeError,
     "conv2d(): input must be a Tensor"),
    (lambda: C.conv2d(T(np.zeros((1, 1, 4, 4))), T(np.zeros((2, 1, 3, 3))), None, "x", (0, 0),
                      (1, 1), 1), TypeError, "conv2d(): stride must be an int or a pair"),
    (lambda: C.linear(T(np.zeros((2, 3))), T(np.zeros((4, 5))), None), ValueError,
     "linear(): input has 3 features"),
    (lambda: C.linear(T(np.zeros((2, 3))), T(np.zeros((4, 3), ), device="cpu:1"), None),
     ValueError, "linear(): weight is on cpu:1"),
    (lambda: C.max_pool2d(T(np.zeros((1, 1, 4, 4))), (2, 2), (2, 2), (2, 2), (1, 1), False),
     ValueError, "pad should be at most half"),
    (lambda: C.cross_entropy(T(np.zeros((2, 3))), T([0, 1]), "mean", 0.0), TypeError,
     "target must be int32"),
    (lambda: C.cross_entropy(T(np.zeros((2, 3))), T([0, 1], "int32"), "avg", 0.0), ValueError,
     "reduction 'avg'"),
    (lambda: C.dropout(T(np.zeros(3)), 1.5, True), ValueError, "between 0 and 1"),
    (lambda: C.batch_norm(T(np.zeros((2, 3, 2, 2))), T(np.zeros(4)), T(np.ones(4)), None, None,
                          True, 0.1, 1e-5), ValueError, "running_mean must have 3 elements"),
    (lambda: C.full((2, -1), 0.0, "float32", "cpu"), ValueError, "negative size"),
    (lambda: C.full((2,), 0.0, "float64", "cpu"), TypeError, "'float64' is not a dtype"),
    (lambda: C.full((2,), 0.0, "float32", "cuda:99"), ValueError, "device cuda:99"),
    (lambda: C.from_bytes(b"abc", (1,), "float32", "cpu"), ValueError, "3 bytes"),
    (lambda: T(np.zeros(3)).item(), ValueError, "3 elements cannot be converted"),
    (lambda: T(np.zeros((2, 2))).sum(2), IndexError, "dim 2 is out of range"),
    (lambda: C.set_precision("fp64"), ValueError, "precision must be"),
])
def test_wrong_calls_raise_one_line(call, exc, words):
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    assert words in message and "\n" not in message, message

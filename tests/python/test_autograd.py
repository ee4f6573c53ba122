"""Autograd through _dptrain: each bound op's gradient against central
finite differences of a NumPy float64 reference; the tape's rules (one
tape per step, backward twice, non-scalar, .grad of a non-leaf, in-place on
a leaf, grad mode); memory flat over 10,000 steps; the Optimizer against
NumPy's update."""
import os

import numpy as np
import pytest

import _dptrain as C
from dpy_helpers import N, T, assert_close, finite_difference

# The extension's own methods, not the package's overrides.
pytestmark = pytest.mark.usefixtures("base_tensor_class")

rng = np.random.default_rng(2026)


def softmax64(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def conv64(x, w, b, stride, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k, r = w.shape[0], w.shape[2]
    p = (xp.shape[2] - r) // stride + 1
    out = np.zeros((x.shape[0], k, p, p))
    for i in range(p):
        for j in range(p):
            win = xp[:, :, i * stride:i * stride + r, j * stride:j * stride + r]
            out[:, :, i, j] = np.einsum("nchw,kchw->nk", win, w) + b
    return out


def bn64(x, g, b):
    mean, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * g[:, None, None] + b[:, None, None]


# name: (shapes of the inputs, the dptrain function of tensors, the float64 reference of arrays)
CASES = {
    "linear": ([(3, 4), (2, 4), (2,)], lambda x, w, b: C.linear(x, w, b),
               lambda x, w, b: x @ w.T + b),
    "mm": ([(3, 4), (4, 2)], lambda a, b: C.mm(a, b), lambda a, b: a @ b),
    "matmul operator": ([(3, 4), (4, 2)], lambda a, b: a @ b, lambda a, b: a @ b),
    "conv2d": ([(2, 2, 5, 5), (3, 2, 3, 3), (3,)],
               lambda x, w, b: C.conv2d(x, w, b, (2, 2), (1, 1), (1, 1), 1),
               lambda x, w, b: conv64(x, w, b, 2, 1)),
    "max_pool2d": ([(1, 2, 4, 4)],
                   lambda x: C.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), False),
                   lambda x: x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))),
    "avg_pool2d": ([(1, 2, 4, 4)],
                   lambda x: C.avg_pool2d(x, (2, 2), (2, 2), (0, 0), False, True),
                   lambda x: x.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5))),
    "adaptive_avg_pool2d": ([(2, 3, 4, 4)], lambda x: C.adaptive_avg_pool2d(x, (1, 1)),
                            lambda x: x.mean(axis=(2, 3), keepdims=True)),
    "relu": ([(3, 4)], lambda x: C.relu(x), lambda x: np.maximum(x, 0)),
    "sigmoid": ([(3, 4)], lambda x: C.sigmoid(x), lambda x: 1 / (1 + np.exp(-x))),
    "tanh": ([(3, 4)], lambda x: C.tanh(x), np.tanh),
    "leaky_relu": ([(3, 4)], lambda x: C.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x)),
    "softmax": ([(3, 4)], lambda x: C.softmax(x), softmax64),
    "log_softmax": ([(3, 4)], lambda x: C.log_softmax(x), lambda x: np.log(softmax64(x))),
    "batch_norm": ([(3, 2, 2, 2), (2,), (2,)],
                   lambda x, g, b: C.batch_norm(x, None, None, g, b, True, 0.1, 1e-5), bn64),
    "flatten": ([(2, 2, 3)], lambda x: C.flatten(x), lambda x: x.reshape(2, -1)),
    "reshape": ([(2, 6)], lambda x: x.reshape((3, -1)), lambda x: x.reshape(3, -1)),
    "t": ([(2, 3)], lambda x: x.t(), lambda x: x.T),
    "add": ([(2, 3), (2, 3)], lambda a, b: a + b, lambda a, b: a + b),
    "sub broadcast": ([(2, 3), (3,)], lambda a, b: a - b, lambda a, b: a - b),
    "mul": ([(2, 3), (2, 3)], lambda a, b: a * b, lambda a, b: a * b),
    "div": ([(2, 3), (2, 3)], lambda a, b: a / (b * b + 1), lambda a, b: a / (b * b + 1)),
    "scalar ops": ([(2, 3)], lambda x: (2 - x) * 3 + x / 4 - 1, lambda x: (2 - x) * 3 + x / 4 - 1),
    "scalar over tensor": ([(2, 3)], lambda x: 2 / (x * x + 1), lambda x: 2 / (x * x + 1)),
    "neg": ([(2, 3)], lambda x: -x, lambda x: -x),
    "sum dim": ([(2, 3)], lambda x: x.sum(1, True), lambda x: x.sum(1, keepdims=True)),
    "mean": ([(2, 3)], lambda x: x.mean(), lambda x: x.mean()),
    "rows": ([(5, 2)], lambda x: x.rows(1, 4), lambda x: x[1:4]),
    "to device": ([(2, 3)], lambda x: x.to("cpu:1"), lambda x: x),
    "clone": ([(2, 3)], lambda x: x.clone(), lambda x: x),
    "cat rows": ([(2, 3), (1, 3)], lambda a, b: C.cat([a, b], 0),
                 lambda a, b: np.concatenate([a, b], 0)),
    "cat channels": ([(2, 3), (2, 1)], lambda a, b: C.cat([a, b], 1),
                     lambda a, b: np.concatenate([a, b], 1)),
    "scatter gather": ([(5, 3)], lambda x: C.gather(C.scatter(x, ["cpu:0", "cpu:1"]), "cpu:0"),
                       lambda x: x),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_against_finite_differences(name):
    shapes, op, ref = CASES[name]
    arrays = [rng.normal(size=s) for s in shapes]
    if name == "to device":
        arrays = [a for a in arrays]
    out_shape = np.shape(ref(*arrays))
    weights = rng.normal(size=out_shape)  # loss = sum(weights * op(...)): every output counts
    xs = [T(a, requires_grad=True) for a in arrays]
    y = op(*xs)
    wt = T(weights, device=y.device) if weights.ndim else T([float(weights)], device=y.device)
    loss = (y * wt.reshape(y.shape) if weights.ndim else y * float(weights)).sum()
    assert loss.requires_grad and not loss.is_leaf
    loss.backward()
    expected = finite_difference(lambda *a: float((ref(*a) * weights).sum()), arrays)
    tol = 2e-3 if name in ("conv2d", "batch_norm") else 1e-3
    for i, (x, g) in enumerate(zip(xs, expected)):
        assert x.grad is not None, f"{name}: input {i} got no gradient"
        assert_close(N(x.grad), g, rtol=tol, atol=tol, what=f"{name}: d loss / d input {i}")


def test_cross_entropy_gradient():
    z, labels = rng.normal(size=(4, 5)), np.array([0, 3, 4, 1])
    for reduction, smoothing in [("mean", 0.0), ("sum", 0.0), ("mean", 0.2)]:
        def ref(z64):
            logp = np.log(softmax64(z64))
            rows = -(1 - smoothing) * logp[np.arange(4), labels] - smoothing / 5 * logp.sum(1)
            return rows.mean() if reduction == "mean" else rows.sum()
        x = T(z, requires_grad=True)
        C.cross_entropy(x, T(labels, "int32"), reduction, smoothing).backward()
        assert_close(N(x.grad), finite_difference(ref, [z])[0], rtol=1e-3, atol=1e-4,
                     what=f"cross_entropy {reduction} {smoothing}")


def test_gradients_accumulate_until_cleared():
    w = T([1.0, 2.0], requires_grad=True)
    assert w.grad is None
    (w * 3.0).sum().backward()
    (w * 4.0).sum().backward()
    assert N(w.grad).tolist() == [7.0, 7.0]
    w.grad = None
    assert w.grad is None
    (w * 5.0).sum().backward()
    assert N(w.grad).tolist() == [5.0, 5.0]
    w.grad.zero_()  # d2l's sgd: param.grad.zero_()
    (w * 2.0).sum().backward()
    assert N(w.grad).tolist() == [2.0, 2.0]


def test_autograd_errors():
    w = T([1.0, 2.0], requires_grad=True)
    h = w * 2.0
    with pytest.raises(RuntimeError, match="only for scalar outputs"):
        h.backward()
    loss = h.sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
    with pytest.raises(RuntimeError, match="non-leaf"):
        h.grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        T([1.0]).sum().backward()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w -= 1.0
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.zero_()
    with pytest.raises(RuntimeError, match="float32"):
        T([1], "int32").requires_grad_()


def test_no_grad_and_inplace_rules():
    w = T([1.0, 2.0], requires_grad=True)
    previous = C.set_grad_enabled(False)
    try:
        assert previous is True and not C.is_grad_enabled()
        y = w * 2.0
        assert not y.requires_grad and y.is_leaf
        w -= 0.5  # a parameter update under no_grad writes w's memory
    finally:
        C.set_grad_enabled(True)
    assert N(w).tolist() == [0.5, 1.5] and w.requires_grad and w.is_leaf
    h = w * 2.0
    before = id(h)
    h += 1.0  # a tracked non-leaf: the name takes the recorded result
    assert id(h) != before and h.requires_grad
    h.sum().backward()
    assert N(w.grad).tolist() == [2.0, 2.0]
    assert w.detach().requires_grad is False


def test_several_losses_of_one_tape():
    """The seed's train_batch: one loss per device, each backpropagated."""
    w0 = T([1.0, 2.0], requires_grad=True)
    w1 = w0.to("cpu:1")  # a copy on the other device, on the same tape
    l0, l1 = (w0 * 3.0).sum(), (w1 * 5.0).sum()
    l0.backward()
    l1.backward()
    assert N(w0.grad).tolist() == [8.0, 8.0]


def test_a_backwarded_step_is_released_when_the_next_records():
    """The loss kept across steps (the chapters' `l`) keeps its value once
    the next step's forward released its tape; a backward through it, or
    through anything computed from it, raises PyTorch's RuntimeError."""
    w = T([1.0, 2.0], requires_grad=True)
    x = T([3.0, 4.0])
    l_old = (w * x).sum()
    y_old = w * x
    l_old.backward()
    assert N(w.grad).tolist() == [3.0, 4.0]
    l_new = (w * w).sum()  # the next step's forward: the old tape is released
    assert l_old.item() == 11.0 and N(y_old).tolist() == [3.0, 8.0]
    assert l_old.requires_grad and not l_old.is_leaf
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        l_old.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y_old.sum().backward()  # recorded on the new tape from a released value
    l_new.backward()
    assert N(w.grad).tolist() == [5.0, 8.0]  # 3 + 2*1, 4 + 2*2: accumulated, nothing else


def test_two_losses_of_one_step_then_the_next_step():
    """The seed's train_batch twice: one loss per device, both backwarded
    before the next step's forward; the list of losses lives on meanwhile."""
    w0 = T([1.0, 2.0], requires_grad=True)
    w1 = T([1.0, 2.0], "float32", "cpu:1", requires_grad=True)
    for step in range(3):
        ls = [(w0 * 3.0).sum(), (w1 * 5.0).sum()]
        for l in ls:
            l.backward()
        assert N(w0.grad).tolist() == [3.0 * (step + 1)] * 2
        assert N(w1.grad).tolist() == [5.0 * (step + 1)] * 2
    assert [l.item() for l in ls] == [9.0, 15.0]


KEEP_LOSS_LOOP = """
import resource, sys
import numpy as np
import dptrain as torch
from dptrain.nn import functional as F
rng = np.random.default_rng(0)
B = 512
W1 = torch.tensor(rng.normal(size=(32, 1, 5, 5)).astype(np.float32) * 0.1, requires_grad=True)
W2 = torch.tensor(rng.normal(size=(32, 32, 3, 3)).astype(np.float32) * 0.05, requires_grad=True)
W3 = torch.tensor(rng.normal(size=(10, 32 * 14 * 14)).astype(np.float32) * 0.01,
                  requires_grad=True)
X = torch.tensor(rng.normal(size=(B, 1, 28, 28)).astype(np.float32))
y = torch.tensor(rng.integers(0, 10, B).astype(np.int32))
for step in range(6):
    h = F.relu(F.conv2d(F.relu(F.conv2d(X, W1, padding=2)), W2, padding=1))
    l = F.cross_entropy(F.linear(F.max_pool2d(h, 2).reshape(B, -1), W3), y)
    del h
    l.backward()
    with torch.no_grad():
        for w in (W1, W2, W3):
            w -= 0.01 * w.grad
            w.grad.zero_()
    if sys.argv[1] == "del":
        del l
    torch.waitall()  # the loop's metric read: each step done before the next
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def test_keeping_the_loss_across_steps_holds_one_step_not_two():
    """PyTorch frees a graph's saved tensors at backward(): the loop that
    keeps `l` until the next step's loss exists (d2l's train loops) peaks
    within 1.2x of the loop that deletes it (a step's activations here are
    ~0.5 GB; holding two steps peaked at ~1.9x)."""
    import subprocess
    import sys
    peaks = {}
    for mode in ("del", "keep"):
        out = subprocess.run([sys.executable, "-c", KEEP_LOSS_LOOP, mode], capture_output=True,
                             text=True, timeout=300, env=os.environ)
        assert out.returncode == 0, out.stderr
        peaks[mode] = int(out.stdout.split()[-1])
    assert peaks["keep"] <= 1.2 * peaks["del"], f"peak RSS (KiB) {peaks}"


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="no /proc to read RSS from")
def test_memory_stays_flat_over_10000_steps():
    w = T(rng.normal(size=(10, 20)) * 0.1, requires_grad=True)
    b = T(np.zeros(10), requires_grad=True)
    x, y = T(rng.normal(size=(16, 20))), T(rng.integers(0, 10, 16), "int32")
    opt = C.Optimizer([w, b], "sgd", 0.01, 0.0, False, 0.0, 0.9, 0.999, 1e-8)

    def step():
        opt.zero_grad()
        loss = C.cross_entropy(C.relu(C.linear(x, w, b)), y, "mean", 0.0)
        loss.backward()
        opt.step(1.0)
        return loss

    for _ in range(100):
        step()
    C.waitall()
    base = rss_kib()
    for i in range(10000):
        loss = step()
        if i % 1000 == 0:
            loss.item()  # the loop reads a value now and then, as a training loop does
    C.waitall()
    grown = rss_kib() - base
    assert grown < 0.05 * base, f"RSS grew {grown} KiB over 10,000 steps (from {base} KiB)"


def test_optimizer_sgd_momentum_and_adam_against_numpy():
    w0, g = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    for kind in ("sgd", "adam"):
        w = T(w0, requires_grad=True)
        opt = C.Optimizer([w], kind, 0.1, 0.9, False, 0.01, 0.9, 0.999, 1e-8)
        assert N(w).tolist() == T(w0).tolist()  # packed with its values
        ref, v, m, s = w0.astype(np.float32).astype(np.float64), 0, 0, 0
        for step in range(1, 4):
            opt.zero_grad()
            (w * T(g)).sum().backward()
            opt.step(0.5)
            grad = 0.5 * g + 0.01 * ref
            if kind == "sgd":
                v = grad if step == 1 else 0.9 * v + grad
                ref = ref - 0.1 * v
            else:
                m, s = 0.9 * m + 0.1 * grad, 0.999 * s + 0.001 * grad * grad
                mh, sh = m / (1 - 0.9 ** step), s / (1 - 0.999 ** step)
                ref = ref - 0.1 * mh / (np.sqrt(sh) + 1e-8)
        assert_close(N(w), ref, rtol=1e-5, atol=1e-6, what=kind)
        state = opt.state()[0]
        assert set(state) == ({"momentum_buffer"} if kind == "sgd" else {"exp_avg", "exp_avg_sq"})
        if kind == "sgd":
            assert_close(N(state["momentum_buffer"]), v, rtol=1e-5, atol=1e-6)
        assert opt.steps() == 3


def test_optimizer_keeps_grads_and_zeroes_unreached():
    a, b = T([1.0, 2.0], requires_grad=True), T([3.0], requires_grad=True)
    (a * 2.0).sum().backward()
    opt = C.Optimizer([a, b], "sgd", 1.0, 0.0, False, 0.0, 0.9, 0.999, 1e-8)
    assert N(a.grad).tolist() == [2.0, 2.0]  # a parameter's .grad stays what it was
    opt.zero_grad()
    (a * 1.0).sum().backward()  # b gets no gradient this step
    opt.step(1.0)
    assert N(a).tolist() == [0.0, 1.0] and N(b).tolist() == [3.0]
    with pytest.raises(ValueError, match="empty parameter list"):
        C.Optimizer([], "sgd", 0.1, 0.0, False, 0.0, 0.9, 0.999, 1e-8)
    with pytest.raises(ValueError, match="kind"):
        C.Optimizer([a], "lbfgs", 0.1, 0.0, False, 0.0, 0.9, 0.999, 1e-8)

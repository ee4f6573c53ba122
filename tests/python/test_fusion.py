"""Deferred convolutions (python/src/lazy.c, dptrain.backends.fusion):
conv2d -> relu -> avg_pool2d called one by one runs as one op, and nothing a
program can see changes.

- the seed's LeNet layers run fused (the counters of deferred, fused and
  computed objects say so) and agree with the separate ops: values and
  gradients within 1e-5 (the convolution's sums in another order);
- a deferred object read later has the separate op's value, bit for bit,
  and answers shape, dtype and device without being computed;
- its inputs written in place after the call (an in-place op, `[:] =`,
  zero_(), an optimizer's step) leave it the value it had at the call;
- a backward adding into a gradient that a deferred conv2d reads computes
  it first, and an input whose tape was released is read from its copy;
- gradients through the conv's and relu's own objects, used beside the pool,
  equal the separate ops';
- inputs whose memory a DLPack consumer may write are never deferred;
- a change of grad mode or precision between the calls runs them apart;
- a wrong call fails at the call, with the library's message.
"""
import numpy as np
import pytest

import _dptrain
import dptrain
from dptrain import nn
from dptrain.nn import functional as F

DEV = "cpu:0"


def stats():
    deferred, fused, computed = _dptrain._fusion_stats()
    return {"deferred": deferred, "fused": fused, "computed": computed}


def delta(before):
    after = stats()
    return {k: after[k] - before[k] for k in after}


@pytest.fixture(autouse=True)
def fusion_on():
    previous = dptrain.backends.fusion(True)
    yield
    dptrain.backends.fusion(previous)


def params(seed=0):
    """The seed's LeNet weights (W1 (20, 1, 3, 3) .. b2) and a batch."""
    rng = np.random.default_rng(seed)
    W1 = dptrain.tensor(rng.normal(0, 0.3, (20, 1, 3, 3)).astype(np.float32)).to(DEV)
    b1 = dptrain.tensor(rng.normal(0, 0.1, 20).astype(np.float32)).to(DEV)
    W2 = dptrain.tensor(rng.normal(0, 0.1, (50, 20, 5, 5)).astype(np.float32)).to(DEV)
    b2 = dptrain.tensor(rng.normal(0, 0.1, 50).astype(np.float32)).to(DEV)
    X = dptrain.tensor(rng.random((6, 1, 28, 28)).astype(np.float32)).to(DEV)
    for p in (W1, b1, W2, b2):
        p.requires_grad_()
    return X, [W1, b1, W2, b2]


def lenet_features(X, P):
    """The seed's two convolution layers, written as it writes them."""
    h1_conv = F.conv2d(input=X, weight=P[0], bias=P[1])
    h1_activation = F.relu(h1_conv)
    h1 = F.avg_pool2d(input=h1_activation, kernel_size=(2, 2), stride=(2, 2))
    h2_conv = F.conv2d(input=h1, weight=P[2], bias=P[3])
    h2_activation = F.relu(h2_conv)
    return F.avg_pool2d(input=h2_activation, kernel_size=(2, 2), stride=(2, 2))


def features_and_grads(fuse, seed=0):
    dptrain.backends.fusion(fuse)
    X, P = params(seed)
    y = lenet_features(X, P)
    (y * y).sum().backward()
    return y.detach().numpy().copy(), [p.grad.numpy().copy() for p in P]


def close(a, b, rel=1e-5):
    scale = max(float(np.abs(b).max()), 1e-30)
    err = float(np.abs(a - b).max()) / scale
    assert np.isfinite(a).all() and np.isfinite(b).all() and err <= rel, err


def test_seed_layers_run_fused_and_agree_with_the_separate_ops():
    before = stats()
    fused_y, fused_g = features_and_grads(True)
    # two conv2d and two relu deferred, two pools run as one op each, and
    # nothing computed: the intermediates died unread
    assert delta(before) == {"deferred": 4, "fused": 2, "computed": 0}
    before = stats()
    plain_y, plain_g = features_and_grads(False)
    assert delta(before) == {"deferred": 0, "fused": 0, "computed": 0}
    close(fused_y, plain_y)
    for g, h in zip(fused_g, plain_g):
        close(g, h)


def test_intermediates_read_later_are_the_separate_ops_values():
    X, P = params(1)
    h = F.conv2d(X, P[0], P[1])
    r = F.relu(h)
    before = stats()
    assert (h.shape, h.dtype, str(h.device), r.numel(), r.dim()) == \
        ((6, 20, 26, 26), dptrain.float32, DEV, 6 * 20 * 26 * 26, 4)
    assert h.requires_grad and not h.is_leaf and r.requires_grad
    assert delta(before)["computed"] == 0  # metadata computes nothing
    pooled = F.avg_pool2d(r, 2)
    got_h, got_r = h.detach().numpy().copy(), r.detach().numpy().copy()
    assert delta(before) == {"deferred": 0, "fused": 1, "computed": 2}
    dptrain.backends.fusion(False)
    want_h = F.conv2d(X, P[0], P[1])
    want_r = F.relu(want_h)
    want_pool = F.avg_pool2d(want_r, 2)
    assert np.array_equal(got_h, want_h.detach().numpy())
    assert np.array_equal(got_r, want_r.detach().numpy())
    assert (got_r >= 0).all() and (got_h < 0).any()
    close(pooled.detach().numpy(), want_pool.detach().numpy())


@pytest.mark.parametrize("write", ["isub", "setitem", "fill", "sgd_step", "input_setitem"])
def test_inputs_written_after_the_call_leave_the_value_of_the_call(write):
    X, P = params(2)
    if write == "sgd_step":  # the optimizer and the gradients before the call
        opt = dptrain.optim.SGD(P[:2], lr=10.0, momentum=0.9)
        (P[0] * P[0]).sum().backward()
    dptrain.backends.fusion(False)
    want = F.conv2d(X, P[0], P[1]).detach().numpy().copy()
    dptrain.backends.fusion(True)
    h = F.conv2d(X, P[0], P[1])
    r = F.relu(h)
    before = stats()
    if write == "sgd_step":
        opt.step()
    with dptrain.no_grad():
        if write == "isub":
            P[0] -= 1.0
        elif write == "setitem":
            P[0][:] = dptrain.zeros(20, 1, 3, 3).to(DEV)
        elif write == "fill":
            P[1].zero_()
        elif write == "input_setitem":
            X[:] = dptrain.zeros(6, 1, 28, 28).to(DEV)
    assert delta(before)["computed"] == 2  # both were computed before the write
    assert np.array_equal(h.detach().numpy(), want)
    assert np.array_equal(r.detach().numpy(), np.maximum(want, 0))


def test_a_backward_into_an_input_leaves_the_value_of_the_call():
    X, P = params(8)
    (P[0] * P[0]).sum().backward()
    g = P[0].grad  # 2 W1: the weight of the convolution below
    dptrain.backends.fusion(False)
    want = F.conv2d(X, g, None).numpy().copy()
    dptrain.backends.fusion(True)
    h = F.conv2d(X, g, None)
    before = stats()
    (P[0] * P[0]).sum().backward()  # adds into g
    assert delta(before)["computed"] == 1
    assert np.array_equal(h.numpy(), want)
    assert np.array_equal(g.numpy(), 4 * P[0].detach().numpy())


def test_an_input_whose_tape_was_released_is_read_from_its_copy():
    # x is an output of a backwarded step; the next step's first recorded op
    # hands it a copy and frees its tape's tensors (python-internals.md)
    X, P = params(10)
    Xg = X.clone().requires_grad_()
    x = Xg * 2.0
    x.sum().backward()
    h = F.conv2d(x, P[0], P[1])
    (Xg * 3.0).sum()  # the next step's first recorded op
    junk = [dptrain.full((6, 1, 28, 28), 7.0).to(DEV) for _ in range(4)]  # reuses freed memory
    got = h.detach().numpy()
    dptrain.backends.fusion(False)
    with dptrain.no_grad():
        want = F.conv2d(X * 2.0, P[0], P[1]).numpy()
    assert np.array_equal(got, want) and len(junk) == 4


def test_gradients_through_the_intermediates_equal_the_separate_ops():
    def grads(fuse):
        dptrain.backends.fusion(fuse)
        X, P = params(3)
        h = F.conv2d(X, P[0], P[1])
        r = F.relu(h)
        y = F.avg_pool2d(r, 2)
        (y.sum() * 3.0 + (h * h).sum() + r.sum()).backward()
        return [P[0].grad.numpy().copy(), P[1].grad.numpy().copy()]
    for g, h in zip(grads(True), grads(False)):
        close(g, h)


def test_inputs_a_dlpack_consumer_may_write_are_not_deferred():
    X, P = params(4)
    with dptrain.no_grad():
        W = P[0].detach().clone()
    view = np.from_dlpack(W)  # numpy 2 may write W from now on (1.x reads only)
    before = stats()
    h = F.relu(F.conv2d(X, W, P[1]))
    assert delta(before)["deferred"] == 0
    assert np.abs(h.detach().numpy()).max() > 0 and view.shape == (20, 1, 3, 3)


def test_settings_changed_between_the_calls_run_them_apart():
    X, P = params(5)
    with dptrain.no_grad():
        h = F.conv2d(X, P[0], P[1])
    assert not h.requires_grad
    before = stats()
    r = F.relu(h)  # grad mode is on again: h is computed, relu runs on it
    y = F.avg_pool2d(r, 2)
    assert delta(before) == {"deferred": 0, "fused": 0, "computed": 1}
    assert not h.requires_grad and not r.requires_grad and not y.requires_grad
    h2 = F.conv2d(X, P[0], P[1])
    with dptrain.no_grad():
        y2 = F.avg_pool2d(F.relu(h2), 2)  # relu computes h2, the pool runs apart
    assert not y2.requires_grad
    close(y2.numpy(), y.numpy())


def test_an_nn_sequential_of_conv_relu_pool_runs_fused():
    dptrain.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.AvgPool2d(2),
                        nn.Flatten(), nn.Linear(6 * 14 * 14, 10)).to(DEV)
    X, _ = params(6)
    before = stats()
    out = net(X)
    out.sum().backward()
    assert delta(before) == {"deferred": 2, "fused": 1, "computed": 0}
    grads = [p.grad.numpy().copy() for p in net.parameters()]
    for p in net.parameters():
        p.grad = None
    dptrain.backends.fusion(False)
    net(X).sum().backward()
    for g, p in zip(grads, net.parameters()):
        close(g, p.grad.numpy())


def test_a_wrong_call_fails_at_the_call():
    X, P = params(7)
    small = dptrain.zeros(2, 1, 2, 2).to(DEV)
    before = stats()
    with pytest.raises(ValueError, match="conv2d: the 3 x 3 kernel dilated by 1 x 1 spans 3 x 3"):
        F.conv2d(small, P[0], P[1])
    assert delta(before)["deferred"] == 0

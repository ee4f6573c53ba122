"""dptrain.optim against PyTorch: SGD (momentum, Nesterov, weight decay),
Adam and AdamW step for step from the same weights and gradients, the
schedulers' learning rates, and PyTorch's argument checks."""
import numpy as np
import pytest

import dptrain
from dptrain import nn, optim

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def twin_models():
    """Two equal models; the first layer's unit 0 is dead (its bias -100), so
    its row, its bias and the next layer's column 0 get gradients of exactly
    0 (Adam's eps is what keeps their update 0 rather than 0/0)."""
    dptrain.manual_seed(11)
    ours = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    with dptrain.no_grad():
        bias = ours[0].bias.detach().numpy().copy()
        bias[0] = -100.0
        ours[0].bias.copy_(dptrain.tensor(bias))
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                            for k, v in ours.state_dict().items()})
    return ours, theirs


@needs_torch
@pytest.mark.parametrize("make", [
    lambda m, lib: lib.optim.SGD(m.parameters(), lr=0.1),
    lambda m, lib: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9),
    lambda m, lib: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                 weight_decay=1e-3),
    lambda m, lib: lib.optim.Adam(m.parameters(), lr=0.01, weight_decay=1e-2),
    lambda m, lib: lib.optim.AdamW(m.parameters(), lr=0.01, betas=(0.8, 0.99)),
], ids=["sgd", "momentum", "nesterov_wd", "adam_l2", "adamw"])
def test_steps_equal_pytorch_s(make):
    ours, theirs = twin_models()
    opt, ref = make(ours, dptrain), make(theirs, torch)
    rng = np.random.default_rng(0)
    for step in range(8):
        x = rng.standard_normal((10, 6)).astype(np.float32)
        y = rng.integers(0, 3, 10).astype(np.int32)
        opt.zero_grad()
        loss = nn.CrossEntropyLoss()(ours(dptrain.tensor(x)), dptrain.tensor(y))
        loss.backward()
        opt.step()
        ref.zero_grad()
        rloss = torch.nn.CrossEntropyLoss()(theirs(torch.from_numpy(x)), torch.from_numpy(y).long())
        rloss.backward()
        ref.step()
        assert abs(loss.item() - rloss.item()) <= 1e-5 * max(1.0, abs(rloss.item())), step
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@needs_torch
def test_zero_grad_sets_none_and_state_dict_has_pytorch_s_layout():
    ours, _ = twin_models()
    opt = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    nn.CrossEntropyLoss()(ours(dptrain.randn(4, 6)), dptrain.tensor([0, 1, 2, 0])).backward()
    opt.step()
    opt.zero_grad()
    assert all(p.grad is None for p in ours.parameters())
    state = opt.state_dict()
    assert [g["params"] for g in state["param_groups"]] == [[0, 1, 2, 3]]
    assert state["param_groups"][0]["lr"] == 0.1 and state["param_groups"][0]["momentum"] == 0.9
    assert sorted(state["state"]) == [0, 1, 2, 3]
    assert "momentum_buffer" in state["state"][0]
    assert tuple(state["state"][0]["momentum_buffer"].shape) == (5, 6)


@needs_torch
@pytest.mark.parametrize("make", [
    lambda o, s: s.StepLR(o, step_size=3, gamma=0.5),
    lambda o, s: s.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
    lambda o, s: s.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
    lambda o, s: s.LinearLR(o, start_factor=0.25, total_iters=6),
    lambda o, s: s.OneCycleLR(o, max_lr=0.5, total_steps=20),
    lambda o, s: s.OneCycleLR(o, max_lr=0.5, epochs=4, steps_per_epoch=5, three_phase=True,
                              anneal_strategy="linear"),
    lambda o, s: s.SequentialLR(o, [s.LinearLR(o, start_factor=0.1, total_iters=4),
                                    s.CosineAnnealingLR(o, T_max=10)], milestones=[4]),
], ids=["step", "multistep", "cosine", "linear", "onecycle", "onecycle3", "sequential"])
def test_schedules_equal_pytorch_s(make):
    ours, theirs = twin_models()
    opt = optim.SGD(ours.parameters(), lr=0.2, momentum=0.9)
    ref = torch.optim.SGD(theirs.parameters(), lr=0.2, momentum=0.9)
    sched, rsched = make(opt, optim.lr_scheduler), make(ref, torch.optim.lr_scheduler)
    for step in range(19):
        assert sched.get_last_lr() == pytest.approx(rsched.get_last_lr(), rel=1e-12, abs=1e-15)
        assert opt.param_groups[0]["momentum"] == pytest.approx(ref.param_groups[0]["momentum"])
        opt.step()
        ref.step()
        sched.step()
        rsched.step()


def test_the_schedule_reaches_the_library_s_optimizer():
    w = nn.Parameter(dptrain.ones(3))
    opt = optim.SGD([w], lr=1.0)
    sched = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for expected_lr in (1.0, 0.5, 0.25):
        before = w.detach().numpy().copy()
        (w * 2.0).sum().backward()  # gradient 2 everywhere
        opt.step()
        opt.zero_grad()
        sched.step()
        np.testing.assert_allclose(before - w.detach().numpy(), 2 * expected_lr, rtol=1e-6)


def test_pytorch_s_argument_checks():
    w = nn.Parameter(dptrain.ones(2))
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.SGD([w], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum"):
        optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam([w], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        optim.AdamW([w], eps=-1e-8)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        optim.SGD([1.0], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.raises(ValueError, match="total_steps OR"):
        optim.lr_scheduler.OneCycleLR(optim.SGD([nn.Parameter(dptrain.ones(1))], lr=0.1), 1.0)
    opt = optim.SGD([nn.Parameter(dptrain.ones(1))], lr=0.1)
    with pytest.raises(ValueError, match="number of milestones"):
        optim.lr_scheduler.SequentialLR(opt, [optim.lr_scheduler.StepLR(opt, 2)], milestones=[3])

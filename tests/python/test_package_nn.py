"""dptrain.nn against PyTorch: Module's registration, names, state dicts and
their errors, repr, the layers' forward and backward from the same
weights, PyTorch's default initialisation, functional's keyword forms and
argument errors, scatter's sizes and DataParallel."""
import math

import numpy as np
import pytest

import dptrain
from dptrain import nn
from dptrain.nn import functional as F

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


class Block(nn.Module):
    """A Python Module: conv, batch norm, ReLU, max pooling and a residual sum."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.bn = nn.BatchNorm2d(2)
        self.conv2 = nn.Conv2d(2, 2, 1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 3))
        self.register_buffer("scale", dptrain.ones(1))
        self.plain = 5

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        y = self.conv2(y) + y
        return self.head(F.max_pool2d(y, 2))


def torch_block():
    class TorchBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 2, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(2)
            self.conv2 = torch.nn.Conv2d(2, 2, 1)
            self.head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 3))
            self.register_buffer("scale", torch.ones(1))

        def forward(self, x):
            y = torch.nn.functional.relu(self.bn(self.conv(x)))
            y = self.conv2(y) + y
            return self.head(torch.nn.functional.max_pool2d(y, 2))
    return TorchBlock()


def copy_into_torch(ours, theirs):
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state, strict=True)


def test_registration_and_walks():
    m = Block()
    assert [n for n, _ in m.named_parameters()] == [
        "conv.weight", "conv.bias", "bn.weight", "bn.bias", "conv2.weight", "conv2.bias",
        "head.1.weight", "head.1.bias"]
    assert [n for n, _ in m.named_buffers()] == [
        "scale", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert list(m.state_dict()) == [
        "scale", "conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean",
        "bn.running_var", "bn.num_batches_tracked", "conv2.weight", "conv2.bias", "head.1.weight",
        "head.1.bias"]
    assert [type(c).__name__ for c in m.children()] == ["Conv2d", "BatchNorm2d", "Conv2d",
                                                        "Sequential"]
    assert len(list(m.modules())) == 7 and m.plain == 5
    assert all(p.requires_grad and p.is_leaf for p in m.parameters())
    with pytest.raises(TypeError, match="cannot assign 'int' as parameter 'weight'"):
        m.conv.weight = 3
    with pytest.raises(AttributeError, match="'Block' object has no attribute 'missing'"):
        m.missing
    m.eval()
    assert not m.training and not m.bn.training
    assert m.train() is m and m.head[1].training
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen[-1] == "Block" and seen[0] == "Conv2d"


@needs_torch
def test_state_dict_names_and_repr_are_pytorch_s():
    ours, theirs = Block(), torch_block()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours).replace("Block", "TorchBlock") == repr(theirs)
    seq = nn.Sequential(nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),
                        nn.AvgPool2d(kernel_size=2, stride=2), nn.MaxPool2d(3, 2, 1),
                        nn.AdaptiveAvgPool2d((1, 1)), nn.Dropout(0.5), nn.LeakyReLU(0.2),
                        nn.BatchNorm1d(4), nn.Softmax(dim=1), nn.GELU(), nn.ReLU(inplace=True))
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 6, kernel_size=5, padding=2), torch.nn.Sigmoid(),
                              torch.nn.AvgPool2d(kernel_size=2, stride=2),
                              torch.nn.MaxPool2d(3, 2, 1), torch.nn.AdaptiveAvgPool2d((1, 1)),
                              torch.nn.Dropout(0.5), torch.nn.LeakyReLU(0.2),
                              torch.nn.BatchNorm1d(4), torch.nn.Softmax(dim=1), torch.nn.GELU(),
                              torch.nn.ReLU(inplace=True))
    assert repr(seq) == repr(ref)


@needs_torch
def test_load_state_dict_errors_read_as_pytorch_s():
    ours, theirs = Block(), torch_block()
    state = dict(ours.state_dict())
    del state["conv.bias"]
    state["extra.weight"] = dptrain.zeros(1)
    with pytest.raises(RuntimeError) as mine:
        ours.load_state_dict(state)
    tstate = {k: torch.zeros(tuple(v.shape)) for k, v in state.items()}
    with pytest.raises(RuntimeError) as ref:
        theirs.load_state_dict(tstate)
    # PyTorch's text, on one line: dptrain's errors are one line each.
    theirs_one_line = " ".join(part.strip() for part in str(ref.value).split("\n\t"))
    assert str(mine.value).replace("Block", "TorchBlock") == theirs_one_line.replace(":  ", ": ")
    result = ours.load_state_dict(state, strict=False)
    assert result.missing_keys == ["conv.bias"] and result.unexpected_keys == ["extra.weight"]
    state = dict(ours.state_dict())
    state["conv.weight"] = dptrain.zeros(3, 2, 3, 3)
    with pytest.raises(RuntimeError, match="size mismatch for conv.weight: copying a param with "
                                           r"shape dptrain.Size\(\[3, 2, 3, 3\]\)"):
        ours.load_state_dict(state)


def test_load_state_dict_copies_values_and_the_batch_count():
    a, b = Block(), Block()
    a(dptrain.randn(4, 2, 4, 4))
    b.load_state_dict(a.state_dict())
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(x.numpy(), y.numpy(), err_msg=name)
    assert b.bn.num_batches_tracked.item() == 1
    b.train()(dptrain.randn(4, 2, 4, 4))
    assert b.bn.num_batches_tracked.item() == 2


@needs_torch
def test_forward_and_gradients_equal_pytorch_from_the_same_weights():
    ours, theirs = Block(), torch_block()
    copy_into_torch(ours, theirs)
    x = np.random.default_rng(3).standard_normal((4, 2, 4, 4)).astype(np.float32)
    y = np.array([0, 2, 1, 2], np.int32)
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(ours(dptrain.tensor(x)), dptrain.tensor(y))
    loss.backward()
    ref = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(theirs(torch.from_numpy(x)),
                                                         torch.from_numpy(y).long())
    ref.backward()
    assert abs(loss.item() - ref.item()) < 1e-5 * max(1, abs(ref.item()))
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(ours.bn.running_var.numpy(), theirs.bn.running_var.numpy(),
                               rtol=1e-5)
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(ours(dptrain.tensor(x)).detach().numpy(),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("name, ours, theirs", [
    ("relu6", nn.ReLU6(), "ReLU6()"), ("elu", nn.ELU(0.5), "ELU(0.5)"),
    ("selu", nn.SELU(), "SELU()"),
    ("silu", nn.SiLU(), "SiLU()"), ("hardswish", nn.Hardswish(), "Hardswish()"),
    ("hardsigmoid", nn.Hardsigmoid(), "Hardsigmoid()"), ("tanh", nn.Tanh(), "Tanh()"),
    ("gelu_tanh", nn.GELU("tanh"), "GELU('tanh')"),
    ("hardtanh", nn.Hardtanh(-0.5, 2), "Hardtanh(-0.5, 2)"),
    ("logsoftmax", nn.LogSoftmax(dim=1), "LogSoftmax(dim=1)"),
    ("avgpool_pad", nn.AvgPool2d(3, 2, 1, count_include_pad=False),
     "AvgPool2d(3, 2, 1, count_include_pad=False)"),
    ("maxpool_ceil", nn.MaxPool2d(2, 2, ceil_mode=True), "MaxPool2d(2, 2, ceil_mode=True)"),
    ("adaptive", nn.AdaptiveAvgPool2d((2, 3)), "AdaptiveAvgPool2d((2, 3))"),
])
def test_activation_and_pooling_modules_equal_pytorch(name, ours, theirs):
    x = np.random.default_rng(5).standard_normal((2, 3, 5, 5)).astype(np.float32) * 3
    if name == "logsoftmax":
        x = x[:, :, 0, 0].copy()
    ref = eval("torch.nn." + theirs)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(dptrain.tensor(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-5)


def test_default_initialisation_is_pytorch_s():
    dptrain.manual_seed(7)
    conv = nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 9)  # kaiming_uniform(a=sqrt(5)) and the bias: both 1/sqrt(fan_in)
    w, b = conv.weight.detach().numpy(), conv.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.abs(b).max() <= bound
    lin = nn.Linear(400, 10)
    assert np.abs(lin.weight.detach().numpy()).max() <= 1 / 20
    assert np.abs(lin.bias.detach().numpy()).max() <= 1 / 20
    bn = nn.BatchNorm2d(3)
    assert bn.weight.tolist() == [1.0] * 3 and bn.running_var.tolist() == [1.0] * 3
    w = dptrain.zeros(200, 300)
    nn.init.xavier_uniform_(w)
    a = math.sqrt(6 / 500)
    assert np.abs(w.numpy()).max() <= a and abs(w.numpy().std() - a / math.sqrt(3)) < 0.02 * a
    nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 300)) < 0.02 * math.sqrt(2 / 300)
    nn.init.normal_(w, std=0.01)
    assert abs(w.numpy().std() - 0.01) < 0.0005
    nn.init.constant_(w, 0.5)
    assert np.all(w.numpy() == 0.5)
    with pytest.raises(ValueError, match="Fan in and fan out"):
        nn.init.xavier_uniform_(dptrain.zeros(5))


def test_functional_keyword_forms_and_argument_errors():
    X = dptrain.randn(2, 1, 8, 8)
    W, b = dptrain.randn(3, 1, 3, 3), dptrain.zeros(3)
    h = F.conv2d(input=X, weight=W, bias=b)
    assert h.shape == (2, 3, 6, 6)
    assert F.avg_pool2d(input=h, kernel_size=(2, 2), stride=(2, 2)).shape == (2, 3, 3, 3)
    assert F.max_pool2d(h, kernel_size=2).shape == (2, 3, 3, 3)
    assert F.conv2d(X, W, padding="same").shape == (2, 3, 8, 8)
    with pytest.raises(TypeError, match="argument 'weight' must be Tensor"):
        F.conv2d(X, [1.0])
    with pytest.raises(TypeError, match="argument 'stride' must be an int"):
        F.conv2d(X, W, stride=1.5)
    with pytest.raises(ValueError, match="'stride' must be >= 1"):
        F.conv2d(X, W, stride=0)
    with pytest.raises(ValueError, match="invalid padding string"):
        F.conv2d(X, W, padding="full")
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(dptrain.zeros(2, 3), dptrain.tensor([0, 1]), reduction="avg")
    with pytest.raises(ValueError, match="dropout probability"):
        F.dropout(X, p=1.5)
    with pytest.raises(ValueError, match="dim 1"):
        F.softmax(dptrain.zeros(2, 3), dim=0)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(dptrain.zeros(2, 3))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


def test_cross_entropy_reductions_agree():
    logits = dptrain.randn(6, 4)
    y = dptrain.tensor([0, 1, 2, 3, 0, 1])
    each = F.cross_entropy(logits, y, reduction="none").numpy()
    assert each.shape == (6,)
    np.testing.assert_allclose(F.cross_entropy(logits, y, reduction="sum").item(), each.sum(),
                               rtol=1e-5)
    np.testing.assert_allclose(nn.CrossEntropyLoss()(logits, y).item(), each.mean(), rtol=1e-5)
    p = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum(1, keepdims=True)
    np.testing.assert_allclose(each, -np.log(p[np.arange(6), y.numpy()]), rtol=1e-5)


def test_scatter_cuts_rows_as_torch_chunk():
    n = dptrain.cuda.device_count()
    devices = [dptrain.device(f"cuda:{i}") for i in range(n)]
    x = dptrain.tensor(np.arange(30 * 5, dtype=np.float32).reshape(30, 5))
    parts = nn.parallel.scatter(x, devices)
    sizes = [len(p) for p in parts]
    assert sizes == [len(c) for c in dptrain.chunk(x, n)] and sum(sizes) == 30
    assert [p.device for p in parts] == devices[:len(parts)]
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in parts]), x.numpy())
    pairs = nn.parallel.scatter((x, dptrain.arange(30)), devices)
    assert len(pairs) == len(parts) and [len(b) for _, b in pairs] == sizes


class Printing(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 2)
        self.sizes = []

    def forward(self, input):
        output = self.fc(input)
        self.sizes.append((tuple(input.size()), str(input.device)))
        return output


def test_data_parallel_cuts_runs_on_every_device_and_gathers():
    n = dptrain.cuda.device_count()
    model = Printing().to("cuda:0")  # DataParallel wants it on device_ids[0], as PyTorch
    dp = nn.DataParallel(model)
    assert dp.device_ids == list(range(n)) and dp.module is model
    assert list(dp.state_dict()) == ["module.fc.weight", "module.fc.bias"]
    x = dptrain.randn(30, 5)
    out = dp(x.to("cuda:0"))
    assert out.shape == (30, 2) and out.device == dptrain.device("cuda:0")
    expected = [len(c) for c in dptrain.chunk(x, n)]
    assert [s[0][0] for s in model.sizes] == expected
    assert len({s[1] for s in model.sizes}) == len(expected)
    one_device = model(x.to("cuda:0")).detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), one_device, rtol=1e-5, atol=1e-6)


def test_data_parallel_sums_every_replica_s_gradient_into_the_module():
    dptrain.manual_seed(3)
    a = Block().to("cuda:0")
    b = Block()
    b.load_state_dict(a.state_dict())
    # BatchNorm in training normalises each replica's rows by their own
    # statistics (as PyTorch's DataParallel); in eval mode every row sees
    # the same running statistics, so N devices must give 1 device's numbers.
    a.eval(), b.eval()
    x, y = dptrain.randn(8, 2, 4, 4), dptrain.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    loss_dp = nn.CrossEntropyLoss()(nn.DataParallel(a)(x), y.to("cuda:0"))
    loss_one = nn.CrossEntropyLoss()(b(x), y)
    loss_dp.backward()
    loss_one.backward()
    assert float(loss_dp) == pytest.approx(float(loss_one), rel=1e-5)
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    # In training, device_ids[0]'s replica (the module itself) keeps its
    # running statistics: those of its own rows.
    a.train()
    first_rows = len(dptrain.chunk(x, dptrain.cuda.device_count())[0])
    c = Block()
    c.load_state_dict(b.state_dict())
    nn.DataParallel(a)(x)
    c.train()(x[:first_rows])
    np.testing.assert_allclose(a.bn.running_mean.numpy(), c.bn.running_mean.numpy(), rtol=1e-5,
                               atol=1e-7)
    if dptrain.cuda.device_count() > 1:
        with pytest.raises(RuntimeError, match="device_ids\\[0\\]"):
            nn.DataParallel(Block().to("cuda:1"))(x)


@needs_torch
def test_conv_transpose_prelu_and_batch_norm_1d_equal_pytorch():
    x = np.random.default_rng(8).standard_normal((2, 3, 5, 5)).astype(np.float32)
    for ours, theirs in ((nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
                          torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)),
                         (nn.PReLU(3), torch.nn.PReLU(3))):
        assert repr(ours) == repr(theirs)
        copy_into_torch(ours, theirs)
        np.testing.assert_allclose(ours(dptrain.tensor(x)).detach().numpy(),
                                   theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-5,
                                   atol=1e-5)
    v = x[:, :, 0, 0].copy()
    bn, ref = nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    for _ in range(3):
        out = bn(dptrain.tensor(v)).detach().numpy()
        np.testing.assert_allclose(out, ref(torch.from_numpy(v)).detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), ref.running_var.numpy(), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 3

"""dptrain's random numbers are PyTorch's: after the same manual_seed, randn,
rand, normal, randperm, nn.init and the modules' default initialisation give
the same bits, and a shuffling DataLoader the same batches, with the draws
after it the same too (python/dptrain/_random.py, python/src/torch_rng.c).

Where PyTorch is installed every case is compared with it; without it, a
few values PyTorch 2.15 printed (torch.manual_seed(s), then the call) keep
the generator checked. PyTorch draws normals by Box-Muller over avx_mathfun's
polynomials on a CPU with AVX2; below that (ATEN_CPU_CAPABILITY=default) it
takes libm's, and the comparison is skipped, naming it."""
import hashlib
import os

import numpy as np
import pytest

import dptrain
from dptrain import nn

try:
    import torch
except ImportError:  # the comparisons with PyTorch are skipped, visibly
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def _cpu_has_avx2():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx2" in f.read()
    except OSError:
        return False


torch_takes_avx2_path = pytest.mark.skipif(
    os.environ.get("ATEN_CPU_CAPABILITY") == "default" or not _cpu_has_avx2(),
    reason="PyTorch draws normals with libm below AVX2 (ATEN_CPU_CAPABILITY=default or a CPU "
           "without avx2); dptrain draws them as PyTorch does on AVX2")


def bits(t):
    a = t.detach().numpy() if hasattr(t, "detach") else t.numpy()
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def test_pytorch_printed_values():
    # torch.manual_seed(0); torch.randn(20): elements 0, 7, 15, 19
    dptrain.manual_seed(0)
    assert [hex(v) for v in bits(dptrain.randn(20))[[0, 7, 15, 19]]] == \
        ["0xbf901b85", "0x3fed2f4e", "0xbf57fb33", "0x3d5c1b3a"]
    # fewer than 16: doubles by Box-Muller over libm
    dptrain.manual_seed(0)
    assert [hex(v) for v in bits(dptrain.randn(5))] == \
        ["0x3fc53f5c", "0xbe963c50", "0xc00b7149", "0x3f1184b6", "0xbf8ad1a1"]
    dptrain.manual_seed(1)
    assert dptrain.randperm(12).tolist() == [1, 4, 6, 8, 11, 0, 5, 3, 2, 9, 10, 7]
    dptrain.manual_seed(2)
    x = dptrain.empty(3)
    nn.init.uniform_(x, -0.1, 0.3)
    assert [hex(v) for v in bits(x)] == ["0x3e15610d", "0x3d56a6c7", "0x3e1e8fe2"]


def digest(t):
    return hashlib.sha256(bits(t).tobytes()).hexdigest()[:16]


@torch_takes_avx2_path
def test_pytorch_printed_digests():
    # The first 16 hex digits of the SHA-256 of the float32 bytes that PyTorch
    # 2.15 and 1.13 printed for each call: every bit of many draws.
    dptrain.manual_seed(0)
    assert digest(dptrain.randn(1003)) == "d8712f5f5c0c1803"
    dptrain.manual_seed(0)
    assert digest(dptrain.randn(1 << 20)) == "a64b21e3148993fa"  # rare roundings too
    dptrain.manual_seed(2**40 + 7)  # the twister takes the low 32 bits
    assert digest(dptrain.randn(1003)) == "2cf61bb069e0a6d1"
    dptrain.manual_seed(2)
    x = dptrain.empty(1000)
    nn.init.uniform_(x, -0.1, 0.3)
    assert digest(x) == "28e5a256222713a5"
    dptrain.manual_seed(4)
    assert digest(dptrain.normal(0.5, 0.01, size=(7,))) == "9b87f03686f307b7"


def test_seed_restarts_and_generators_are_separate():
    dptrain.manual_seed(5)
    a = bits(dptrain.randn(100))
    b = bits(dptrain.randn(100))
    assert not np.array_equal(a, b)
    dptrain.manual_seed(5)
    assert np.array_equal(bits(dptrain.randn(100)), a)
    g = dptrain.Generator().manual_seed(5)
    assert np.array_equal(bits(dptrain.randn(100, generator=g)), a)
    assert np.array_equal(bits(dptrain.randn(100)), b)  # the default one went on alone
    state = dptrain.get_rng_state()
    c = bits(dptrain.rand(33))
    dptrain.set_rng_state(state)
    assert np.array_equal(bits(dptrain.rand(33)), c)
    assert dptrain.initial_seed() == 5
    with pytest.raises(ValueError, match="not a state"):
        dptrain.set_rng_state(b"short")
    with pytest.raises(TypeError, match="dptrain.Generator"):
        dptrain.randn(3, generator=42)


@needs_torch
@torch_takes_avx2_path
@pytest.mark.parametrize("seed", [0, 1, 67280421310721, 2**64 - 1])
def test_draws_equal_pytorch(seed):
    for n in (1, 3, 15, 16, 17, 100, 1000, 102400):
        torch.manual_seed(seed)
        dptrain.manual_seed(seed)
        for _ in range(2):  # and the state after the first draw
            assert np.array_equal(bits(torch.randn(n)), bits(dptrain.randn(n))), ("randn", n)
            assert np.array_equal(bits(torch.rand(n)), bits(dptrain.rand(n))), ("rand", n)
        ref = torch.normal(0.5, 0.01, size=(n,))
        assert np.array_equal(bits(ref), bits(dptrain.normal(0.5, 0.01, size=(n,)))), n
    torch.manual_seed(seed)
    dptrain.manual_seed(seed)
    assert torch.randperm(60000).tolist() == dptrain.randperm(60000).tolist()
    shape = (50, 20, 5, 5)
    assert np.array_equal(bits(torch.randn(size=shape) * 0.01),
                          bits(dptrain.randn(size=shape) * 0.01))


@needs_torch
@torch_takes_avx2_path
def test_module_initialisation_equals_pytorch():
    def build(m):
        return [m.nn.Conv2d(1, 6, 5, padding=2), m.nn.Linear(400, 120), m.nn.BatchNorm2d(6),
                m.nn.Conv2d(3, 64, 7, bias=False), m.nn.Linear(3, 5)]
    torch.manual_seed(0)
    dptrain.manual_seed(0)
    for theirs, ours in zip(build(torch), build(dptrain)):
        for (name, a), (_, b) in zip(theirs.named_parameters(), ours.named_parameters()):
            assert np.array_equal(bits(a), bits(b)), (type(ours).__name__, name)
    for init in ("xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
                 "normal_", "uniform_"):
        a, b = torch.empty(64, 27), dptrain.empty(64, 27)
        getattr(torch.nn.init, init)(a)
        getattr(nn.init, init)(b)
        assert np.array_equal(bits(a), bits(b)), init


@needs_torch
@torch_takes_avx2_path
def test_dataloader_batches_and_later_draws_equal_pytorch():
    torch.manual_seed(3)
    dptrain.manual_seed(3)
    x = np.arange(103, dtype=np.float32)
    theirs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x)),
                                         batch_size=10, shuffle=True)
    ours = dptrain.utils.data.DataLoader(
        dptrain.utils.data.TensorDataset(dptrain.tensor(x)), batch_size=10, shuffle=True)
    plain_t = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x)),
                                          batch_size=50)
    plain_o = dptrain.utils.data.DataLoader(dptrain.utils.data.TensorDataset(dptrain.tensor(x)),
                                            batch_size=50)
    for _ in range(3):
        assert [b[0].tolist() for b in theirs] == [b[0].tolist() for b in ours]
        assert [b[0].tolist() for b in plain_t] == [b[0].tolist() for b in plain_o]
    assert np.array_equal(bits(torch.rand(20)), bits(dptrain.rand(20)))
    g_t, g_o = torch.Generator().manual_seed(9), dptrain.Generator().manual_seed(9)
    theirs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x)),
                                         batch_size=10, shuffle=True, generator=g_t)
    ours = dptrain.utils.data.DataLoader(
        dptrain.utils.data.TensorDataset(dptrain.tensor(x)), batch_size=10, shuffle=True,
        generator=g_o)
    assert [b[0].tolist() for b in theirs] == [b[0].tolist() for b in ours]
    split_t = torch.utils.data.random_split(range(30), [10, 20])
    split_o = dptrain.utils.data.random_split(range(30), [10, 20])
    assert [list(s) for s in split_t] == [list(s) for s in split_o]


FASHION = "/usr/share/datasets/fashion-mnist"


@needs_torch
@pytest.mark.skipif(not os.path.isdir(FASHION),
                    reason="Debian's dataset-fashion-mnist is not installed")
def test_fashion_mnist_loader_visits_pytorchs_order(tmp_path):
    # The built-in set's batches come from the C loader (its worker threads):
    # shuffled, they hold the samples PyTorch's DataLoader picks, epoch after
    # epoch, as seed 003's load_data_fashion_mnist makes them.
    from dptrain.vision import datasets, transforms
    test = datasets.FashionMNIST(str(tmp_path), train=False, transform=transforms.ToTensor(),
                                 download=True)
    n = len(test)
    in_file_order = dptrain.utils.data.DataLoader(test, batch_size=1000)
    labels = np.concatenate([y.numpy() for _, y in in_file_order])
    torch.manual_seed(11)
    dptrain.manual_seed(11)
    theirs = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(n)),
                                         batch_size=256, shuffle=True)
    ours = dptrain.utils.data.DataLoader(test, batch_size=256, shuffle=True, num_workers=2)
    for _ in range(2):
        for (idx,), (X, y) in zip(theirs, ours):
            np.testing.assert_array_equal(y.numpy(), labels[idx.numpy()])
    assert np.array_equal(bits(torch.randn(30)), bits(dptrain.randn(30)))

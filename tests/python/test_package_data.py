"""dptrain.utils.data, vision and d2l: DataLoader over Python datasets
(collation, shuffling, drop_last), over the built-in Fashion-MNIST (the C
loader: shapes, dtypes, values, normalisation), and d2l's helpers."""
import os

import numpy as np
import pytest

import dptrain
from dptrain import nd
from dptrain.utils import data
from dptrain.vision import datasets, transforms

FASHION = "/usr/share/datasets/fashion-mnist"
needs_fashion = pytest.mark.skipif(not os.path.isdir(FASHION),
                                   reason="Debian's dataset-fashion-mnist is not installed")


class Squares(data.Dataset):
    def __getitem__(self, i):
        return dptrain.tensor([float(i), float(i * i)]), i

    def __len__(self):
        return 10


def test_python_dataset_batches_collate_as_pytorch_s():
    loader = data.DataLoader(Squares(), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and [len(b[1]) for b in batches] == [4, 4, 2]
    X, y = batches[1]
    assert X.shape == (4, 2) and X.dtype is dptrain.float32 and y.dtype is dptrain.int32
    assert X.tolist() == [[4.0, 16.0], [5.0, 25.0], [6.0, 36.0], [7.0, 49.0]]
    assert y.tolist() == [4, 5, 6, 7]
    dropped = data.DataLoader(Squares(), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [len(b[1]) for b in dropped] == [4, 4]
    shuffled = data.DataLoader(Squares(), batch_size=3, shuffle=True)
    first = [v for _, y in shuffled for v in y.tolist()]
    second = [v for _, y in shuffled for v in y.tolist()]
    assert sorted(first) == list(range(10)) and sorted(second) == list(range(10))
    assert first != list(range(10)) and first != second  # a new order each epoch
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        data.DataLoader(Squares(), batch_size=0)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        data.DataLoader(Squares(), num_workers=-1)


def test_tensor_dataset_rows():
    X = dptrain.tensor(np.arange(20, dtype=np.float32).reshape(10, 2))
    y = dptrain.arange(10)
    ds = data.TensorDataset(X, y)
    assert len(ds) == 10 and ds[3][0].tolist() == [6.0, 7.0] and ds[3][1].tolist() == 3 \
        and ds[3][1].shape == ()  # an element of a vector is 0-d, as torch
    batches = list(data.DataLoader(ds, batch_size=4, shuffle=True))
    seen = np.concatenate([b[0].numpy() for b in batches])
    labels = np.concatenate([b[1].numpy() for b in batches])
    np.testing.assert_array_equal(seen[:, 0], labels * 2)  # rows stay together
    assert sorted(labels.tolist()) == list(range(10))
    with pytest.raises(ValueError, match="Size mismatch"):
        data.TensorDataset(X, dptrain.arange(3))


@needs_fashion
def test_fashion_mnist_batches_come_from_the_c_loader(tmp_path):
    train = datasets.FashionMNIST(str(tmp_path), train=True, transform=transforms.ToTensor(),
                                  download=True)
    test = datasets.FashionMNIST(str(tmp_path), train=False, transform=transforms.ToTensor(),
                                 download=True)
    assert len(train) == 60000 and len(test) == 10000
    loader = data.DataLoader(test, batch_size=256)
    assert len(loader) == 40
    X, y = next(iter(loader))
    assert X.shape == (256, 1, 28, 28) and X.dtype is dptrain.float32
    assert y.shape == (256,) and y.dtype is dptrain.int32
    values = X.numpy()
    assert values.min() >= 0 and values.max() <= 1 and values.max() > 0.9
    image, label = test[0]
    np.testing.assert_array_equal(values[0], image.numpy())
    assert label == int(y[0]) and train.classes[9] == "Ankle boot"
    to_normal = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.25,))])
    norm = datasets.FashionMNIST(str(tmp_path), train=False, download=True, transform=to_normal)
    Xn, _ = next(iter(data.DataLoader(norm, batch_size=256)))
    np.testing.assert_allclose(Xn.numpy(), (values - 0.5) / 0.25, rtol=1e-6, atol=1e-6)
    sizes = [len(b[1]) for b in data.DataLoader(test, batch_size=3000, drop_last=True)]
    assert sizes == [3000, 3000, 3000]
    with pytest.raises(RuntimeError, match="download=True"):
        datasets.FashionMNIST(str(tmp_path), train=True)
    with pytest.raises(ValueError, match="does not resize"):
        datasets.FashionMNIST(str(tmp_path), train=False, download=True,
                              transform=transforms.Compose([transforms.Resize(96),
                                                            transforms.ToTensor()]))


@needs_fashion
def test_d2l_helpers():
    from dptrain import d2l
    train_iter, test_iter = d2l.load_data_fashion_mnist(512)
    X, y = next(iter(train_iter))
    assert X.shape == (512, 1, 28, 28) and y.shape == (512,)
    acc = d2l.Accumulator(2)
    acc.add(3, dptrain.tensor([2.0]))
    acc.add(1, 1)
    assert acc[0] == 4.0 and acc[1] == 3.0
    logits = dptrain.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    assert d2l.accuracy(logits, dptrain.tensor([1, 1, 1])) == 2.0
    n = dptrain.cuda.device_count()
    assert d2l.try_all_gpus() == [dptrain.device(f"cuda:{i}") for i in range(n)]
    assert d2l.try_gpu(n) == dptrain.device("cpu") and d2l.try_gpu(0) == dptrain.device("cuda:0")
    Xs, ys = d2l.split_batch(X, y, d2l.try_all_gpus())
    assert sum(len(p) for p in Xs) == 512 and [len(p) for p in ys] == [len(p) for p in Xs]
    net = d2l.resnet18(10)
    assert net(dptrain.randn(2, 1, 28, 28)).shape == (2, 10)
    guess_zero = lambda x: dptrain.zeros(len(x), 10, device=x.device)  # noqa: E731
    assert d2l.evaluate_accuracy_gpu(guess_zero, test_iter, dptrain.device("cuda:0")) == \
        pytest.approx(0.1)
    w = [dptrain.ones(2).requires_grad_()]
    (w[0] * 3.0).sum().backward()
    d2l.sgd(w, 0.5, 3)
    assert w[0].tolist() == [0.5, 0.5] and w[0].grad.tolist() == [0.0, 0.0]
    parts = [dptrain.ones(2) * float(i + 1) for i in range(2)]
    d2l.allreduce(parts)
    assert [p.tolist() for p in parts] == [[3.0, 3.0], [3.0, 3.0]]


def test_nd_names_of_seed_002():
    a = nd.ones((1, 2))
    b = nd.ones((1, 2))
    c = a * b + 2
    assert c.wait_to_read() is c and c.tolist() == [[3.0, 3.0]]
    nd.waitall()
    assert nd.zeros(shape=20).shape == (20,)
    assert nd.arange(24).reshape((6, 4)).tolist()[5] == [20.0, 21.0, 22.0, 23.0]
    w = nd.random.normal(scale=0.01, shape=(200, 100)).numpy()
    assert abs(w.std() - 0.01) < 0.001
    u = nd.random.uniform(-1, 1, shape=(10000,)).numpy()
    assert u.min() >= -1 and u.max() < 1 and abs(u.mean()) < 0.05
    np.testing.assert_allclose(nd.dot(nd.array([[1, 2]]), nd.array([[3], [4]])).tolist(), [[11.0]])


def test_image_folder_reads_classes_and_pixels(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="Pillow writes the test's images")
    rng = np.random.default_rng(2)
    pixels = {}
    for cls in ("cat", "dog"):
        (tmp_path / "train" / cls).mkdir(parents=True)
        for k in range(3):
            a = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
            Image.fromarray(a).save(tmp_path / "train" / cls / f"{k}.png")
            pixels[(cls, k)] = a
    ds = datasets.ImageFolder(str(tmp_path / "train"), transform=transforms.ToTensor())
    assert len(ds) == 6 and ds.classes == ["cat", "dog"] and ds.class_to_idx["dog"] == 1
    X, y = next(iter(data.DataLoader(ds, batch_size=6)))
    assert X.shape == (6, 3, 6, 5) and y.tolist() == [0, 0, 0, 1, 1, 1]
    expected = pixels[("dog", 1)].transpose(2, 0, 1).astype(np.float32) / 255
    np.testing.assert_allclose(X[4].numpy(), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="train or test"):
        datasets.ImageFolder(str(tmp_path))


def _write_idx(path, array):
    import struct
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_mnist_is_found_where_torchvision_keeps_it(tmp_path):
    rng = np.random.default_rng(4)
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1, 5, 9, 2], np.uint8)
    _write_idx(raw / "t10k-images-idx3-ubyte", images)
    _write_idx(raw / "t10k-labels-idx1-ubyte", labels)
    ds = datasets.MNIST(str(tmp_path), train=False, transform=transforms.ToTensor())
    assert len(ds) == 7
    X, y = next(iter(data.DataLoader(ds, batch_size=7)))
    assert y.tolist() == labels.tolist()
    np.testing.assert_allclose(X.numpy()[:, 0], images / np.float32(255), rtol=1e-6)
    with pytest.raises(RuntimeError, match="does not download"):
        datasets.MNIST(str(tmp_path), train=True, download=True)


def test_cifar10_binary_batches(tmp_path):
    rng = np.random.default_rng(6)
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    labels = np.array([0, 9, 4], np.uint8)
    planes = rng.integers(0, 256, (3, 3, 32, 32), dtype=np.uint8)
    records = [np.concatenate([[labels[i]], planes[i].reshape(-1)]) for i in range(3)]
    (folder / "test_batch.bin").write_bytes(np.concatenate(records).astype(np.uint8).tobytes())
    norm = transforms.Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.5))
    ds = datasets.CIFAR10(str(tmp_path), train=False,
                          transform=transforms.Compose([transforms.ToTensor(), norm]))
    X, y = next(iter(data.DataLoader(ds, batch_size=3)))
    assert X.shape == (3, 3, 32, 32) and y.tolist() == [0, 9, 4]
    mean = np.array([0.5, 0.4, 0.3], np.float32)[:, None, None]
    std = np.array([0.2, 0.25, 0.5], np.float32)[:, None, None]
    np.testing.assert_allclose(X.numpy(), (planes / np.float32(255) - mean) / std, rtol=1e-5,
                               atol=1e-6)
    assert ds.classes[9] == "truck"
    with pytest.raises(RuntimeError, match="not under"):
        datasets.CIFAR10(str(tmp_path), train=True)


def test_d2l_animator_and_timer_keep_d2l_s_records():
    from dptrain import d2l
    animator = d2l.Animator(xlabel="epoch", xlim=[1, 3], legend=["train loss", "test acc"])
    animator.add(1, (0.9, 0.5))
    animator.add(2, (0.7, 0.6))
    assert animator.X == [[1, 2], [1, 2]] and animator.Y == [[0.9, 0.7], [0.5, 0.6]]
    legend = animator.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["train loss", "test acc"]
    assert [tuple(line.get_xydata()[-1]) for line in animator.axes[0].get_lines()] == \
        [(2.0, 0.7), (2.0, 0.6)]
    d2l.plot(np.arange(4), [np.arange(4) ** 2], xlabel="x", legend=["x^2"])
    timer = d2l.Timer()
    timer.stop()
    timer.start()
    timer.stop()
    assert len(timer.times) == 2 and timer.cumsum()[-1] == pytest.approx(timer.sum())
    assert timer.avg() == pytest.approx(timer.sum() / 2)

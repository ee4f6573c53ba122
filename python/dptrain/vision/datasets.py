"""dptrain.vision.datasets: torchvision's FashionMNIST, MNIST, CIFAR10 and
ImageFolder, read by the library's C readers (include/dp/data.h). A
DataLoader over one of them is the library's loader: batches of X float32
(N, C, H, W) and y int32 (N) straight from C.

Nothing is downloaded (dptrain has no network code): `download=True` for
FashionMNIST uses Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist) when `root` lacks the files, and says
so once."""

import os
import sys

import _dptrain

from . import transforms as T

__all__ = ["VisionDataset", "FashionMNIST", "MNIST", "CIFAR10", "ImageFolder"]

DEBIAN_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
_said_debian = False


class VisionDataset:
    """A split read by the library: len(), [i] -> (image, label), and the
    loader's options from `transform`."""

    _name = None
    classes = []

    def __init__(self, directory, train, transform, target_transform):
        if target_transform is not None:
            raise ValueError(f"{type(self).__name__}: target_transform is not supported (the "
                             f"labels come from the library's loader)")
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        self._c_dataset = _dptrain.Dataset(self._name, directory, train)
        # Checked now: a transform the loader cannot apply fails at construction.
        self._options = T.loader_options(transform, self._c_dataset.sample_shape)

    def _c_loader_options(self):
        return dict(self._options)

    def __len__(self):
        return len(self._c_dataset)

    def __getitem__(self, index):
        image, label = self._c_dataset.get(index)
        if self.transform is not None:
            image = self.transform(image)
        return image, label

    def __repr__(self):
        lines = [f"Dataset {type(self).__name__}", f"    Number of datapoints: {len(self)}",
                 f"    Split: {'Train' if self.train else 'Test'}"]
        if self.transform is not None:
            lines.append("    StandardTransform")
            lines.append("Transform: " + repr(self.transform).replace("\n", "\n           "))
        return "\n".join(lines)


def _has_idx(directory, train):
    stem = "train-images-idx3-ubyte" if train else "t10k-images-idx3-ubyte"
    return any(os.path.exists(os.path.join(directory, stem + ext)) for ext in ("", ".gz"))


def _idx_dir(root, folder, train):
    """Where torchvision keeps the files (root/Folder/raw), or root/Folder, or root."""
    for d in (os.path.join(root, folder, "raw"), os.path.join(root, folder), root):
        if _has_idx(d, train):
            return d
    return None


class FashionMNIST(VisionDataset):
    _name = "fashion-mnist"
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        global _said_debian
        root = os.path.expanduser(os.fspath(root))
        directory = _idx_dir(root, type(self).__name__, train)
        if directory is None:
            if not download:
                raise RuntimeError("Dataset not found. You can use download=True to download it")
            if not _has_idx(DEBIAN_FASHION_MNIST, train):
                raise RuntimeError(f"FashionMNIST: no files under {root} and dptrain does not "
                                   f"download; install Debian's dataset-fashion-mnist "
                                   f"({DEBIAN_FASHION_MNIST}) or put the four IDX files in "
                                   f"{os.path.join(root, 'FashionMNIST', 'raw')}")
            directory = DEBIAN_FASHION_MNIST
            if not _said_debian:
                print(f"FashionMNIST: using Debian's dataset-fashion-mnist in {directory} "
                      f"(nothing downloaded)", file=sys.stderr)
                _said_debian = True
        self.root = root
        super().__init__(directory, train, transform, target_transform)


class MNIST(VisionDataset):
    _name = "mnist"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six",
               "7 - seven", "8 - eight", "9 - nine"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        root = os.path.expanduser(os.fspath(root))
        directory = _idx_dir(root, "MNIST", train)
        if directory is None:
            hint = " (dptrain does not download)" if download else \
                ". You can use download=True to download it"
            raise RuntimeError(f"Dataset not found{hint}: put MNIST's four IDX files in "
                               f"{os.path.join(root, 'MNIST', 'raw')}")
        self.root = root
        super().__init__(directory, train, transform, target_transform)


class CIFAR10(VisionDataset):
    _name = "cifar10"
    classes = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
               "truck"]

    def __init__(self, root, train=True, transform=None, target_transform=None, download=False):
        root = os.path.expanduser(os.fspath(root))
        first = "data_batch_1.bin" if train else "test_batch.bin"
        if not any(os.path.exists(os.path.join(d, first))
                   for d in (root, os.path.join(root, "cifar-10-batches-bin"))):
            raise RuntimeError(f"Dataset not found or corrupted: CIFAR-10's binary version "
                               f"(cifar-10-batches-bin/{first}) is not under {root}"
                               + (" (dptrain does not download)" if download else ""))
        self.root = root
        super().__init__(root, train, transform, target_transform)


class ImageFolder(VisionDataset):
    """ImageFolder(root): root/CLASS/*.png|jpg, classes sorted by name. The
    library reads a split of DIR/train/CLASS or DIR/test/CLASS, so `root`
    must end in train or test; every image must have the first one's size."""

    _name = "folder"

    def __init__(self, root, transform=None, target_transform=None):
        root = os.path.abspath(os.path.expanduser(os.fspath(root)))
        parent, split = os.path.split(root)
        if split not in ("train", "test"):
            raise ValueError(f"ImageFolder: dptrain reads DIR/train/CLASS/... or "
                             f"DIR/test/CLASS/...; {root!r} does not end in train or test")
        self.root = root
        super().__init__(parent, split == "train", transform, target_transform)
        self.classes = list(self._c_dataset.class_names or [])
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

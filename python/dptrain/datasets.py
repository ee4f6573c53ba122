"""dptrain.datasets: the built-in datasets (the classes of
dptrain.vision.datasets, read by the library's C readers and loader)."""

from .vision.datasets import VisionDataset, FashionMNIST, MNIST, CIFAR10, ImageFolder

__all__ = ["VisionDataset", "FashionMNIST", "MNIST", "CIFAR10", "ImageFolder"]

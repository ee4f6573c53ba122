"""dptrain.vision: a torchvision-like namespace (`from dptrain import vision
as torchvision`): `datasets` (FashionMNIST, MNIST, CIFAR10, ImageFolder over
the library's readers and loader) and `transforms`."""

from . import datasets
from . import transforms

__all__ = ["datasets", "transforms"]

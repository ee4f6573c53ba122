"""dptrain.optim: SGD, Adam, AdamW (over the library's optimizers) and
lr_scheduler, with PyTorch's names, arguments and checks."""

from .optimizer import Optimizer
from .sgd_adam import SGD, Adam, AdamW
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]

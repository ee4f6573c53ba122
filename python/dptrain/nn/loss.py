"""The loss modules: CrossEntropyLoss (PyTorch's reduction and
label_smoothing) and MSELoss."""

from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "MSELoss"]


class CrossEntropyLoss(Module):
    """-log softmax(logits (N, K))[labels (N)], reduced by `reduction`:
    'mean' (the default), 'sum' or 'none' (one loss per row, (N))."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__()
        if weight is not None:
            raise ValueError("CrossEntropyLoss: class weights are not supported")
        if size_average is not None or reduce is not None:
            raise ValueError("CrossEntropyLoss: size_average and reduce are deprecated; "
                             "use reduction=")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class MSELoss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)

"""dptrain.nn: Module (subclassed in Python with a Python forward),
Parameter, the containers, every module an nn.Sequential file accepts (the
library's module list) with PyTorch's arguments and initialisation, the
losses, `functional`, `init`, and `parallel` (scatter, DataParallel)."""

from .parameter import Parameter, Buffer
from .module import Module
from .container import Sequential, ModuleList, ModuleDict
from .conv import Conv2d, ConvTranspose2d, Linear
from .activation import (ReLU, ReLU6, LeakyReLU, ELU, SELU, GELU, SiLU, Hardswish, Hardsigmoid,
                         Hardtanh, Sigmoid, Tanh, PReLU, Softmax, LogSoftmax)
from .layers import (MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d, BatchNorm2d, Dropout,
                     Flatten, Identity)
from .loss import CrossEntropyLoss, MSELoss
from . import functional
from . import init
from . import parallel
from .parallel import DataParallel

__all__ = ["Parameter", "Buffer", "Module", "Sequential", "ModuleList", "ModuleDict", "Conv2d",
           "ConvTranspose2d", "Linear", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "GELU",
           "SiLU", "Hardswish", "Hardsigmoid", "Hardtanh", "Sigmoid", "Tanh", "PReLU", "Softmax",
           "LogSoftmax", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm1d",
           "BatchNorm2d", "Dropout", "Flatten", "Identity", "CrossEntropyLoss", "MSELoss",
           "functional", "init", "parallel", "DataParallel"]

"""The networks of tests/onnx/onnx_torchvision.py, their data and their export.

Four torchvision architectures with random weights (no pretrained file is
read), each on the smallest input it takes at its usual depth:

  resnet18     torchvision's resnet18(num_classes=10) with a 1-channel stem
               (conv1 = Conv2d(1, 64, 7, 2, 3, bias=False)), 1x28x28: the
               stem and the stages leave 14, 7, 7, 4, 2, 1 pixels.
  mobilenet_v2 torchvision's mobilenet_v2(num_classes=10), 3x64x64: five
               stride-2 stages leave 2x2 before the pooling. Its classifier's
               Dropout(0.2) is set to p=0 for training (see below). Its
               depthwise convolutions are drawn again (see "Conditioning").
  squeezenet   torchvision's squeezenet1_1(num_classes=10), 3x34x34: 34 is
               the smallest side at which each of its three
               MaxPool2d(3, 2, ceil_mode=True) takes the extra, partial
               window (16 -> 8, 8 -> 4, 4 -> 2 pixels; floor mode gives 7,
               3, 1), so ceil_mode is exercised, not only parsed. Dropout(0.5)
               is set to p=0 for training.
  densenet     a DenseNet-style net of torchvision's own _DenseBlock (each
               dense layer BN-ReLU-Conv1x1-BN-ReLU-Conv3x3, its output
               concatenated to its input) and _Transition, 3x32x32: stem
               conv, a block of 3 layers (16 -> 40 channels), a transition
               (BN-ReLU-Conv1x1, 40 -> 20, AvgPool2d(2), which
               torch.onnx.export writes as a Pad of nothing before
               AveragePool), a block of 2 layers (20 -> 36), BN, ReLU,
               global average pooling and Linear(36, 10).

Dropout: a training-mode forward draws a random mask in each framework, so
the training-mode comparisons and the training steps use p=0 (the module's
Dropout kept, its p set to 0); the eval-mode comparison also runs the
export with torchvision's own p.

Conditioning: the training steps are compared with PyTorch's in float32
to 1e-3, which only means something where rounding alone moves the losses
far less; onnx_torchvision.py prints that spread (PyTorch float32 against
float64) for each net. torchvision draws a depthwise 3x3 kernel of
MobileNetV2 with Kaiming's fan_out counted as out_channels * 9 (960 * 9
in the last blocks), so its outputs have a batch variance near 1e-5 or
far below, under batch norm's eps; the batch-statistics gradients of
those layers then lose most of their float32 digits (PyTorch float32
against float64: 3.5e-2 after 5 steps at 3x32x32, lr 0.001). Drawn with
Kaiming's fan_in (9 per channel) instead, at 3x64x64 (2x2 rather than 1x1
pixels in the last blocks) and lr 1e-4, the spread is 1.7e-4. ResNet-18,
SqueezeNet and DenseNet agree to 3e-7 at lr 0.001 as built.

Batch norm: every BatchNorm2d gets a random affine transform and random
running statistics (mean N(0, 0.2^2), variance U(0.5, 2)) before export,
so that eval mode, which reads them, differs from training mode and a
swapped or misnamed statistic shows.
"""
import copy
import warnings

import numpy as np
import torch
import torchvision

import compare
from torch import nn
from torchvision.models.densenet import _DenseBlock, _Transition

CLASSES = 10


def resnet18():
    m = torchvision.models.resnet18(num_classes=CLASSES)
    m.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    return m


def mobilenet_v2():
    return torchvision.models.mobilenet_v2(num_classes=CLASSES)


def squeezenet():
    return torchvision.models.squeezenet1_1(num_classes=CLASSES)


class DenseNetStyle(nn.Module):
    """Two dense blocks of torchvision's _DenseBlock around its _Transition."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False),
            _DenseBlock(num_layers=3, num_input_features=16, bn_size=2, growth_rate=8,
                        drop_rate=0.0),
            _Transition(num_input_features=40, num_output_features=20),
            _DenseBlock(num_layers=2, num_input_features=20, bn_size=2, growth_rate=8,
                        drop_rate=0.0),
            nn.BatchNorm2d(36), nn.ReLU())
        self.classifier = nn.Linear(36, CLASSES)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# name -> (builder, sample shape (C, H, W), SGD's learning rate)
NETS = {
    "resnet18": (resnet18, (1, 28, 28), 1e-3),
    "mobilenet_v2": (mobilenet_v2, (3, 64, 64), 1e-4),
    "squeezenet": (squeezenet, (3, 34, 34), 1e-3),
    "densenet": (lambda: DenseNetStyle(), (3, 32, 32), 1e-3),
}


def build(name, seed):
    """The net with seed's weights and random batch norm, dropout as built,
    depthwise kernels drawn with fan_in (see "Conditioning")."""
    make, chw, _ = NETS[name]
    torch.manual_seed(seed)
    m = make()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, nn.Conv2d) and mod.groups > 1:
                nn.init.kaiming_normal_(mod.weight, mode="fan_in")
            if isinstance(mod, nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0.0, 0.2)
                mod.running_mean.normal_(0.0, 0.2)
                mod.running_var.uniform_(0.5, 2.0)
    return m, chw


def dropout_ps(m):
    return [mod.p for mod in m.modules() if isinstance(mod, nn.Dropout)]


def without_dropout(m):
    """A copy of m whose Dropout modules have p=0."""
    m = copy.deepcopy(m)
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    return m


def export(m, chw, path):
    """torch.onnx.export in training mode (batch norm a node, its running
    statistics initializers) without constant folding, for any batch size.
    The export traces a training-mode forward, which moves the running
    statistics of the module it traces: a copy is traced, and m then takes
    the file's statistics (sync_from_file), so that both frameworks start
    from the file's values."""
    x = torch.zeros(2, *chw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(copy.deepcopy(m), x, path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"],
                          output_names=["logits"],
                          dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def initializers(path):
    """{name: tensor} of the ONNX file's initializers."""
    import onnx
    from onnx import numpy_helper
    g = onnx.load(path).graph
    return {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in g.initializer}


def sync_from_file(m, path):
    """Loads the file's initializers into m by their names (the state_dict
    keys, as torch.onnx.export names them). Returns the state_dict keys
    the file lacks (or holds in another shape; num_batches_tracked is no
    initializer) and the largest difference between m's parameters and
    the file's (0: the export wrote m's weights)."""
    inits = initializers(path)
    state, missing = m.state_dict(), []
    params = dict(m.named_parameters())
    diff = 0.0
    for k, v in state.items():
        if k.endswith("num_batches_tracked"):
            continue
        if k not in inits or tuple(inits[k].shape) != tuple(v.shape):
            missing.append(k)
            continue
        if k in params:
            diff = compare.worst([diff, float((inits[k] - v).abs().max())])  # inf for NaN
        state[k] = inits[k]
    if not missing:
        m.load_state_dict(state, strict=True)
    return missing, diff


def data(chw, n, seed):
    """n float32 samples of shape chw and their labels: each class a fixed
    random pattern plus as much noise, so that a few SGD steps lower the
    loss smoothly rather than chase random labels."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randn(CLASSES, *chw, generator=g)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = patterns[y] + torch.randn(n, *chw, generator=g)
    return x.float(), y


def save_split(d, split, x, y):
    import os
    os.makedirs(os.path.join(d, split), exist_ok=True)
    np.save(os.path.join(d, split, "images.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(d, split, "labels.npy"), y.numpy().astype(np.int64))

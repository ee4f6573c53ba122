#!/usr/bin/python3
"""Models exported by PyTorch's own torch.onnx.export, for test_onnx_torch.c.

  /usr/bin/python3 tests/onnx/onnx_torch_models.py OUTDIR NAME...

For each NAME (a key of MODELS below, e.g. "mobilenet_v2"), writes into
OUTDIR/NAME/:
  model.onnx   the model exported at the opset MODELS gives, in eval mode
               (torch's default: batch norm folded into the convolutions,
               constants folded), or, for the "train" kind, in training mode
               without constant folding (batch norm nodes and the state_dict's
               names kept);
  input.bin    a batch of float32 inputs (little-endian, logical order);
  output.bin   the eval-mode output PyTorch computes for it;
  shape.txt    the input's shape, then the output's ("2 3 64 64\\n2 10\\n");
  params.txt   for "train" models: each parameter's state_dict name and
               shape, one a line, in registration order.
Batch norm layers get random running statistics and affine parameters, so
that folding them is no identity. Prints one line per model.
"""
import os
import sys
import warnings

import torch
import torch.nn as nn
import torchvision

warnings.filterwarnings("ignore")


def seq(*modules):
    return lambda: nn.Sequential(*modules)


def tv(name, **kw):
    return lambda: getattr(torchvision.models, name)(**kw)


class Scalars(nn.Module):
    """Arithmetic with numbers, which torch writes as Constant nodes of one
    value feeding Mul, Add, Div and Sub (the constant on either side)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc = nn.Linear(8 * 14 * 14, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x) * 0.5 + 1.0)
        return self.fc(torch.flatten(1.0 - y / 2.0, 1))


# name: (builder, input shape, opset, kind)
MODELS = {
    # commit by commit: the torchvision networks the loader runs
    "mobilenet_v2": (tv("mobilenet_v2", num_classes=10), (2, 3, 64, 64), 13, "eval"),
    "resnet18": (tv("resnet18", num_classes=10), (2, 3, 64, 64), 17, "eval"),
    "regnet_x_400mf": (tv("regnet_x_400mf", num_classes=10), (2, 3, 64, 64), 11, "eval"),
    "squeezenet1_0": (tv("squeezenet1_0", num_classes=10), (2, 3, 64, 64), 13, "eval"),
    "squeezenet1_1": (tv("squeezenet1_1", num_classes=10), (2, 3, 64, 64), 17, "eval"),
    "googlenet": (tv("googlenet", num_classes=10, aux_logits=False, init_weights=True),
                  (2, 3, 64, 64), 13, "eval"),
    "densenet121": (tv("densenet121", num_classes=10), (2, 3, 64, 64), 13, "eval"),
    "densenet_train": (tv("densenet121", num_classes=10), (2, 3, 32, 32), 13, "train"),
    "efficientnet_b0": (tv("efficientnet_b0", num_classes=10), (2, 3, 64, 64), 13, "eval"),
    "mobilenet_v3_small": (tv("mobilenet_v3_small", num_classes=10), (2, 3, 64, 64), 13, "eval"),
    "mobilenet_v3_small17": (tv("mobilenet_v3_small", num_classes=10), (2, 3, 64, 64), 17,
                             "eval"),
    "alexnet": (tv("alexnet", num_classes=10), (2, 3, 96, 96), 13, "eval"),
    # nn.Sequential bodies, exported in training mode: batch norm kept
    "bn_cnn_train": (seq(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, groups=2), nn.BatchNorm2d(16),
                         nn.ReLU(), nn.Dropout(0.3), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, 10)), (2, 3, 16, 16), 13, "train"),
    # AvgPool2d with padding: torch writes Pad -> AveragePool
    "avgpool_pad": (seq(nn.Conv2d(3, 8, 3), nn.AvgPool2d(3, 1, 1), nn.ReLU(),
                        nn.AvgPool2d(3, 2, 1), nn.Flatten(), nn.Linear(8 * 7 * 7, 10)),
                    (2, 3, 16, 16), 13, "eval"),
    # nn.GELU's sub-graphs (Erf, and the tanh approximation's), one op each
    "gelu": (seq(nn.Conv2d(3, 8, 3), nn.GELU(), nn.Conv2d(8, 8, 3), nn.GELU(approximate="tanh"),
                 nn.Flatten(), nn.Linear(8 * 12 * 12, 10)), (2, 3, 16, 16), 13, "eval"),
    # x * 0.5 + 1, 1 - y / 2: constants of one value as operands
    "scalars": (Scalars, (2, 3, 16, 16), 13, "eval"),
    # PReLU's slopes keep the state_dict's names and shapes (C) and (1)
    "prelu_train": (seq(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(8), nn.Conv2d(8, 8, 3, groups=4),
                        nn.PReLU(), nn.MaxPool2d(3, 2, ceil_mode=True), nn.Flatten(),
                        nn.Linear(8 * 7 * 7, 10), nn.LogSoftmax(1)), (2, 3, 16, 16), 13, "train"),
}


def randomize(model, gen):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)


def export(name, outdir):
    build, shape, opset, kind = MODELS[name]
    gen = torch.Generator().manual_seed(1234)
    torch.manual_seed(1234)
    model = build()
    randomize(model, gen)
    model.eval()
    x = torch.randn(shape, generator=gen)
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    kw = {}
    if kind == "train":
        kw = {"training": torch.onnx.TrainingMode.TRAINING, "do_constant_folding": False}
    torch.onnx.export(model, x, os.path.join(d, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, **kw)
    # After the export: tracing in training mode runs a forward that moves
    # batch norm's running statistics, and the file holds them as moved.
    model.eval()
    with torch.no_grad():
        y = model(x)
    x.numpy().astype("<f4").tofile(os.path.join(d, "input.bin"))
    y.numpy().astype("<f4").tofile(os.path.join(d, "output.bin"))
    with open(os.path.join(d, "shape.txt"), "w") as f:
        f.write(" ".join(str(s) for s in x.shape) + "\n")
        f.write(" ".join(str(s) for s in y.shape) + "\n")
    if kind == "train":
        with open(os.path.join(d, "params.txt"), "w") as f:
            for pname, p in model.named_parameters():
                f.write(pname + " " + " ".join(str(s) for s in p.shape) + "\n")
    print("exported %s (opset %d, %s mode): input %s, output %s" %
          (name, opset, kind, list(x.shape), list(y.shape)))


def main():
    outdir = sys.argv[1]
    torch.set_num_threads(1)
    for name in sys.argv[2:]:
        export(name, outdir)


if __name__ == "__main__":
    main()

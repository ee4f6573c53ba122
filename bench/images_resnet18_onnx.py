#!/usr/bin/python3
"""torchvision's ResNet-18 for 3x224x224 images and 10 classes, as ONNX, for
the end-to-end part of bench/images_vs_torchvision.sh:

    /usr/bin/python3 bench/images_resnet18_onnx.py OUT.onnx

torchvision.models.resnet18(num_classes=10), random weights (seed 0),
exported by tests/onnx/onnx_torchvision_nets.py's export(), the one the
ONNX interop tests use: training mode without constant folding (batch
norm stays a node that dptrain trains), any batch size. Needs torch,
torchvision and onnx: Debian's python3-torch, python3-torchvision and
python3-onnx (tests/onnx/cli_onnx_torchvision.sh uses the same).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "onnx"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "util"))

import torch  # noqa: E402
import torchvision  # noqa: E402

import onnx_torchvision_nets  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: images_resnet18_onnx.py OUT.onnx")
    out = sys.argv[1]
    torch.manual_seed(0)
    torch.set_num_threads(1)
    m = torchvision.models.resnet18(num_classes=10)
    tmp = out + ".tmp"
    onnx_torchvision_nets.export(m, (3, 224, 224), tmp)
    os.replace(tmp, out)
    print(f"{out}: torchvision resnet18(num_classes=10), input N x 3 x 224 x 224, "
          f"torch {torch.__version__}")


if __name__ == "__main__":
    main()

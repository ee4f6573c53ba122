"""How far two float32 PyTorch runs of torchvision's ResNet-18 that compute
the same thing drift apart: NCHW against channels_last (other convolution
kernels, other rounding), SGD lr 1e-4, momentum 0.9, batch 32, the first
Fashion-MNIST images in order, after 1, 2, 3, 5 and 20 steps, as
max |difference| / max |weight| (bench/batch_norm_rounding.sh's measure).

usage: /usr/bin/python3 bench/resnet_layout_rounding.py [STEPS=20]"""
import copy
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "util"))
from pytorch_compat_io import load  # noqa: E402


def train(base, x, y, steps, channels_last):
    net = copy.deepcopy(base)
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=1e-4, momentum=0.9)
    net.train()
    for s in range(steps):
        xb = x[s * 32:(s + 1) * 32]
        if channels_last:
            xb = xb.contiguous(memory_format=torch.channels_last)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xb), y[s * 32:(s + 1) * 32]).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in net.parameters()])


def main():
    last = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.set_num_threads(2)
    x, y = load("/usr/share/datasets/fashion-mnist", "train", 32 * last)
    x = x.reshape(-1, 1, 28, 28)
    torch.manual_seed(0)
    base = torchvision.models.resnet18(num_classes=10)
    base.conv1 = torch.nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    for steps in sorted({1, 2, 3, 5, last}):
        a, b = train(base, x, y, steps, False), train(base, x, y, steps, True)
        d = (a - b).abs().max().item() / a.abs().max().item()
        print(f"torch {torch.__version__}, after {steps} step(s): NCHW vs channels_last, "
              f"weights {d:.2e}")


if __name__ == "__main__":
    main()

"""Batch norm's first gradients against PyTorch in float64.

dptrain trains a conv / batch norm / ReLU / max pool net (the model file
below) one step on the first 32 Fashion-MNIST images, with lr 1e-30 so that
the checkpoint keeps the starting weights and SGD's momentum buffer holds
the first gradient. PyTorch loads those weights into the same nn.Sequential
and computes the gradient in float64 (the truth) and in float32. For each
weight, max |g - g64| / max |g64|: dptrain's must be within twice PyTorch
float32's (and 1e-5). dptrain summing batch norm's statistics in float
gave 1.8e-02 for the first convolution here.

usage: bn_float64.py DPTRAIN WORKDIR"""
import copy
import os
import subprocess
import sys

import torch

# compare, pytorch_compat_io: tests/util/.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "util"))
import compare  # noqa: E402
from pytorch_compat_io import load, read_safetensors  # noqa: E402

MODEL = """Conv2d(1, 32, 3, padding=1)
BatchNorm2d(32)
ReLU()
MaxPool2d(3, 2, 1)
Conv2d(32, 64, 3, padding=1)
BatchNorm2d(64)
ReLU()
MaxPool2d(2)
Flatten()
Linear(3136, 10)
"""
DATA = "/usr/share/datasets/fashion-mnist"


def torch_net():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1), nn.Conv2d(32, 64, 3, padding=1),
                         nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 10))


def gradients(net, x, y, dtype):
    net = copy.deepcopy(net).to(dtype).train()
    torch.nn.functional.cross_entropy(net(x.to(dtype)), y).backward()
    return {k: p.grad.detach().to(torch.float64, copy=True) for k, p in net.named_parameters()}


def main():
    dptrain, work = sys.argv[1], sys.argv[2]
    model = os.path.join(work, "bn_net.txt")
    ck = os.path.join(work, "bn_net.safetensors")
    with open(model, "w") as f:
        f.write(MODEL)
    subprocess.run([dptrain, "train", "--model", model, "--limit-train", "32", "--limit-test",
                    "32", "--batch-size", "32", "--epochs", "1", "--lr", "1e-30", "--momentum",
                    "0.9", "--devices", "1", "--progress", "never", "--checkpoint", ck],
                   check=True, stdout=subprocess.DEVNULL)
    t, _ = read_safetensors(ck)
    net = torch_net()
    net.load_state_dict({k: v for k, v in t.items() if not k.startswith("_")}, strict=True)
    x, y = load(DATA, "train", 32)
    x = x.reshape(-1, 1, 28, 28)
    g64 = gradients(net, x, y, torch.float64)
    g32 = gradients(net, x, y, torch.float32)
    # the momentum buffer holds the parameters' gradients in their order
    flat = t["_state.sgd.momentum_buffer"].double()
    ours, off = {}, 0
    for k, p in net.named_parameters():
        ours[k] = flat[off:off + p.numel()].reshape(p.shape)
        off += p.numel()
    assert off == flat.numel(), (off, flat.numel())
    worst = 0.0
    for k in g64:
        if not k.endswith("weight"):
            continue
        scale = g64[k].abs().max().item()
        e_ours = (ours[k] - g64[k]).abs().max().item() / scale
        e_torch = (g32[k] - g64[k]).abs().max().item() / scale
        print(f"{k:10} dptrain {e_ours:.2e}, PyTorch float32 {e_torch:.2e} off float64")
        if not compare.close(e_ours, 0, 0, min(max(2 * e_torch, 1e-6), 1e-5)):  # NaN fails
            worst = compare.worst([worst, e_ours])
            print(f"FAIL: {k}: dptrain's gradient is {e_ours:.2e} off float64's")
    sys.exit(1 if worst else 0)


if __name__ == "__main__":
    main()

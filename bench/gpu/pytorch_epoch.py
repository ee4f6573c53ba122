"""One training epoch of LeNet or ResNet-18 on Fashion-MNIST on a CUDA GPU in PyTorch.

The models are dptrain's: LeNet as bench/lenet_pytorch.py (the d2l seed's,
from scratch), ResNet-18 from tests/util/pytorch_compat.py. Batches are copied
from pinned host memory with non_blocking=True, as a tuned PyTorch loop
does. Prints `SEC_PER_EPOCH <seconds>` (the epoch's wall time, after one
untimed warm-up step, synchronized at the end).
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "util"))
from pytorch_compat import resnet18  # noqa: E402

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path, offset):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(data_dir):
    def find(name):
        for p in (os.path.join(data_dir, name + ".gz"), os.path.join(data_dir, name)):
            if os.path.exists(p):
                return p
        sys.exit(f"error: {name}(.gz) not found in {data_dir}")
    x = read_idx(find("train-images-idx3-ubyte"), 16).reshape(-1, 1, 28, 28)
    y = read_idx(find("train-labels-idx1-ubyte"), 8).astype(np.int64)
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y)


class LeNet(nn.Module):
    """dptrain's LeNet (src/nn/lenet.c): W3 is (800, 128), used as torch.mm."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 20, 3)
        self.c2 = nn.Conv2d(20, 50, 5)
        self.W3 = nn.Parameter(torch.randn(800, 128) * 0.01)
        self.b3 = nn.Parameter(torch.zeros(128))
        self.W4 = nn.Parameter(torch.randn(128, 10) * 0.01)
        self.b4 = nn.Parameter(torch.zeros(10))

    def forward(self, x):
        h = F.avg_pool2d(F.relu(self.c1(x)), 2)
        h = F.avg_pool2d(F.relu(self.c2(h)), 2)
        h = F.relu(torch.mm(h.reshape(h.shape[0], -1), self.W3) + self.b3)
        return torch.mm(h, self.W4) + self.b4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["lenet", "resnet18"], required=True)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--data-dir", default=DATA_DIR)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("error: PyTorch sees no CUDA GPU")
    dev = torch.device(args.device)
    torch.manual_seed(0)
    X, y = load(args.data_dir)
    X, y = X.pin_memory(), y.pin_memory()
    net = (LeNet() if args.model == "lenet" else resnet18(10, 1)).to(dev)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    bs = args.batch_size
    perm = torch.randperm(X.shape[0])

    def step(idx):
        xb = X[idx].pin_memory().to(dev, non_blocking=True)
        yb = y[idx].pin_memory().to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(xb), yb)
        loss.backward()
        for p in net.parameters():  # the seed's sgd: divide by the batch size
            p.grad.div_(xb.shape[0])
        opt.step()
        return loss

    step(perm[:bs])  # warm-up: cuDNN's algorithm choice, allocator
    torch.cuda.synchronize(dev)
    start = time.perf_counter()
    for i in range(0, X.shape[0], bs):
        step(perm[i:i + bs])
    torch.cuda.synchronize(dev)
    print(f"SEC_PER_EPOCH {time.perf_counter() - start:.3f}")
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name(dev)}, cudnn.allow_tf32 "
          f"{torch.backends.cudnn.allow_tf32}, matmul.allow_tf32 "
          f"{torch.backends.cuda.matmul.allow_tf32}", file=sys.stderr)


if __name__ == "__main__":
    main()

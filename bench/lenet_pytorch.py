#!/usr/bin/python3
"""LeNet on Fashion-MNIST in PyTorch: the reference that dptrain is timed against.

The d2l "from scratch" LeNet, written with raw tensors exactly as dptrain's
`--model lenet` is: conv 3x3 (1->20) -> relu -> avgpool 2 -> conv 5x5 (20->50)
-> relu -> avgpool 2 -> fc 800->128 -> relu -> fc 128->10, weights randn*0.01,
biases 0, summed cross-entropy, plain SGD p -= lr * grad / batch_size.

Data is read straight from the IDX files (no torchvision) and held in memory
before timing starts, so the reported time is training only; evaluation on the
test set, if on, is also outside the timed region.

Run with Debian's interpreter (the one that has torch):
  OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/lenet_pytorch.py --epochs 1
Last line printed: `SEC_PER_EPOCH <mean training seconds per epoch>`.
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

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx_images(path):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    n = int.from_bytes(buf[4:8], "big")
    rows = int.from_bytes(buf[8:12], "big")
    cols = int.from_bytes(buf[12:16], "big")
    x = np.frombuffer(buf, dtype=np.uint8, offset=16).reshape(n, 1, rows, cols)
    return torch.from_numpy(x.astype(np.float32) / 255.0)


def read_idx_labels(path):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    return torch.from_numpy(np.frombuffer(buf, dtype=np.uint8, offset=8).astype(np.int64))


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx_images(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx_labels(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    assert x.shape[0] == y.shape[0], (x.shape, y.shape)
    return x, y


def init_params(gen):
    def w(*shape):
        return (torch.randn(*shape, generator=gen) * 0.01).requires_grad_()

    def b(n):
        return torch.zeros(n, requires_grad=True)

    return [w(20, 1, 3, 3), b(20), w(50, 20, 5, 5), b(50),
            w(800, 128), b(128), w(128, 10), b(10)]


def lenet(X, params):
    W1, b1, W2, b2, W3, b3, W4, b4 = params
    h = F.avg_pool2d(F.relu(F.conv2d(X, W1, b1)), kernel_size=2, stride=2)   # (N,20,13,13)
    h = F.avg_pool2d(F.relu(F.conv2d(h, W2, b2)), kernel_size=2, stride=2)   # (N,50,4,4)
    h = h.reshape(h.shape[0], -1)                                            # (N,800)
    h = F.relu(torch.mm(h, W3) + b3)
    return torch.mm(h, W4) + b4


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad / batch_size
            p.grad.zero_()


def evaluate(params, X, y, batch_size=1024):
    correct = 0
    with torch.no_grad():
        for i in range(0, X.shape[0], batch_size):
            out = lenet(X[i:i + batch_size], params)
            correct += (out.argmax(dim=1) == y[i:i + batch_size]).sum().item()
    return correct / X.shape[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--eval", action=argparse.BooleanOptionalAction, default=True,
                    help="test accuracy after each epoch (not timed; default on)")
    ap.add_argument("--limit-train", type=int, default=0, metavar="N",
                    help="train on the first N examples only (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=DATA_DIR)
    ap.add_argument("--bf16", action="store_true",
                    help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    ap.add_argument("--channels-last", action="store_true",
                    help="inputs and convolution weights in torch.channels_last (NHWC)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    X_train, y_train = load(args.data_dir, "train")
    if args.limit_train > 0:
        X_train, y_train = X_train[:args.limit_train], y_train[:args.limit_train]
    X_test, y_test = load(args.data_dir, "test") if args.eval else (None, None)
    n = X_train.shape[0]
    bs = args.batch_size

    params = init_params(gen)
    if args.channels_last:  # the two convolution weights (4-D) in NHWC order
        with torch.no_grad():
            for i in (0, 2):
                params[i] = params[i].detach().contiguous(
                    memory_format=torch.channels_last).requires_grad_()
    loss_fn = nn.CrossEntropyLoss(reduction="none")
    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')}, "
          f"train {n} test {0 if X_test is None else X_test.shape[0]}, "
          f"batch {bs}, lr {args.lr}, {'bf16 autocast' if args.bf16 else 'fp32'}, "
          f"{'channels_last' if args.channels_last else 'NCHW'}", flush=True)

    times = []
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(n, generator=gen)
        loss_sum = torch.zeros(())
        correct = torch.zeros((), dtype=torch.int64)
        t0 = time.perf_counter()
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            X, y = X_train[idx], y_train[idx]
            if args.channels_last:
                X = X.contiguous(memory_format=torch.channels_last)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                out = lenet(X, params)
                l = loss_fn(out, y).sum()
            l.backward()
            sgd(params, args.lr, X.shape[0])  # last batch may be short (60000 % 256 = 96)
            with torch.no_grad():
                loss_sum += l.detach()
                correct += (out.argmax(dim=1) == y).sum()
        dt = time.perf_counter() - t0
        times.append(dt)
        line = (f"epoch {epoch}: loss {loss_sum.item() / n:.4f} "
                f"train acc {correct.item() / n:.4f}")
        if args.eval:
            line += f" test acc {evaluate(params, X_test, y_test):.4f}"
        print(f"{line}, {dt:.2f} sec/epoch", flush=True)

    print(f"SEC_PER_EPOCH {sum(times) / len(times):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

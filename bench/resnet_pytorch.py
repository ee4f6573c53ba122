#!/usr/bin/python3
"""ResNet-18 training steps on Fashion-MNIST in PyTorch: the reference that
dptrain's `--model resnet18` is timed against.

d2l's resnet18(num_classes=10, in_channels=1) of the multi-GPU concise
chapter, on 1x28x28 inputs (no resize): conv 3x3 1->64 + BN + ReLU, four
stages of two Residual blocks (64, 128, 256, 512 channels; stages 2-4 start
with a stride-2 block with a 1x1 projection), global average pool, linear
512->10. PyTorch's default init, then normal_(std=0.01) on every Conv2d and
Linear weight (d2l's init_weights). One step = forward, mean cross-entropy,
backward, SGD update (torch.optim.SGD, lr 0.1), in train mode (BatchNorm on
batch statistics).

Batches are the training set in file order (batch i = images i*B..(i+1)*B-1,
wrapping), read from the IDX files (no torchvision) and held in memory before
timing. --warmup steps are run first and not timed (allocator, oneDNN
primitive creation), then the median of --steps timed steps is reported.

Run with Debian's interpreter (the one that has torch):
  OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/resnet_pytorch.py
  ... bench/resnet_pytorch.py --channels-last
Last line printed: `SEC_PER_STEP <median seconds per training step>`.
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"
STEPS_PER_EPOCH = 235  # ceil(60000 / 256)


def read_idx_images(path, limit):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    n, rows, cols = (int.from_bytes(buf[i:i + 4], "big") for i in (4, 8, 12))
    n = min(n, limit)
    x = np.frombuffer(buf, dtype=np.uint8, count=n * rows * cols, offset=16)
    return torch.from_numpy(x.reshape(n, 1, rows, cols).astype(np.float32) / 255.0)


def read_idx_labels(path, limit):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    y = np.frombuffer(buf, dtype=np.uint8, offset=8)[:limit]
    return torch.from_numpy(y.astype(np.int64))


# The seed's ResNet-18, defined once, in tests/util/pytorch_compat.py.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "util"))
from pytorch_compat import resnet18  # noqa: E402


def init_weights(m):
    if type(m) in [nn.Linear, nn.Conv2d]:
        nn.init.normal_(m.weight, std=0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first [2]")
    ap.add_argument("--steps", type=int, default=10, help="timed steps [10]")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads [2]")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and inputs in torch.channels_last (NHWC) memory format")
    ap.add_argument("--bf16", action="store_true",
                    help='forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)')
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=DATA_DIR)
    args = ap.parse_args()
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--batch-size, --steps and --threads must be >= 1, --warmup >= 0")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    bs = args.batch_size
    need = bs * (args.warmup + args.steps)
    X_all = read_idx_images(os.path.join(args.data_dir, "train-images-idx3-ubyte.gz"), need)
    y_all = read_idx_labels(os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz"), need)
    n = X_all.shape[0]
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format

    net = resnet18(10, 1)
    net.apply(init_weights)
    net = net.to(memory_format=fmt)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    batches = []
    for s in range(args.warmup + args.steps):
        i = (s * bs) % n
        idx = torch.arange(i, i + bs) % n
        batches.append((X_all[idx].contiguous(memory_format=fmt), y_all[idx]))

    print(f"# torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')} "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')}, "
          f"mkldnn {torch.backends.mkldnn.is_available()}, "
          f"format {'channels_last' if args.channels_last else 'NCHW'}, "
          f"{'bf16 autocast' if args.bf16 else 'fp32'}, "
          f"batch {bs}, lr {args.lr}, warmup {args.warmup}, steps {args.steps}", flush=True)

    times = []
    for s, (X, y) in enumerate(batches):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            loss = loss_fn(net(X), y)
        loss.backward()
        opt.step()
        lv = loss.item()  # forces completion (CPU ops are synchronous anyway)
        dt = time.perf_counter() - t0
        warm = s < args.warmup
        if not warm:
            times.append(dt)
        print(f"step {s + 1}{' (warm-up)' if warm else ''}: loss {lv:.4f}, {dt:.3f} s",
              flush=True)

    med = statistics.median(times)
    print(f"median {med:.3f} s/step, min {min(times):.3f}, max {max(times):.3f}; "
          f"{bs / med:.1f} samples/s; {STEPS_PER_EPOCH * med:.0f} s per "
          f"{STEPS_PER_EPOCH}-step epoch (extrapolated)")
    print(f"SEC_PER_STEP {med:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

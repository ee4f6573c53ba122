"""Fashion-MNIST for the peer runners (bench/peer_tf.py, peer_ipex.py,
peer_jax.py), as numpy arrays, read from the same IDX files and in the same
way as bench/lenet_pytorch.py and bench/resnet_pytorch.py read them: images
(N, 1, 28, 28) float32 in [0, 1] (pixel / 255), labels (N,) int64. Needs
numpy only, so each framework's venv can import it.

The shared output contract of every runner: a `# ...` line naming the
framework, version and setting; for LeNet one line per epoch with the test
accuracy (`TEST_ACC x`, untimed, a check that the peer trains); last
`SEC_PER_EPOCH x` (LeNet, mean training seconds per epoch) or
`SEC_PER_STEP x` (ResNet-18, median seconds of the timed steps). A runner
that cannot run a setting on this CPU prints `PEER_SKIP reason` and exits 0.
"""
import argparse
import gzip
import os
import statistics
import time

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def _read(path):
    with gzip.open(path, "rb") as f:
        return f.read()


def load(data_dir, split, limit=None):
    """(images (N,1,28,28) float32, labels (N,) int64) of split train|test."""
    prefix = "train" if split == "train" else "t10k"
    img = _read(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    lab = _read(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    n, rows, cols = (int.from_bytes(img[i:i + 4], "big") for i in (4, 8, 12))
    if limit is not None:
        n = min(n, limit)
    x = np.frombuffer(img, dtype=np.uint8, count=n * rows * cols, offset=16)
    y = np.frombuffer(lab, dtype=np.uint8, offset=8)[:n]
    if x.size != n * rows * cols or y.shape[0] != n:
        raise SystemExit(f"error: {data_dir}: {prefix} images and labels disagree")
    return x.reshape(n, 1, rows, cols).astype(np.float32) / 255.0, y.astype(np.int64)


def nhwc(x):
    """(N,1,28,28) -> (N,28,28,1), contiguous: the layout of TF's and XLA's
    CPU convolutions."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def resnet_batches(data_dir, batch_size, count, channels_last=False):
    """The ResNet runners' batches: the training set in file order (batch i =
    images i*B..(i+1)*B-1, wrapping), as bench/resnet_pytorch.py takes them."""
    x, y = load(data_dir, "train", batch_size * count)
    if channels_last:
        x = nhwc(x)
    n = x.shape[0]
    out = []
    for s in range(count):
        idx = np.arange(s * batch_size, (s + 1) * batch_size) % n
        out.append((x[idx], y[idx]))
    return out


def arguments(doc):
    """The runners' common flags (those of bench/lenet_pytorch.py and
    bench/resnet_pytorch.py that the peer benchmarks pass)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--model", choices=("lenet", "resnet18"), required=True)
    ap.add_argument("--bf16", action="store_true", help="bfloat16 compute, float32 weights")
    ap.add_argument("--epochs", type=int, default=1, help="LeNet epochs [1]")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=None, help="[0.2 LeNet, 0.1 ResNet-18]")
    ap.add_argument("--warmup", type=int, default=2, help="ResNet-18 untimed steps [2]")
    ap.add_argument("--steps", type=int, default=10, help="ResNet-18 timed steps [10]")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit-train", type=int, default=0, metavar="N",
                    help="LeNet: train on the first N examples only (0 = all; for a quick check)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=DATA_DIR)
    return ap


def check(ap, args):
    """Fills the model's default lr, checks the counts, and keeps this
    process on args.threads of the CPUs it may use (for XLA, whose CPU
    thread pool is as wide as the CPUs usable)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > args.threads >= 1:
        os.sched_setaffinity(0, cpus[:args.threads])
    if args.lr is None:
        args.lr = 0.2 if args.model == "lenet" else 0.1
    if min(args.epochs, args.batch_size, args.steps, args.threads) < 1 or \
            min(args.warmup, args.limit_train) < 0:
        ap.error("--epochs, --batch-size, --steps and --threads must be >= 1, "
                 "--warmup and --limit-train >= 0")
    return args


def lenet_epochs(args, header, step, accuracy, channels_last=False):
    """Times args.epochs LeNet epochs: each a fresh permutation of the 60000
    training images (numpy, seeded), batches of args.batch_size (the last
    one 96 short), step(x, y) per batch, which must return only after the
    step's update is done; then accuracy(x_test, y_test), untimed. Prints
    the contract's lines. channels_last: the images as (N,28,28,1), made
    before the timer."""
    x, y = load(args.data_dir, "train", args.limit_train or None)
    xt, yt = load(args.data_dir, "test")
    if channels_last:
        x, xt = nhwc(x), nhwc(xt)
    rng = np.random.default_rng(args.seed)
    n, bs = x.shape[0], args.batch_size
    print(f"{header}, train {n} test {xt.shape[0]}, batch {bs}, lr {args.lr}", flush=True)
    times = []
    for epoch in range(1, args.epochs + 1):
        perm = rng.permutation(n)
        t0 = time.perf_counter()
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            step(x[idx], y[idx])
        dt = time.perf_counter() - t0
        times.append(dt)
        acc = accuracy(xt, yt)
        print(f"epoch {epoch}: test acc {acc:.4f}, {dt:.2f} sec/epoch", flush=True)
        print(f"TEST_ACC {acc:.4f}", flush=True)
    print(f"SEC_PER_EPOCH {sum(times) / len(times):.4f}")


def resnet_steps(args, header, step, channels_last=False):
    """Times ResNet-18 steps: args.warmup untimed, then args.steps timed, on
    resnet_batches; step(x, y) returns the loss as a float, after the
    step's update is done. Prints the contract's lines."""
    batches = resnet_batches(args.data_dir, args.batch_size, args.warmup + args.steps,
                             channels_last)
    print(f"{header}, batch {args.batch_size}, lr {args.lr}, "
          f"warmup {args.warmup}, steps {args.steps}", flush=True)
    times = []
    for s, (xb, yb) in enumerate(batches):
        t0 = time.perf_counter()
        loss = step(xb, yb)
        dt = time.perf_counter() - t0
        warm = s < args.warmup
        if not warm:
            times.append(dt)
        print(f"step {s + 1}{' (warm-up)' if warm else ''}: loss {loss:.4f}, {dt:.3f} s",
              flush=True)
        if loss != loss:
            raise SystemExit("error: the loss is NaN")
    med = statistics.median(times)
    print(f"median {med:.3f} s/step, min {min(times):.3f}, max {max(times):.3f}")
    print(f"SEC_PER_STEP {med:.4f}")

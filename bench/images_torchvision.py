#!/usr/bin/env python3
"""torchvision's side of bench/images_vs_torchvision.sh: the ImageNet
training recipe's data pipeline as PyTorch users run it.

  loader  ImageFolder(DIR/train) + DataLoader(batch_size=64, shuffle=True,
          num_workers=2, persistent_workers=True) with
          Compose([RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
          Normalize(ImageNet's mean and std)]): one untimed pass (warm-up:
          the workers started, the files in the page cache), then --passes
          timed passes over the whole folder (or its first --count images).
          Prints each pass, `IMAGES_PER_SECOND <rate>` (images handed to
          the loop / seconds, the mean over the timed passes) and last
          `CPU_MS_PER_IMAGE <ms>` (user + system CPU time of the process
          and its workers during the timed passes, per image: what a busy
          machine changes least).
  npy     the same pipeline's first --count samples, written once as
          OUT/train/images.npy (float32, N x 3 x 224 x 224, normalized) and
          OUT/train/labels.npy (int64), and OUT/test/ linking to them: the
          "batches already in memory" that `dptrain train --dataset npy`
          reads for the end-to-end comparison.

    bench/.venv/bin/python bench/images_torchvision.py loader --data DIR
    bench/.venv/bin/python bench/images_torchvision.py npy --data DIR --count 640 --out OUT

PyTorch with 2 threads in the main process (the project's bench scripts'
setting; DataLoader gives each worker 1), PIL decoding as ImageFolder's
default loader does (Pillow from PyPI, with libjpeg-turbo).
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torchvision
from torch.utils.data import DataLoader, Subset
from torchvision import transforms

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def dataset(data, size, count):
    tf = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                             transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    root = os.path.join(data, "train")
    if not os.path.isdir(root):
        sys.exit(f"images_torchvision.py: --data {data}: no {root} (ImageFolder layout)")
    ds = torchvision.datasets.ImageFolder(root, transform=tf)
    if count:
        if count > len(ds):
            sys.exit(f"images_torchvision.py: --count {count}: {root} has {len(ds)} images")
        ds = Subset(ds, range(count))
    return ds


def cpu_seconds(dl):
    """User + system CPU seconds of this process and of dl's persistent
    workers so far (after the warm-up pass started them; /proc/PID/stat's
    utime and stime)."""
    t = os.times()
    total = t.user + t.system
    it = getattr(dl, "_iterator", None)
    tick = os.sysconf("SC_CLK_TCK")
    for w in getattr(it, "_workers", []) if it is not None else []:
        try:
            with open(f"/proc/{w.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def loader(a):
    ds = dataset(a.data, a.size, a.count)
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                    persistent_workers=a.workers > 0)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"{torch.get_num_threads()} threads, {len(ds)} images, batch {a.batch_size}, "
          f"num_workers {a.workers}", flush=True)
    rates, cpu = [], []
    for p in range(a.passes + 1):
        n = 0
        t = time.perf_counter()
        c = cpu_seconds(dl)
        for x, y in dl:
            n += x.shape[0]
        s = time.perf_counter() - t
        cpu.append((cpu_seconds(dl) - c) / max(n, 1))
        if n != len(ds) or not torch.isfinite(x).all():
            sys.exit(f"images_torchvision.py: pass {p}: {n} images of {len(ds)}, or not finite")
        if p == 0:
            print(f"warm-up pass: {n} images in {s:.2f} s", flush=True)
            continue
        rates.append(n / s)
        print(f"pass {p}: {n} images in {s:.2f} s, {n / s:.1f} images/s", flush=True)
    print(f"IMAGES_PER_SECOND {sum(rates) / len(rates):.2f}")
    timed = cpu[1:]
    print(f"CPU_MS_PER_IMAGE {1e3 * sum(timed) / len(timed):.3f}")


def npy(a):
    if not a.count:
        sys.exit("images_torchvision.py npy: --count is required")
    ds = dataset(a.data, a.size, a.count)
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=False, num_workers=a.workers)
    train = os.path.join(a.out, "train")
    test = os.path.join(a.out, "test")
    os.makedirs(train, exist_ok=True)
    os.makedirs(test, exist_ok=True)
    # Written through a memory map: the set is N x 3 x 224 x 224 floats
    # (640 images: 385 MB), never twice in memory.
    images = np.lib.format.open_memmap(os.path.join(train, "images.npy.tmp"), mode="w+",
                                       dtype="<f4", shape=(len(ds), 3, a.size, a.size))
    labels = np.empty(len(ds), dtype="<i8")
    i = 0
    for x, y in dl:
        images[i:i + len(x)] = x.numpy()
        labels[i:i + len(x)] = y.numpy()
        i += len(x)
    images.flush()
    del images
    np.save(os.path.join(train, "labels.npy.tmp"), labels, allow_pickle=False)
    os.replace(os.path.join(train, "labels.npy.tmp.npy"), os.path.join(train, "labels.npy"))
    os.replace(os.path.join(train, "images.npy.tmp"), os.path.join(train, "images.npy"))
    for name in ("images.npy", "labels.npy"):
        link = os.path.join(test, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join("..", "train", name), link)
    print(f"{a.out}: {i} samples of 3x{a.size}x{a.size} (float32, normalized) and their labels")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("loader", "npy"))
    ap.add_argument("--data", required=True, help="the ImageFolder root (DIR/train/CLASS/*.jpg)")
    ap.add_argument("--count", type=int, default=0, help="the first N images, 0 = all [0]")
    ap.add_argument("--size", type=int, default=224, help="RandomResizedCrop's size [224]")
    ap.add_argument("--batch-size", type=int, default=64, help="[64]")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader's num_workers [2]")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads [2]")
    ap.add_argument("--passes", type=int, default=1, help="timed passes, after one warm-up [1]")
    ap.add_argument("--out", help="npy: the folder to write")
    a = ap.parse_args()
    for name in ("count", "workers"):
        if getattr(a, name) < 0:
            ap.error(f"--{name} {getattr(a, name)}: must be at least 0")
    for name in ("size", "batch_size", "threads", "passes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(a, name)}: must be at least 1")
    if a.mode == "npy" and not a.out:
        ap.error("npy needs --out")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    (loader if a.mode == "loader" else npy)(a)


if __name__ == "__main__":
    main()

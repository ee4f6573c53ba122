#!/usr/bin/env python3
"""Times the from-scratch LeNet epoch three ways, alternating, and prints
each run, the medians and the two ratios issue 37 asks for:

  python   the seed's train_batch loop in Python on dptrain, 2 devices
           (bench/python_vs_c_lenet.py --framework dptrain)
  cli      `dptrain train --model lenet --devices 2 --batch-size 256 --lr 0.2
           --epochs 1` (its epoch_seconds)
  pytorch  the same Python code on PyTorch (--framework torch), 2 threads

  python / cli      goal <= 1.1: the front end adds at most 10%
  python / pytorch  goal <= 0.6

bench/python_vs_c.sh calls it with the three commands; it needs only the
standard library (and bench/vs_pytorch.py's helpers).
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_pytorch import cpu, run  # noqa: E402

GOALS = {"python / cli": 1.1, "python / pytorch": 0.6}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", required=True, help="the command of the Python loop on dptrain")
    ap.add_argument("--cli", required=True, help="the dptrain train command")
    ap.add_argument("--pytorch", required=True, help="the command of the Python loop on PyTorch")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    configs = [("python", "pytorch", args.python), ("cli", "dptrain", args.cli),
               ("pytorch", "pytorch", args.pytorch)]
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    print(f"# CPU: {cpu()}")
    print(f"# all flags: {' '.join(flags)}")
    for name, _, command in configs:
        print(f"# {name}: {command}")
    sys.stdout.flush()
    times = {name: [] for name, _, _ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            for name, kind, command in configs:
                try:
                    t = run(kind, command, tmp)
                except RuntimeError as e:
                    sys.exit(f"error: {name} (round {r}) failed: {e}")
                times[name].append(t)
                print(f"round {r}/{args.rounds}  {name:<8} {t:8.3f} sec/epoch", flush=True)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print()
    print(f"{'':<8} {'runs (sec/epoch)':<28} {'median':>8}")
    for name, ts in times.items():
        print(f"{name:<8} {' '.join(f'{t:.3f}' for t in ts):<28} {med[name]:8.3f}")
    missed = 0
    for ratio_name, goal in GOALS.items():
        a, b = ratio_name.split(" / ")
        ratio = med[a] / med[b]
        ok = ratio <= goal
        missed += not ok
        print(f"{ratio_name}: {ratio:.3f}x (goal <= {goal:g}: {'met' if ok else 'NOT met'})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runs dptrain and PyTorch configurations side by side, alternating, and
prints every run, the medians, the CPU, the fastest PyTorch and dptrain's
ratio to it; it needs only the standard library. The peer benchmarks
(bench/lenet_vs_peers.sh, bench/resnet_vs_peers.sh) run bench/vs_peers.py,
which uses its cpu() and its readers of the figures, as
bench/python_vs_c.py and bench/images_vs_torchvision.py do.

  vs_pytorch.py --rounds 3 --unit sec/epoch --goal 0.6 \
      --config 'dptrain fp32=dptrain:build/dptrain train ...' \
      --config 'torch 2.15 bf16=pytorch:bench/.venv/bin/python bench/lenet_pytorch.py --bf16'

A configuration is NAME=KIND:COMMAND. KIND dptrain: the command gets
`--metrics FILE` and its time is the mean epoch_seconds there (or, with
--dptrain-step, the SEC_PER_STEP line of build/bench_step); KIND pytorch:
its time is the last SEC_PER_EPOCH or SEC_PER_STEP line it prints. Each
round runs every configuration once, in order; a failed run stops the
benchmark with its output.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile

FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu():
    name, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name == "unknown CPU":
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    have = " ".join(f for f in FLAGS if f in flags) or "none of " + ", ".join(FLAGS)
    cores = len(os.sched_getaffinity(0))
    return f"{name}, {cores} cores usable, flags: {have}"


def seconds_from_metrics(path):
    secs = []
    with open(path) as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if "epoch_seconds" in obj and "step" not in obj:
                secs.append(float(obj["epoch_seconds"]))
    if not secs:
        raise RuntimeError("no epoch_seconds in " + path)
    return sum(secs) / len(secs)


def seconds_from_output(text):
    found = re.findall(r"^SEC_PER_(?:EPOCH|STEP)\s+([0-9.eE+-]+)", text, re.M)
    if not found:
        raise RuntimeError("no SEC_PER_EPOCH or SEC_PER_STEP line")
    return float(found[-1])


def command_argv(kind, command, tmp):
    """(argv, metrics path or None): a dptrain train run writes its
    --metrics into tmp (bench_step prints SEC_PER_STEP instead)."""
    argv = shlex.split(command)
    metrics = None
    if kind == "dptrain" and "bench_step" not in argv[0]:
        metrics = os.path.join(tmp, "metrics.jsonl")
        if os.path.exists(metrics):
            os.remove(metrics)
        argv += ["--metrics", metrics]
    return argv, metrics


def run(kind, command, tmp):
    argv, metrics = command_argv(kind, command, tmp)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}:\n{p.stdout}")
    return seconds_from_metrics(metrics) if metrics else seconds_from_output(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--unit", default="sec")
    ap.add_argument("--goal", type=float, default=None,
                    help="the ratio dptrain / fastest PyTorch to meet (printed)")
    ap.add_argument("--config", action="append", required=True, metavar="NAME=KIND:COMMAND")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    configs = []
    for c in args.config:
        name, _, rest = c.partition("=")
        kind, _, command = rest.partition(":")
        if kind not in ("dptrain", "pytorch") or not command:
            ap.error(f"bad --config {c!r}: NAME=dptrain:COMMAND or NAME=pytorch:COMMAND")
        configs.append((name, kind, command))
    print(f"# CPU: {cpu()}")
    for name, kind, command in configs:
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
                print(f"round {r}/{args.rounds}  {name:<34} {t:8.3f} {args.unit}", flush=True)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    torch = {n: m for n, m in med.items() if n.startswith("torch")}
    ours = {n: m for n, m in med.items() if n.startswith("dptrain")}
    best_torch = min(torch, key=torch.get) if torch else None
    print()
    print(f"{'configuration':<34} {'runs (' + args.unit + ')':<28} {'median':>8}"
          f"{'  vs fastest PyTorch' if best_torch else ''}")
    for name, ts in times.items():
        runs = " ".join(f"{t:.2f}" for t in ts)
        ratio = f"  {med[name] / torch[best_torch]:.2f}x" if best_torch else ""
        print(f"{name:<34} {runs:<28} {med[name]:8.3f}{ratio}")
    if best_torch and ours:
        best = min(ours, key=ours.get)
        ratio = ours[best] / torch[best_torch]
        goal = f" (goal <= {args.goal:g}: {'met' if ratio <= args.goal else 'not met'})" \
            if args.goal is not None else ""
        print(f"fastest PyTorch: {best_torch}, {torch[best_torch]:.3f} {args.unit}")
        print(f"fastest dptrain: {best}, {ours[best]:.3f} {args.unit}")
        print(f"ratio dptrain/PyTorch: {ratio:.2f}{goal}")


if __name__ == "__main__":
    main()

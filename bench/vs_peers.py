#!/usr/bin/env python3
"""Runs dptrain and its peers (PyTorch, TensorFlow, IPEX, JAX) side by side,
alternating, and prints every run, the medians, the CPU, the fastest
configuration of each framework, the fastest peer and dptrain's ratio to it.
bench/lenet_vs_peers.sh and bench/resnet_vs_peers.sh call it with their
configurations; it needs only the standard library.

  vs_peers.py --rounds 3 --unit sec/epoch --goal 0.7 \\
      --config 'dptrain bf16=dptrain:build/dptrain train ...' \\
      --config 'tf 2.21 mixed_bfloat16=peer:bench/.venv-tf/bin/python bench/peer_tf.py ...'

A configuration is NAME=KIND:COMMAND; the first word of NAME is its
framework. KIND dptrain: as bench/vs_pytorch.py runs it (the mean
epoch_seconds of `--metrics FILE`, or build/bench_step's SEC_PER_STEP); a
dptrain run that fails stops the benchmark. KIND peer (pytorch is the same):
its time is the last SEC_PER_EPOCH or SEC_PER_STEP line, its accuracy the
last TEST_ACC line; a peer that prints PEER_SKIP, fails, or prints no time
is reported in one line and left out of the later rounds, and the others
go on. --drop-over S --drop-framework jax: a configuration of that
framework whose run took more than S seconds (its figure, per epoch or
step) is run once and left out of later rounds. SIGINT or SIGTERM ends the
rounds and prints the summary of the runs done; --from-log FILE prints the
summary of an earlier output's round lines.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_pytorch import (  # noqa: E402
    command_argv,
    cpu,
    seconds_from_metrics,
    seconds_from_output,
)


class LeftOut(Exception):
    """A peer that cannot run here: its reason, one line."""


def test_acc_from_metrics(path):
    acc = None
    with open(path) as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if "test_acc" in obj and "step" not in obj:
                acc = float(obj["test_acc"])
    return acc


def last_line(text):
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "(no output)"


def run(kind, command, tmp):
    """(seconds, test accuracy or None) of one run."""
    argv, metrics = command_argv(kind, command, tmp)
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        raise LeftOut(f"cannot start {argv[0]}: {e}") from e
    skip = re.findall(r"^PEER_SKIP (.*)$", p.stdout, re.M)
    if skip:
        raise LeftOut(skip[-1])
    if p.returncode != 0:
        if kind == "dptrain":
            sys.exit(f"error: exit {p.returncode}:\n{p.stdout}")
        raise LeftOut(f"exit {p.returncode}: {last_line(p.stdout)}")
    try:
        if metrics:
            return seconds_from_metrics(metrics), test_acc_from_metrics(metrics)
        secs = seconds_from_output(p.stdout)
    except (OSError, RuntimeError) as e:
        if kind == "dptrain":
            sys.exit(f"error: {e}:\n{p.stdout}")
        raise LeftOut(f"{e}: {last_line(p.stdout)}") from e
    # TEST_ACC lines (bench/peer_data.py), or lenet_pytorch.py's "... test acc X,"
    acc = re.findall(r"(?:^TEST_ACC\s+|\btest acc )([0-9.]*[0-9])", p.stdout, re.M)
    return secs, float(acc[-1]) if acc else None


def run_rounds(args, configs, times, accs):
    live = list(configs)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            for cfg in list(live):
                name, kind, command = cfg
                try:
                    t, acc = run(kind, command, tmp)
                except LeftOut as e:
                    print(f"peer {name}: left out: {e}", flush=True)
                    live.remove(cfg)
                    continue
                times[name].append(t)
                if acc is not None:
                    accs[name] = acc
                note = f"  test acc {acc:.4f}" if acc is not None else ""
                print(f"round {r}/{args.rounds}  {name:<40} {t:8.3f} {args.unit}{note}",
                      flush=True)
                if args.drop_over is not None and t > args.drop_over and r < args.rounds \
                        and name.split()[0] in args.drop_framework:
                    print(f"  {name}: {t:.1f} s > {args.drop_over:g} s: run once, left out "
                          f"of the later rounds", flush=True)
                    live.remove(cfg)


ROUND_LINE = re.compile(r"^round \d+/\d+  (.+?)\s+([0-9.]+) \S+(?:  test acc ([0-9.]+))?$")


def read_log(path, times, accs):
    """The runs of an earlier output's `round r/R NAME T UNIT` lines (a run
    cut short by other than SIGINT), for its summary."""
    with open(path) as f:
        for line in f:
            m = ROUND_LINE.match(line.rstrip("\n"))
            if m and m.group(1) in times:
                times[m.group(1)].append(float(m.group(2)))
                if m.group(3):
                    accs[m.group(1)] = float(m.group(3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--unit", default="sec")
    ap.add_argument("--goal", type=float, default=None,
                    help="the ratio dptrain / fastest peer to meet (printed)")
    ap.add_argument("--drop-over", type=float, default=None, metavar="S",
                    help="a run of a --drop-framework over S seconds (its figure) is not "
                    "repeated in later rounds")
    ap.add_argument("--drop-framework", action="append", default=[], metavar="NAME",
                    help="the frameworks --drop-over applies to (first word of a name)")
    ap.add_argument("--config", action="append", required=True, metavar="NAME=KIND:COMMAND")
    ap.add_argument("--from-log", metavar="FILE",
                    help="run nothing: the summary of the round lines of an earlier output")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    configs = []
    for c in args.config:
        name, _, rest = c.partition("=")
        kind, _, command = rest.partition(":")
        if kind not in ("dptrain", "peer", "pytorch") or not command or not name:
            ap.error(f"bad --config {c!r}: NAME=dptrain:COMMAND or NAME=peer:COMMAND")
        configs.append((name, kind, command))
    try:
        load = " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        load = "unknown"
    print(f"# CPU: {cpu()}")
    print(f"# load average at start: {load}")
    for name, kind, command in configs:
        print(f"# {name}: {command}")
    sys.stdout.flush()
    times = {name: [] for name, _, _ in configs}
    accs = {}
    # SIGINT or SIGTERM (even where a background job ignores SIGINT) ends the
    # rounds; subprocess.run kills the run in progress.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    if args.from_log:
        read_log(args.from_log, times, accs)
    else:
        try:
            run_rounds(args, configs, times, accs)
        except KeyboardInterrupt:  # a run cut short: the summary of those done
            print("interrupted (SIGINT or SIGTERM): the summary below is of the runs completed",
                  flush=True)
    try:
        load = " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        pass
    times = {n: ts for n, ts in times.items() if ts}
    med = {name: statistics.median(ts) for name, ts in times.items()}
    peers = {n: m for n, m in med.items() if not n.startswith("dptrain")}
    ours = {n: m for n, m in med.items() if n.startswith("dptrain")}
    best_peer = min(peers, key=peers.get) if peers else None
    print()
    print(f"# load average at end: {load}")
    print(f"{'configuration':<40} {'runs (' + args.unit + ')':<24} {'median':>8}"
          f"{'  vs fastest peer' if best_peer else ''}  test acc")
    for name, ts in times.items():
        runs = " ".join(f"{t:.2f}" for t in ts)
        ratio = f"  {med[name] / peers[best_peer]:15.2f}x" if best_peer else ""
        acc = f"  {accs[name]:.4f}" if name in accs else ""
        print(f"{name:<40} {runs:<24} {med[name]:8.3f}{ratio}{acc}")
    print()
    frameworks = {}
    for n, m in peers.items():
        fw = n.split()[0]
        if fw not in frameworks or m < med[frameworks[fw]]:
            frameworks[fw] = n
    for fw, n in frameworks.items():
        print(f"fastest {fw}: {n}, {med[n]:.3f} {args.unit}")
    if best_peer and ours:
        best = min(ours, key=ours.get)
        ratio = ours[best] / peers[best_peer]
        goal = f" (goal <= {args.goal:g}: {'met' if ratio <= args.goal else 'not met'})" \
            if args.goal is not None else ""
        print(f"fastest peer: {best_peer}, {peers[best_peer]:.3f} {args.unit}")
        print(f"fastest dptrain: {best}, {ours[best]:.3f} {args.unit}")
        print(f"ratio dptrain/fastest peer: {ratio:.2f}{goal}")
    elif not best_peer:
        print("no peer ran: no ratio")


if __name__ == "__main__":
    main()

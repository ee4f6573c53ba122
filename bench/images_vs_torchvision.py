#!/usr/bin/env python3
"""Issue 38's point 3, run by bench/images_vs_torchvision.sh: dptrain's image
loader against torchvision's, then the loader behind a ResNet-18 step.

1. Loader throughput over one folder of JPEGs (ImageNet's training
   recipe: decode, RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
   Normalize), images/s over one pass after a warm-up:
     torchvision  bench/images_torchvision.py loader (ImageFolder +
                  DataLoader(num_workers=2, batch_size=64), Pillow)
     dptrain      `dptrain train --dataset folder --data DIR --transform
                  imagenet --workers 2 --batch-size 64` of a model that
                  costs nothing (Flatten, Linear), its samples/s: the rate
                  at which the loader feeds a step (dptrain_feed_argv);
     dptrain data `dptrain data --dataset folder --data DIR --transform
                  imagenet --workers 2 --epoch 0 --count N --dump OUT`
                  (dptrain_data_argv; --bench instead of --dump where the
                  command has it), timed from outside, start-up and the
                  output included; also with --jpeg-scale off. The goal is
                  judged on the first of these that is built.
   Goal: dptrain >= 2x torchvision. Beside each rate, the CPU time (user +
   system) an image took: on a machine that other work keeps busy the
   rates say little, the CPU times much more.
2. End to end: torchvision's ResNet-18 (ONNX, 3x224x224, 10 classes),
   batch 64, bf16 where the CPU has it, `dptrain train` for --steps steps
   an epoch (--limit-train), 2 epochs, the last epoch's epoch_seconds:
     folder  --dataset folder --data DIR --transform imagenet
     memory  --dataset npy: the same recipe's samples made once beforehand
             (bench/images_torchvision.py npy), the batches already in memory.
   Goal: folder at most 5% slower than memory (the loader hidden behind
   the step).
ROUNDS rounds, each configuration once a round, alternating; medians.
A side whose dptrain command is not built yet is skipped, visibly, and
the run then exits 77; 1 when a measured goal is missed, else 0.
"""
import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_pytorch import cpu  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LOADER_GOAL = 2.0   # dptrain images/s / torchvision images/s, at least
E2E_GOAL = 1.05     # folder sec/epoch / in-memory sec/epoch, at most


def cpu_line():
    """cpu()'s line, plus the microarchitecture where /proc/cpuinfo's AMD
    family tells it (the model name of a cloud vCPU may say only "AMD EPYC")."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    line = cpu()
    if info.get("vendor_id") == "AuthenticAMD":
        zen = {"23": "Zen or Zen 2", "25": "Zen 3 or Zen 4", "26": "Zen 5"}
        fam = info.get("cpu family", "?")
        line += f"; family {fam} model {info.get('model', '?')} ({zen.get(fam, 'unknown')})"
    return line


def has_flag(bin_, command, flag):
    """Whether `bin_ command --help` succeeds and lists flag."""
    p = subprocess.run([bin_, command, "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode == 0 and (flag is None or flag in p.stdout)


def dptrain_data_argv(bin_, data, count, out, extra):
    """The `dptrain data` command that runs the loader over the first count
    training samples of data, as the training step would get them. With
    --bench (a pass that keeps nothing), where the command has it; else
    with --dump to `out` (count x 3 x 224 x 224 floats written to a file in
    the caller's temporary folder: never to /dev/null, which a dump written
    through a temporary file and a rename would replace). None, with the
    line printed, where `dptrain data` is not built yet."""
    if not has_flag(bin_, "data", None):
        print("dptrain data: not built yet: the dptrain side of the loader comparison is "
              "SKIPPED", flush=True)
        return None
    argv = [bin_, "data", "--dataset", "folder", "--data", data, "--transform", "imagenet",
            "--workers", "2", "--epoch", "0", "--count", str(count)] + extra
    if has_flag(bin_, "data", "--bench"):
        return argv + ["--bench"]
    return argv + ["--dump", out]


def dptrain_feed_argv(bin_, data, count, model, metrics):
    """`dptrain train` of a model that costs nothing (Flatten, Linear: about
    30 MFLOP a batch of 64) over the same images: its samples/s is the
    rate at which the loader hands batches to a step, nothing written.
    None where train has no --transform yet."""
    if not has_flag(bin_, "train", "--transform"):
        return None
    with open(model, "w") as f:
        f.write("Flatten()\nLinear(3 * 224 * 224, 10)\n")
    return [bin_, "train", "--model", model, "--dataset", "folder", "--data", data,
            "--transform", "imagenet", "--workers", "2", "--batch-size", "64", "--epochs", "1",
            "--limit-train", str(count), "--limit-test", "64", "--lr", "0.01",
            "--progress", "never", "--metrics", metrics]


def dptrain_feed_rate(argv, metrics):
    """(images/s from the epoch's samples_per_second, CPU ms an image of the
    whole run: start-up, the 64 test images and the steps included)."""
    if os.path.exists(metrics):
        os.remove(metrics)
    c = children_cpu()
    run_checked(argv, "dptrain train (the loader feeding a linear step)")
    c = children_cpu() - c
    with open(metrics) as f:
        e = [json.loads(ln) for ln in f if ln.startswith("{") and '"step"' not in ln][-1]
    n = int(argv[argv.index("--limit-train") + 1])
    return float(e["samples_per_second"]), 1e3 * c / n


def run_checked(argv, what):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"error: {what} failed (exit {p.returncode}): {shlex.join(argv)}\n{p.stdout}")
    return p.stdout


def torchvision_rate(py, data, count):
    out = run_checked([py, os.path.join(HERE, "images_torchvision.py"), "loader", "--data", data,
                       "--count", str(count)], "torchvision's loader")
    got = {}
    for key in ("IMAGES_PER_SECOND", "CPU_MS_PER_IMAGE"):
        lines = [ln for ln in out.splitlines() if ln.startswith(key)]
        if not lines:
            sys.exit(f"error: no {key} line from images_torchvision.py:\n{out}")
        got[key] = float(lines[-1].split()[1])
    return got["IMAGES_PER_SECOND"], got["CPU_MS_PER_IMAGE"]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def dptrain_rate(argv, count, dump):
    """(images/s, CPU ms an image): the run's wall time and its user +
    system time, start-up and the dump's writing included."""
    t, c = time.perf_counter(), children_cpu()
    run_checked(argv, "dptrain data")
    s, c = time.perf_counter() - t, children_cpu() - c
    # OUT.npy and OUT.labels.npy: gone before the next run writes them.
    for path in (dump, dump[:-len(".npy")] + ".labels.npy"):
        if os.path.exists(path):
            os.remove(path)
    return count / s, 1e3 * c / count


def epoch_seconds(bin_, argv, metrics):
    """The last epoch's epoch_seconds (the first holds the kernel choice)."""
    if os.path.exists(metrics):
        os.remove(metrics)
    run_checked(argv + ["--metrics", metrics, "--progress", "never"], "dptrain train")
    secs = []
    with open(metrics) as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if "epoch_seconds" in obj and "step" not in obj:
                secs.append(float(obj["epoch_seconds"]))
    if not secs:
        sys.exit(f"error: no epoch_seconds in {metrics}")
    return secs[-1]


def rounds(configs, n, unit):
    """configs: [(name, callable)]: calls each once a round, n rounds. A
    callable returns a value, or (value, CPU ms an image). Returns {name:
    [values]} and {name: [CPU ms]}."""
    got = {name: [] for name, _ in configs}
    cpu = {name: [] for name, _ in configs}
    for r in range(1, n + 1):
        for name, f in configs:
            v = f()
            c = None
            if isinstance(v, tuple):
                v, c = v
                cpu[name].append(c)
            got[name].append(v)
            extra = f"   {c:7.2f} CPU ms/image" if c is not None else ""
            print(f"round {r}/{n}  {name:<34} {v:10.2f} {unit}{extra}", flush=True)
    return got, {k: v for k, v in cpu.items() if v}


def summary(got, unit, cpu=None):
    med = {name: statistics.median(v) for name, v in got.items()}
    for name, v in got.items():
        runs = " ".join(f"{x:.2f}" for x in v)
        c = ""
        if cpu and name in cpu:
            c = f"   CPU {statistics.median(cpu[name]):.2f} ms/image"
        print(f"{name:<34} median {med[name]:10.2f} {unit}{c}   runs: {runs}")
    return med


def loader_part(a, tmp):
    print(f"\n== 1. loader: {a.count} images of {a.data}, RandomResizedCrop(224) + flip + "
          f"normalize, batch 64, 2 workers, images/s over one pass after a warm-up", flush=True)
    dump = os.path.join(tmp, "dump.npy")
    configs = [("torchvision (Pillow)", lambda: torchvision_rate(a.torch_python, a.data, a.count))]
    feed = dptrain_feed_argv(a.dptrain, a.data, a.count, os.path.join(tmp, "linear.txt"),
                             os.path.join(tmp, "feed.jsonl"))
    if feed:
        print(f"# dptrain: {shlex.join(feed)}")
        run_checked(feed, "dptrain train (warm-up)")
        configs.append(("dptrain", lambda: dptrain_feed_rate(feed, feed[-1])))
    argv = dptrain_data_argv(a.dptrain, a.data, a.count, dump, shlex.split(a.data_args))
    if argv:
        name = "dptrain data --dump" if "--dump" in argv else "dptrain data --bench"
        if not feed:
            name = "dptrain"
        print(f"# {name}: {shlex.join(argv)}")
        run_checked(argv, "dptrain data (warm-up)")
        configs.append((name, lambda: dptrain_rate(argv, a.count, dump)))
        if has_flag(a.dptrain, "data", "--jpeg-scale"):
            off = argv + ["--jpeg-scale", "off"]
            configs.append((name + " --jpeg-scale off",
                            lambda: dptrain_rate(off, a.count, dump)))
    got, cpu = rounds(configs, a.rounds, "images/s")
    med = summary(got, "images/s", cpu)
    if "dptrain" not in med:
        print(f"ratio dptrain / torchvision: not measured (goal >= {LOADER_GOAL:g}x): SKIPPED")
        return "skipped"
    ratio = med["dptrain"] / med["torchvision (Pillow)"]
    ok = ratio >= LOADER_GOAL
    cpu_ratio = (statistics.median(cpu["torchvision (Pillow)"]) /
                 statistics.median(cpu["dptrain"]))
    print(f"CPU time an image, torchvision / dptrain: {cpu_ratio:.2f}x (the images/s a "
          f"machine with every core free would give, where both keep them busy)")
    print(f"ratio dptrain / torchvision: {ratio:.2f}x (goal >= {LOADER_GOAL:g}x: "
          f"{'met' if ok else 'NOT met'})")
    return "met" if ok else "missed"


def e2e_part(a, tmp):
    print(f"\n== 2. end to end: ResNet-18 (ONNX, 3x224x224), batch 64, {a.precision}, "
          f"{a.steps} steps an epoch, the second epoch's seconds", flush=True)
    common = [a.dptrain, "train", "--model", a.onnx, "--batch-size", "64", "--precision",
              a.precision, "--limit-train", str(64 * a.steps), "--limit-test", "64",
              "--epochs", "2"] + shlex.split(a.train_args)
    memory = common + ["--dataset", "npy", "--data", a.npy]
    configs = [("memory (npy, batches made before)",
                lambda: epoch_seconds(a.dptrain, memory, os.path.join(tmp, "m.jsonl")))]
    print(f"# memory: {shlex.join(memory)}")
    if has_flag(a.dptrain, "train", "--transform"):
        folder = common + ["--dataset", "folder", "--data", a.data, "--transform", "imagenet"]
        print(f"# folder: {shlex.join(folder)}")
        configs.insert(0, ("folder (streamed, decoded)",
                           lambda: epoch_seconds(a.dptrain, folder, os.path.join(tmp, "m.jsonl"))))
    else:
        print("dptrain train --transform: not built yet: the folder side of the end-to-end "
              "comparison is SKIPPED", flush=True)
    med = summary(rounds(configs, a.rounds, "sec/epoch")[0], "sec/epoch")
    step = med["memory (npy, batches made before)"] / a.steps
    print(f"in memory: {step:.3f} s/step, {64 / step:.1f} samples/s")
    if len(med) < 2:
        print(f"ratio folder / memory: not measured (goal <= {E2E_GOAL:g}): SKIPPED")
        return "skipped"
    ratio = med["folder (streamed, decoded)"] / med["memory (npy, batches made before)"]
    ok = ratio <= E2E_GOAL
    print(f"ratio folder / memory: {ratio:.3f} ({100 * (ratio - 1):+.1f}%; goal <= {E2E_GOAL:g}: "
          f"{'met' if ok else 'NOT met'})")
    return "met" if ok else "missed"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dptrain", required=True, help="the dptrain binary")
    ap.add_argument("--torch-python", required=True, help="python with torch and torchvision")
    ap.add_argument("--data", required=True, help="the ImageFolder root of the JPEGs")
    ap.add_argument("--count", type=int, default=2000, help="images a loader pass [2000]")
    ap.add_argument("--data-args", default="", help="more `dptrain data` arguments")
    ap.add_argument("--onnx", help="ResNet-18 as ONNX: runs the end-to-end part")
    ap.add_argument("--npy", help="the in-memory set (images_torchvision.py npy's --out)")
    ap.add_argument("--steps", type=int, default=10, help="end to end: steps an epoch [10]")
    ap.add_argument("--precision", default="bf16", help="end to end: --precision [bf16]")
    ap.add_argument("--train-args", default="", help="more `dptrain train` arguments")
    ap.add_argument("--skip-loader", action="store_true", help="only the end-to-end part")
    a = ap.parse_args()
    if a.rounds < 1 or a.count < 1 or a.steps < 1:
        ap.error("--rounds, --count and --steps must be at least 1")
    if a.onnx and not a.npy:
        ap.error("--onnx needs --npy")
    print(f"# CPU: {cpu_line()}")
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        if not a.skip_loader:
            outcomes.append(loader_part(a, tmp))
        if a.onnx:
            outcomes.append(e2e_part(a, tmp))
    if "missed" in outcomes:
        sys.exit(1)
    if "skipped" in outcomes:
        print("\nnot every side was measured (see SKIPPED above): exit 77")
        sys.exit(77)


if __name__ == "__main__":
    main()

"""A seed notebook's training under a given seed, on dptrain or on PyTorch:
the per-epoch test accuracy that its Animator draws, for comparing the
spread of the two frameworks' results.

The notebook's code cells (examples/notebooks/NAME.ipynb) run as they are,
with `torch.manual_seed(SEED)` added after the first cell, and for PyTorch
the dptrain imports turned back into the chapter's torch/torchvision ones:
  - `from dptrain import d2l` becomes dptrain's d2l.py (d2l's code, over
    `import dptrain as torch`) loaded with the same import swap, so both
    frameworks run the same helpers (resnet18, evaluate_accuracy_gpu, ...);
  - tests/python/claims_torch_cpu's shim makes PyTorch without GPUs compute
    what it computes on 2 GPUs (each replica its own chunk of the batch and
    its own batch-norm statistics, the running statistics device_ids[0]'s).
PyTorch reads the same Fashion-MNIST files (Debian's, unpacked where
torchvision's FashionMNIST looks for them). dptrain's generator is
PyTorch's (python/dptrain/_random.py), so under one seed the two frameworks
start from the same weights and see the same batches; they part only by
their arithmetic's rounding.

usage: notebook_seeds.py --notebook lenet_from_scratch|resnet18_concise
                         --framework dptrain|torch --seed S
prints: `NAME framework F seed S epochs a1 a2 ...` (and the notebook's own
final line). Runs with DPTRAIN_DEVICES=2 under dptrain (the caller sets it).
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FASHION = "/usr/share/datasets/fashion-mnist"

TORCH_IMPORTS = [
    ("from dptrain import d2l", "import d2l_torch as d2l"),
    ("import dptrain as torch", "import torch"),
    ("from dptrain.nn import functional as F", "from torch.nn import functional as F"),
    ("from dptrain import nn", "from torch import nn"),
    ("from dptrain import vision as torchvision", "import torchvision"),
    ("from dptrain.vision import datasets as _datasets", "from torchvision import datasets as _datasets"),
    ("from dptrain.vision import transforms", "from torchvision import transforms"),
    ("from dptrain.utils import data", "from torch.utils import data"),
]


def to_torch(code):
    for ours, theirs in TORCH_IMPORTS:
        code = code.replace(ours, theirs)
    return code


def cells(name):
    nb = json.load(open(os.path.join(ROOT, "examples", "notebooks", name + ".ipynb")))
    code = []
    for c in nb["cells"]:
        if c["cell_type"] == "code":
            lines = "".join(c["source"]).split("\n")
            code.append("\n".join(l for l in lines if not l.startswith("%")))
    return code


def torch_d2l():
    """dptrain's d2l.py with PyTorch's imports: d2l's helpers over torch."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import claims_torch_cpu
    claims_torch_cpu.install(torch)
    mod = types.ModuleType("d2l_torch")
    src = to_torch(open(os.path.join(ROOT, "python", "dptrain", "d2l.py")).read())
    exec(compile(src, "d2l_torch", "exec"), mod.__dict__)
    sys.modules["d2l_torch"] = mod
    return claims_torch_cpu


def unpack_fashion_mnist(data_dir):
    raw = os.path.join(data_dir, "FashionMNIST", "raw")
    os.makedirs(raw)
    for name in os.listdir(FASHION):
        if name.endswith(".gz"):
            with gzip.open(os.path.join(FASHION, name)) as f, \
                    open(os.path.join(raw, name[:-3]), "wb") as out:
                shutil.copyfileobj(f, out)


class Quiet:
    """The seed's allreduce prints an empty line per gradient: dropped."""
    last = "\n"

    def write(self, s):
        if s != "\n" or self.last != "\n":
            sys.__stdout__.write(s)
        self.last = s
        return len(s)

    def flush(self):
        sys.__stdout__.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--notebook", choices=["lenet_from_scratch", "resnet18_concise"],
                    required=True)
    ap.add_argument("--framework", choices=["dptrain", "torch"], required=True)
    ap.add_argument("--seed", type=int, required=True)
    args = ap.parse_args()
    code = cells(args.notebook)
    if args.framework == "torch":
        torch_d2l()
        code = [to_torch(c) for c in code]
        code.insert(1, "import claims_torch_cpu\nclaims_torch_cpu.install(torch)\n")
    code.insert(1, f"torch.manual_seed({args.seed})\n")
    # The notebooks read their data from ../../data (seed 003) or ../data (d2l).
    work = tempfile.mkdtemp(prefix="notebook_seeds_")
    nbdir = os.path.join(work, "a", "b")
    os.makedirs(nbdir)
    unpack_fashion_mnist(os.path.join(work, "data"))
    os.symlink(os.path.join(work, "data"), os.path.join(work, "a", "data"))
    os.chdir(nbdir)
    accs = []

    def record(animator):
        if animator is None or hasattr(animator, "_recorded"):
            return
        add = animator.add

        def recording_add(self, x, y, add=add):
            accs.append(y[0])
            add(self, x, y)
        animator.add = recording_add
        animator._recorded = True

    env = {"__name__": "__main__"}
    sys.stdout = Quiet()
    try:
        for c in code:
            exec(compile(c, args.notebook, "exec"), env)
            record(env.get("Animator"))
            if "d2l" in env:
                record(env["d2l"].Animator)
    finally:
        sys.stdout = sys.__stdout__
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.notebook} framework {args.framework} seed {args.seed} epochs "
          + " ".join(f"{a:.4f}" for a in accs), flush=True)


if __name__ == "__main__":
    main()

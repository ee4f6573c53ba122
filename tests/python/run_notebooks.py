#!/usr/bin/env python3
"""Executes every notebook of examples/notebooks/ with Jupyter itself
(nbclient and an ipykernel kernel) and checks what each prints:

  lenet_from_scratch     seed 003 on 2 devices, 10 epochs: the chapter's line
                         `测试精度: A, S秒/轮， 在[d0, d1]` with A >= 0.80
  dataparallel_tutorial  seed 001, run with DPTRAIN_DEVICES=2 and then 3: per
                         batch of 30, `In Model: input size dptrain.Size([15, 5])`
                         twice (2 devices) or [10, 5] three times (3), the
                         last batch of 10 as 5+5, then 4+4+2; each batch's
                         `Outside:` line with the whole batch
  async_engine           seed 002's snippets print c; the issuing loop returns
                         in under a tenth of the time until waitall returns
  resnet18_concise       1 epoch of ResNet-18 under nn.DataParallel on 2
                         devices (about 10 minutes on 2 cores; --quick
                         leaves it out): the chapter's line, accuracy
                         above chance

and, last, README.md's Python quickstart (the same block in docs/python.md)
pasted into `python -i` on 2 devices prints the lines shown under it, its
decimal numbers compared to 2 places.

Each notebook gets a timeout per cell; the executed copies are written to
BUILD/notebooks/ (--out) for reading. The Jupyter venv is BUILD/jupyter-venv (PyPI's
nbclient, ipykernel, matplotlib, numpy), made on first use; dptrain is
imported from the trees: PYTHONPATH=BUILD/python:python (the extension
_dptrain.abi3.so that CMake builds into BUILD/python/, the package's
sources). Exits 1 on any failure, naming it.

usage: tests/python/run_notebooks.py [--build BUILD] [--venv VENV] [--only NAME ...] [--quick]
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = os.path.join(ROOT, "examples", "notebooks")
VENV_PACKAGES = ["nbclient", "nbformat", "ipykernel", "matplotlib", "numpy"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD", "build"),
                    help="the build folder: its python/ holds _dptrain (default build)")
    ap.add_argument("--venv", default=None,
                    help="the Jupyter venv (default BUILD/jupyter-venv; made when missing)")
    ap.add_argument("--out", default=None,
                    help="where the executed copies go (default BUILD/notebooks)")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME",
                    help="run only these notebooks (names without .ipynb)")
    ap.add_argument("--quick", action="store_true",
                    help="leave out resnet18_concise's epoch (about 10 minutes on 2 cores); "
                         "named in --only, it runs")
    return ap.parse_args()


def ensure_venv(venv):
    """Re-runs this script under the venv's python, making the venv first."""
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    probe = [py, "-c", "import nbclient, nbformat, ipykernel, matplotlib, numpy"]
    if not os.path.exists(py) or subprocess.run(probe, capture_output=True).returncode != 0:
        print(f"== making {venv}: pip install {' '.join(VENV_PACKAGES)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "-q"] + VENV_PACKAGES, check=True)
    os.execv(py, [py] + sys.argv)


# ---- running a notebook -------------------------------------------------------

def run_notebook(name, out_dir, env, cell_timeout, tag=""):
    """Executes NAME.ipynb in its folder; returns (stdout text of every cell, seconds)."""
    import tempfile

    import nbclient
    import nbformat
    from jupyter_client.manager import KernelManager

    path = os.path.join(NOTEBOOKS, name + ".ipynb")
    nb = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    os.environ.update(env)  # the kernel is started with this process's environment
    start = time.monotonic()
    try:
        # The kernel talks over Unix sockets in a scratch folder: no TCP ports,
        # and no warning that TCP is unencrypted.
        with tempfile.TemporaryDirectory() as sockets:
            km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
            client = nbclient.NotebookClient(nb, km=km, timeout=cell_timeout,
                                             resources={"metadata": {"path": NOTEBOOKS}})
            error = None
            try:
                client.execute()
            except Exception as e:  # CellExecutionError, CellTimeoutError, DeadKernelError
                error = e
            finally:
                if km.has_kernel:  # nbclient leaves a kernel manager it was given running
                    km.shutdown_kernel(now=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = time.monotonic() - start
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, f"{name}{tag}.ipynb")
    nbformat.write(nb, out)
    if error is not None:
        raise Check(f"{name}{tag}: the notebook failed after {seconds:.0f} s (executed copy: {out}):\n"
                    + re.sub(r"\x1b\[[0-9;]*m", "", str(error))[-4000:])
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for o in cell.outputs:
            if o.output_type == "stream" and o.name == "stdout":
                texts.append(o.text)
            elif o.output_type in ("execute_result", "display_data") and "text/plain" in o.get("data", {}):
                texts.append(o.data["text/plain"] + "\n")
    return "".join(texts), seconds


class Check(Exception):
    pass


def require(cond, msg):
    if not cond:
        raise Check(msg)


# ---- the checks ---------------------------------------------------------------

def check_lenet(out_dir, env):
    text, secs = run_notebook("lenet_from_scratch", out_dir, dict(env, DPTRAIN_DEVICES="2"), 1800)
    # seed 003's train(): print(f"测试精度: {acc:.2f}, {sec:.1f}秒/轮， 在{str(devices)}")
    lines = re.findall(r"^测试精度: (\d+\.\d\d), (\d+\.\d)秒/轮， 在\[(.*)\]$", text, re.M)
    require(len(lines) == 1, f"lenet_from_scratch: {len(lines)} lines `测试精度: ...`, expected 1; "
            f"its last output:\n{text[-1500:]}")
    acc, sec, devices = lines[0]
    n_devices = len(re.findall(r"device\(", devices)) or len(devices.split(","))
    require(n_devices == 2, f"lenet_from_scratch: trained on [{devices}], not 2 devices")
    # The run is deterministic: the notebook draws PyTorch's numbers
    # (dptrain's generator is PyTorch's) from dptrain's fixed default seed,
    # so its initial weights and batches are those of PyTorch's run of the
    # same code from that seed, which also ends at 0.83 (docs/python.md).
    require(float(acc) >= 0.80, f"lenet_from_scratch: test accuracy {acc} < 0.80 after 10 "
            f"epochs (the chapter's)")
    line = f"测试精度: {acc}, {sec}秒/轮， 在[{devices}]"
    return f"lenet_from_scratch: {line} (notebook {secs:.0f} s)"


IN_MODEL = re.compile(r"^\tIn Model: input size dptrain\.Size\(\[(\d+), 5\]\) "
                      r"output size dptrain\.Size\(\[(\d+), 2\]\)$")
OUTSIDE = re.compile(r"^Outside: input size dptrain\.Size\(\[(\d+), 5\]\) "
                     r"output_size dptrain\.Size\(\[(\d+), 2\]\)$")


def tutorial_batches(text):
    """[(replica input sizes in print order, the batch size outside)] from the printed lines."""
    batches, cur = [], []
    for line in text.split("\n"):
        m = IN_MODEL.match(line)
        if m:
            require(m.group(1) == m.group(2), f"dataparallel_tutorial: {line!r}: output rows differ")
            cur.append(int(m.group(1)))
            continue
        m = OUTSIDE.match(line)
        if m:
            require(m.group(1) == m.group(2), f"dataparallel_tutorial: {line!r}: output rows differ")
            batches.append((cur, int(m.group(1))))
            cur = []
        elif "In Model" in line or "Outside" in line:
            raise Check(f"dataparallel_tutorial: a line not as PyTorch prints it: {line!r}")
    require(not cur, f"dataparallel_tutorial: replica lines after the last batch: {cur}")
    return batches


def check_tutorial(out_dir, env, n):
    text, secs = run_notebook("dataparallel_tutorial", out_dir, dict(env, DPTRAIN_DEVICES=str(n)), 300,
                              f".{n}devices")
    require(f"Let's use {n} GPUs!" in text, f"dataparallel_tutorial ({n} devices): no \"Let's use {n} GPUs!\"")
    batches = tutorial_batches(text)
    want = {2: [[15, 15]] * 3 + [[5, 5]], 3: [[10, 10, 10]] * 3 + [[4, 4, 2]]}[n]
    got = [sorted(sizes, reverse=True) for sizes, _ in batches]
    require(got == want, f"dataparallel_tutorial ({n} devices): replica inputs {got}, expected {want}")
    outside = [total for _, total in batches]
    require(outside == [30, 30, 30, 10], f"dataparallel_tutorial ({n} devices): batches {outside}")
    require(all(sum(s) == t for s, t in batches), f"dataparallel_tutorial: shards do not sum to batches")
    shown = " | ".join("+".join(map(str, s)) + f"={t}" for s, t in batches)
    return f"dataparallel_tutorial, DPTRAIN_DEVICES={n}: {shown} (as printed; notebook {secs:.0f} s)"


def check_async(out_dir, env):
    text, secs = run_notebook("async_engine", out_dir, env, 600)
    # the seed's snippets: print(c) of c = a * b + 2, then of c = a * b (a, b ones (1, 2))
    require("tensor([[3., 3.]])\n" in text and "tensor([[1., 1.]])\n" in text,
            f"async_engine: the seed's print(c) did not print [[3., 3.]] and [[1., 1.]]:\n{text[:500]}")
    issued = re.search(r"the loop issuing them returned after ([\d.]+) ms", text)
    finished = re.search(r"nd\.waitall\(\) returned after +([\d.]+) ms", text)
    require(issued and finished, f"async_engine: the timings are not printed:\n{text[-1500:]}")
    t_issue, t_finish = float(issued.group(1)), float(finished.group(1))
    require(t_finish > 10 * t_issue, f"async_engine: issuing took {t_issue} ms, finishing {t_finish} ms: "
            "not ten times longer")
    first = re.search(r"the first product ready after ([\d.]+) ms, the last after ([\d.]+) ms", text)
    require(first and float(first.group(1)) * 5 < float(first.group(2)),
            f"async_engine: wait_to_read of the first product waited for the last: {first and first.group(0)}")
    return (f"async_engine: issued in {t_issue} ms, finished after {t_finish} ms; "
            f"{first.group(0)} (notebook {secs:.0f} s)")


def check_resnet(out_dir, env):
    text, secs = run_notebook("resnet18_concise", out_dir, dict(env, DPTRAIN_DEVICES="2"), 3600)
    lines = re.findall(r"^测试精度：(\d+\.\d\d)，(\d+\.\d)秒/轮，在\[(.*)\]$", text, re.M)
    require(len(lines) == 1, f"resnet18_concise: {len(lines)} lines `测试精度：...`, expected 1:\n{text[-1500:]}")
    acc, sec, devices = lines[0]
    # One epoch at lr 0.2 with batch norm's running statistics is not a
    # settled figure (the run measured on the EPYC printed 0.47; the same
    # recipe reaches 0.9 after the chapter's 10 epochs, `dptrain train
    # --model resnet18`). The floor catches a broken training: chance is
    # 0.10, and wrong running statistics give about that in eval mode.
    require(float(acc) >= 0.3, f"resnet18_concise: test accuracy {acc} after 1 epoch (chance is 0.10)")
    return f"resnet18_concise: 测试精度：{acc}，{sec}秒/轮，在[{devices}] (notebook {secs:.0f} s)"


def fenced_after(text, start, lang):
    """The first ```LANG block after the line START, and the plain ``` block after it."""
    i = text.index(start)
    code_at = text.index(f"```{lang}\n", i) + len(lang) + 4
    code = text[code_at:text.index("\n```\n", code_at) + 1]
    out_at = text.index("```\n", code_at + len(code)) + 4
    out_at = text.index("```\n", out_at) + 4  # the fence after the code's closing one
    return code, text[out_at:text.index("```\n", out_at)]


def rounded(text):
    return re.sub(r"\d+\.\d+", lambda m: f"{float(m.group()):.2f}", text)


def check_readme(env):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        code, shown = fenced_after(f.read(), "## Python\n", "python")
    with open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8") as f:
        doc_code, doc_shown = fenced_after(f.read(), "## A first session\n", "python")
    require((doc_code, doc_shown) == (code, shown),
            "README.md's Python quickstart and docs/python.md's first session differ")
    p = subprocess.run([sys.executable, "-i"], input=code, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **env, DPTRAIN_DEVICES="2"), cwd=ROOT)
    require(p.returncode == 0 and "Traceback" not in p.stderr,
            f"README quickstart: python -i exited {p.returncode}:\n{p.stderr[-2000:]}")
    require(rounded(p.stdout) == rounded(shown),
            f"README quickstart printed:\n{p.stdout}\nnot what README.md shows:\n{shown}")
    return "README quickstart pasted into python -i printed what README.md shows: " + \
        " | ".join(p.stdout.strip().split("\n"))


def main():
    args = parse_args()
    build = os.path.abspath(args.build)
    out = os.path.abspath(args.out or os.path.join(build, "notebooks"))
    ensure_venv(os.path.abspath(args.venv or os.path.join(build, "jupyter-venv")))
    ext = os.path.join(build, "python")
    env = {"PYTHONPATH": os.pathsep.join([ext, os.path.join(ROOT, "python")]
                                         + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
    probe = subprocess.run([sys.executable, "-c", "import dptrain; print(dptrain.__file__)"],
                           env=dict(os.environ, **env), capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"FAIL run_notebooks: dptrain does not import with PYTHONPATH={env['PYTHONPATH']} "
              f"(is _dptrain built into {ext}?):\n{probe.stderr[-2000:]}")
        return 1
    checks = [("lenet_from_scratch", lambda: check_lenet(out, env)),
              ("dataparallel_tutorial", lambda: check_tutorial(out, env, 2)),
              ("dataparallel_tutorial", lambda: check_tutorial(out, env, 3)),
              ("async_engine", lambda: check_async(out, env)),
              ("resnet18_concise", lambda: check_resnet(out, env)),
              ("readme", lambda: check_readme(env))]
    fails = 0
    for name, check in checks:
        if args.only is not None and name not in args.only:
            continue
        if name == "resnet18_concise" and args.quick and args.only is None:
            print("skip resnet18_concise: --quick leaves its epoch out", flush=True)
            continue
        try:
            print("ok   " + check(), flush=True)
        except Check as e:
            fails += 1
            print("FAIL " + str(e), flush=True)
    print(f"run_notebooks: {'all passed' if not fails else f'{fails} failed'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

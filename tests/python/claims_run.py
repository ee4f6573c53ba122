"""Helpers of the claim tests: running a claim script under either import,
finding a Python that has PyTorch, comparing losses.

Without PyTorch a test that needs it is skipped, visibly, with the reason;
DP_REQUIRE_TORCH=1 (make test-interop) turns that skip into a failure, as
the project's shell tests do.
"""
import math
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REQUIRE_TORCH = os.environ.get("DP_REQUIRE_TORCH") == "1"


def _has_torch(python):
    try:
        return subprocess.run([python, "-c", "import torch, numpy"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_torch_python = []


def torch_python():
    """A Python that imports torch and numpy: $DP_TORCH_PYTHON, this one,
    Debian's python3-torch (make test-interop installs it), or bench's
    PyPI venv; None if none does."""
    if not _torch_python:
        candidates = [os.environ.get("DP_TORCH_PYTHON"), sys.executable, "/usr/bin/python3",
                      os.path.join(REPO, "bench", ".venv", "bin", "python")]
        found = [c for c in candidates if c and os.path.exists(c) and _has_torch(c)]
        _torch_python.append(found[0] if found else None)
    return _torch_python[0]


def need_torch_python():
    python = torch_python()
    if python is None:
        reason = ("no Python here imports torch and numpy (set DP_TORCH_PYTHON, or "
                  "install Debian's python3-torch as make test-interop does)")
        if REQUIRE_TORCH:
            pytest.fail(f"DP_REQUIRE_TORCH=1 (make test-interop) needs PyTorch: {reason}")
        pytest.skip(reason)
    return python


def dptrain_pythonpath():
    """The folders this Python imports dptrain and _dptrain from, so that
    another Python (the torch one) imports the same build; "" where this
    one cannot import them (the dptrain side then fails with the reason)."""
    try:
        import _dptrain
        import dptrain
    except ImportError:
        return ""
    folders = [os.path.dirname(os.path.dirname(os.path.abspath(dptrain.__file__))),
               os.path.dirname(os.path.abspath(_dptrain.__file__))]
    return os.pathsep.join(dict.fromkeys(folders))


def script_env(backend, extra=None):
    env = dict(os.environ)
    env["CLAIMS_IMPORT"] = backend
    # Two devices whatever the core count: "cuda:0" and "cuda:1" are cpu:0
    # and cpu:1 on a machine without GPUs (the package's device convention).
    env.setdefault("DPTRAIN_DEVICES", "2")
    path = [HERE, dptrain_pythonpath(), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    env.update(extra or {})
    return env


def run_script(script, backend, *args, python=None, timeout=600, extra_env=None):
    """Runs tests/python/<script> with CLAIMS_IMPORT=backend; fails the test
    with the end of its stderr if it fails. Returns its stdout."""
    python = python or sys.executable
    cmd = [python, os.path.join(HERE, script)] + [str(a) for a in args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=script_env(backend, extra_env))
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} (CLAIMS_IMPORT={backend}) exited {proc.returncode}:\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


def parse_losses(stdout):
    """[loss of step 0, 1, ...] from `step i loss L` lines."""
    losses = []
    for m in re.finditer(r"^step (\d+) loss (\S+)$", stdout, re.M):
        assert int(m.group(1)) == len(losses), f"steps out of order in:\n{stdout}"
        losses.append(float(m.group(2)))
    return losses


def parse_eval_loss(stdout):
    """L from the `eval loss L` line."""
    m = re.search(r"^eval loss (\S+)$", stdout, re.M)
    assert m, f"no `eval loss` line in:\n{stdout[-2000:]}"
    return float(m.group(1))


def assert_losses_close(ours, theirs, rtol, steps, moving=True):
    """Every step's loss finite and within rtol (relative) of the other's;
    and (moving) the losses move by far more than rtol (a run that does not
    learn would agree with anything)."""
    assert len(ours) == steps and len(theirs) == steps, (ours, theirs)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert math.isfinite(a) and math.isfinite(b), f"step {step}: {a} vs {b}"
        assert abs(a - b) <= rtol * max(abs(a), abs(b)), \
            f"step {step}: dptrain {a!r} vs torch {b!r} (relative {abs(a - b) / abs(b):.2e})"
    if moving:
        assert abs(theirs[0] - theirs[-1]) > 1000 * rtol * abs(theirs[0]), theirs

"""Claim 2: Python adds no arithmetic.

1. Seed 003's from-scratch loop written in Python on 2 devices
   (claims_lenet_scratch.py under `import dptrain as torch`) and the same
   library calls made in C (lenet_calls.c, built as
   <build>/tests/python/lenet_calls), from the same initial weights and
   batches, give the same losses and device 0's weights bit for bit after
   5 steps.
2. nn.DataParallel over 2 devices on a Python Module without batch norm
   (claims_dp_equiv.py) ends 20 steps of SGD with momentum at the weights
   the module itself reaches on 1 device, within 1e-5.
"""
import os

import numpy as np
import pytest

import claims_data
import claims_run

BITS_STEPS = 5
LENET_LR = "0.03"


def lenet_calls_program():
    """<build>/tests/python/lenet_calls, <build> being where _dptrain was
    built (<build>/python/_dptrain*.so), or $DP_BUILD_DIR's."""
    import _dptrain
    builds = [os.environ.get("DP_BUILD_DIR"),
              os.path.dirname(os.path.dirname(os.path.abspath(_dptrain.__file__)))]
    for build in filter(None, builds):
        program = os.path.join(build, "tests", "python", "lenet_calls")
        if os.access(program, os.X_OK):
            return program
    pytest.fail(f"lenet_calls is not built under {builds} (tests/python/CMakeLists.txt)")


def test_python_loop_equals_the_same_c_calls_bit_for_bit(tmp_path):
    import subprocess
    data, py_out, c_out = tmp_path / "data", tmp_path / "python", tmp_path / "c"
    for d in (data, py_out, c_out):
        d.mkdir()
    claims_data.write_case("lenet_scratch", str(data))
    # The C program reads raw float32 / int32 files.
    for name, w in claims_data.load_params("lenet_scratch", str(data)):
        w.astype(np.float32).tofile(data / f"{name}.f32")
    X, y = claims_data.load_batches(str(data))
    X[:BITS_STEPS].astype(np.float32).tofile(data / "X.f32")
    y[:BITS_STEPS].astype(np.int32).tofile(data / "y.i32")

    py_losses = claims_run.parse_losses(claims_run.run_script(
        "claims_lenet_scratch.py", "dptrain", data, "--steps", BITS_STEPS, "--lr", LENET_LR,
        "--save-weights", py_out))
    proc = subprocess.run([lenet_calls_program(), str(data), str(c_out), str(BITS_STEPS), LENET_LR],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, DPTRAIN_DEVICES="2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    c_losses = claims_run.parse_losses(proc.stdout)
    assert len(py_losses) == BITS_STEPS and py_losses == c_losses, (py_losses, c_losses)
    assert all(np.isfinite(py_losses)) and py_losses[-1] < py_losses[0], py_losses
    for name, initial in claims_data.load_params("lenet_scratch", str(data)):
        ours = np.load(py_out / f"{name}.npy")
        theirs = np.fromfile(c_out / f"{name}.f32", dtype=np.float32).reshape(initial.shape)
        assert ours.dtype == np.float32 and ours.shape == initial.shape, (name, ours.dtype)
        assert not np.array_equal(ours, initial), f"{name} did not change"
        differ = np.flatnonzero(ours.view(np.uint32) != theirs.view(np.uint32))
        assert differ.size == 0, (f"{name}: {differ.size} of {ours.size} weights differ in bits, "
                                  f"first at {differ[0]}: {ours.flat[differ[0]]!r} (Python) vs "
                                  f"{theirs.flat[differ[0]]!r} (C)")


def test_data_parallel_module_equals_one_device(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    steps = claims_data.write_case("dp_equiv", str(data))
    runs = {}
    for gpus in (1, 2):
        out = tmp_path / f"gpus{gpus}"
        out.mkdir()
        losses = claims_run.parse_losses(claims_run.run_script(
            "claims_dp_equiv.py", "dptrain", data, out, "--gpus", gpus))
        assert len(losses) == steps and all(np.isfinite(losses)), losses
        runs[gpus] = (losses, out)
    (_, one_dir), (two, two_dir) = runs[1], runs[2]
    assert two[-1] < 0.5 * two[0], two  # it learnt
    for name, initial in claims_data.load_params("dp_equiv", str(data)):
        a, b = np.load(one_dir / f"{name}.npy"), np.load(two_dir / f"{name}.npy")
        assert a.shape == initial.shape and b.shape == initial.shape
        assert np.all(np.isfinite(a)) and np.all(np.isfinite(b)), name
        assert np.abs(a - initial).max() > 1e-3, f"{name} barely moved"
        worst = float(np.abs(a - b).max())
        assert worst <= 1e-5, f"{name}: 2 devices differ from 1 by {worst:.3g}"

"""What tests/onnx/onnx_torchvision.py and tests/onnx/onnx_runtime_interop.py share:
the pass/fail report, commands run with their errors kept to a few lines,
and the relative difference their output checks use."""
import subprocess

import compare

OUT_TOL = 1e-4  # outputs: largest |difference| over the largest |output|


class Report:
    """Passes, failures, and nets not yet runnable: a net whose ONNX file
    dptrain's loader refuses (an operator or attribute it does not read
    yet) is named as such, neither a pass nor a failure, and makes the run
    end in a skip (77) rather than a success."""

    def __init__(self):
        self.passes, self.fails, self.blocked = 0, 0, []

    def block(self, name, why):
        self.blocked.append(name)
        print(f"NOT RUNNABLE {name}: {why}", flush=True)

    def check(self, ok, what):
        if ok:
            self.passes += 1
        else:
            self.fails += 1
        print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
        return ok


class CommandError(Exception):
    pass


def run(cmd, **kw):
    """Runs cmd; its stdout, or CommandError with its last stderr lines."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode != 0:
        tail = "\n     ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
        raise CommandError(f"{' '.join(str(c) for c in cmd[:3])} ... exited {r.returncode}:"
                           f"\n     {tail}")
    return r.stdout


def rel_diff(got, want):
    """Largest |got - want| over largest |want|: 1e-4 is four digits of the
    outputs' scale (an output near 0 has no relative error of its own)."""
    return compare.array_max_rel_diff(got, want)

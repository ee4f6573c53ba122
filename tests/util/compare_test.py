"""tests/util/compare.py, the differences every Python and shell test takes: a
NaN, an Inf, a -Inf or a missing value (None) on either side, first, in
the middle or last, makes each difference inf and close() False, and
finite values give the exact figures. Prints "N passed, N failed"."""
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

results = {"passed": 0, "failed": 0}


def check(name, ok):
    results["passed" if ok else "failed"] += 1
    print(("ok   " if ok else "FAIL ") + name, flush=True)


BAD = [math.nan, math.inf, -math.inf, None, float("nan")]
A = [1.0, -2.0, 3.0, 0.5, 4.0]
B = [1.5, -2.0, 1.0, 0.5, 4.0]

check("finite values: max_diff 2", compare.max_diff(A, B) == 2.0)
check("finite values: max_rel_diff 2", compare.max_rel_diff(A, B) == 2.0)
check("finite values: worst 4", compare.worst(A) == 4.0)
check("finite values: close within rtol", compare.close(1.0, 1.0 + 1e-7, rtol=1e-6))
check("finite values: not close beyond", not compare.close(1.0, 1.1, rtol=1e-6, atol=1e-3))
check("finite values: differ beyond tol", compare.differ(1.0, 1.1, 0.05)
      and not compare.differ(1.0, 1.01, 0.05))
check("lengths that differ: inf", compare.max_diff(A, B[:4]) == math.inf)
check("rel_diff against 0: inf when they differ, 0 when equal",
      compare.rel_diff(1.0, 0.0) == math.inf and compare.rel_diff(0.0, 0.0) == 0.0)
missed = []
for v in BAD:
    for side in (0, 1):
        for i in (0, 2, 4):
            x, y = list(A), list(B)
            (y if side else x)[i] = v
            if compare.max_diff(x, y) != math.inf:
                missed.append(("max_diff", v, side, i))
            if compare.max_rel_diff(x, y) != math.inf:
                missed.append(("max_rel_diff", v, side, i))
            if compare.worst(y if side else x) != math.inf:
                missed.append(("worst", v, side, i))
        pair = (1.0, v) if side else (v, 1.0)
        if compare.close(*pair, rtol=1e-3, atol=1e-3) or compare.diff(*pair) != math.inf:
            missed.append(("close/diff", v, side))
        if compare.rel_diff(*pair) != math.inf:
            missed.append(("rel_diff", v, side))
        if compare.differ(*pair):
            missed.append(("differ", v, side))
    if compare.close(v, v, rtol=1e-3, atol=1e-3):
        missed.append(("close with itself", v))
check(f"NaN, Inf, -Inf and None on either side, first, middle or last: every difference inf, "
      f"close() and differ() False {missed[:3]}", not missed)
# the command line, for the shell tests
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare.py")


def status(*args):
    return subprocess.run([sys.executable, here] + list(args), capture_output=True).returncode


claims = [("close", "1.0", "1.0000001", "1e-6", "0"), ("at-most", "1e-6", "1e-5"),
          ("at-least", "0.3", "0.3"), ("more-than", "0.5", "0.3")]
false_claims = [("close", "1.0", "1.1", "1e-6", "0"), ("at-most", "1e-4", "1e-5"),
                ("at-least", "0.2", "0.3"), ("more-than", "0.3", "0.3")]
for v in ("nan", "inf", "-inf", "", "x"):
    false_claims += [("close", v, "1.0", "1e-6", "1"), ("close", "1.0", v, "1e-6", "1"),
                     ("at-most", v, "1e-5"), ("at-least", v, "0.3"), ("more-than", v, "0.3")]
wrong = [c for c in claims if status(*c) != 0] + [c for c in false_claims if status(*c) != 1]
check(f"compare.py close/at-most/at-least/more-than: 0 when the claim holds, 1 when not or for "
      f"NaN, Inf, -Inf, '' and 'x' on either side {wrong[:3]}", not wrong)
tmp = tempfile.mkdtemp()
try:
    def rel(a, b):
        fa, fb = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        open(fa, "w").write("\n".join(a) + "\n")
        open(fb, "w").write("\n".join(b) + "\n")
        return subprocess.run([sys.executable, here, "max-rel-diff", fa, fb],
                              capture_output=True, text=True).stdout.strip()
    got = [rel(["1", "2", "4"], ["1", "2.5", "5"]), rel(["1", "nan"], ["1", "2"]),
           rel(["1", "2"], ["-inf", "2"]), rel(["1", "2"], ["1"]), rel(["1", "2"], ["0", "0"])]
    check(f"compare.py max-rel-diff: 0.2, then inf for NaN, -Inf and counts that differ, "
          f"2 against zeros {got}", got == ["0.2", "inf", "inf", "inf", "2"])
finally:
    shutil.rmtree(tmp)
print(f"{results['passed']} passed, {results['failed']} failed")
sys.exit(1 if results["failed"] else 0)

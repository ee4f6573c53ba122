"""The one way the Python and shell tests take a difference.

max() keeps whichever of two values compares larger, and every comparison
with NaN is false, so max(abs(a - b) for ...) drops a NaN that is not
first, and abs(NaN - x) > tol passes. Each function here treats a value
that is not finite (NaN, Inf, -Inf), on either side, or missing (None),
as the worst possible: the differences are inf and close() is False, so
that `worst <= tol` fails. tests/util/compare.h is the same for the C tests;
tests/util/compare_test.py tests this module.

From a shell test (each exits 0 when the claim holds, 1 otherwise, a
value that is not a finite number failing every claim):
  python3 tests/util/compare.py close A B RTOL ATOL
  python3 tests/util/compare.py at-most X BOUND
  python3 tests/util/compare.py at-least X BOUND
  python3 tests/util/compare.py more-than X BOUND
  python3 tests/util/compare.py max-rel-diff FILE_A FILE_B
The last prints max |a - b| / max |b| over two files of numbers, one a
line (max |a - b| where b is all zeros), and "inf" where a value is not
finite or the counts differ; it exits 0.
"""
import math
import sys


def finite(x):
    """Whether x is a number that is neither NaN nor infinite."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def diff(a, b):
    """|a - b|, or inf when either is not finite or missing."""
    if not finite(a) or not finite(b):
        return math.inf
    return abs(float(a) - float(b))


def close(a, b, rtol=0.0, atol=0.0):
    """Whether a and b are finite and |a - b| <= atol + rtol max(|a|, |b|)."""
    if not finite(a) or not finite(b):
        return False
    return diff(a, b) <= atol + rtol * max(abs(float(a)), abs(float(b)))


def differ(a, b, tol=0.0):
    """Whether a and b are finite and more than tol apart: for a check that
    something moved or changed (diff() is inf for NaN, so `diff(a, b) >
    tol` would pass on a NaN)."""
    return finite(a) and finite(b) and abs(float(a) - float(b)) > tol


def rel_diff(a, b, floor=0.0):
    """|a - b| / max(|b|, floor); inf when either is not finite, or when
    the denominator is 0 and they differ."""
    d = diff(a, b)
    if math.isinf(d):
        return d
    den = max(abs(float(b)), floor)
    return d / den if den > 0 else (0.0 if d == 0 else math.inf)


def worst(values):
    """The largest of values, inf if any is not finite or missing; 0 for
    none."""
    w = 0.0
    for v in values:
        if not finite(v):
            return math.inf
        w = max(w, float(v))
    return w


def max_diff(a, b):
    """max |a[i] - b[i]| over two sequences of the same length (inf when
    the lengths differ or any value is not finite)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        return math.inf
    return worst(diff(x, y) for x, y in zip(a, b))


def max_rel_diff(a, b, floor=0.0):
    """max |a[i] - b[i]| / max(|b[i]|, floor), inf as max_diff."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        return math.inf
    return worst(rel_diff(x, y, floor) for x, y in zip(a, b))


def array_max_rel_diff(got, want, floor=1e-30):
    """max |got - want| / max |want| over two arrays (numpy's), taken
    together; inf when the shapes differ or any value is not finite."""
    import numpy as np
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.isfinite(got).all() or not np.isfinite(want).all():
        return math.inf
    if got.size == 0:
        return 0.0
    return float(np.abs(got - want).max() / max(np.abs(want).max(), floor))


def _numbers(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def main(argv):
    usage = ("usage: compare.py close A B RTOL ATOL | at-most X BOUND | at-least X BOUND | "
             "more-than X BOUND | max-rel-diff FILE_A FILE_B")
    claims = {"close": 4, "at-most": 2, "at-least": 2, "more-than": 2, "max-rel-diff": 2}
    if len(argv) < 2 or claims.get(argv[1]) != len(argv) - 2:
        print(usage, file=sys.stderr)
        return 2
    what, args = argv[1], argv[2:]
    if what == "max-rel-diff":
        a, b = _numbers(args[0]), _numbers(args[1])
        d, scale = max_diff(a, b), worst(abs(float(x)) if finite(x) else x for x in b)
        print("inf" if math.isinf(d) or math.isinf(scale) else
              f"{(d / scale if scale > 0 else d):.3g}")
        return 0
    if what == "close":
        return 0 if close(args[0], args[1], float(args[2]), float(args[3])) else 1
    x, bound = args[0], float(args[1])
    if not finite(x):
        return 1
    holds = {"at-most": float(x) <= bound, "at-least": float(x) >= bound,
             "more-than": float(x) > bound}[what]
    return 0 if holds else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

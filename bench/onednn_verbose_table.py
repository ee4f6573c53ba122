#!/usr/bin/env python3
"""Sums a oneDNN verbose log (DNNL_VERBOSE=1 / ONEDNN_VERBOSE=1) per primitive.

Reads oneDNN 2.x lines (`onednn_verbose,exec,cpu,KIND,IMPL,...,TIME`) and
3.x lines (`onednn_verbose,v1,primitive,exec,cpu,...`) from a file or
stdin; lines before the first one containing --after (default: none) are
skipped, so a trainer can print a marker after its warm-up steps. One row
per (kind, implementation, pass, data types, problem): calls, calls per
step (--steps), median and total ms, sorted by total; --min-per-step
leaves out what runs only once in the log (a kernel chooser's candidates). Medians, not means:
on a loaded machine a few calls are preempted.

  bench/onednn_verbose_table.py --steps 20 --after WARMUP_DONE log.txt
"""
import argparse
import re
import statistics
import sys


def rows(lines, after):
    started = after is None
    for line in lines:
        if not started:
            started = after in line
            continue
        if "verbose" not in line or ",exec," not in line:
            continue
        f = line.rstrip("\n").split(",")
        i = f.index("exec")
        try:
            kind, impl, prop, mds = f[i + 2], f[i + 3], f[i + 4], f[i + 5]
            attrs, problem, ms = f[i + 6], f[-2], float(f[-1])
        except (IndexError, ValueError):
            continue
        # data types of the memory descriptors, in order: "src:bf16" or "src_bf16"
        types = "/".join(t for t in re.findall(r"(?:^|\s)[a-z_]+?[_:](bf16|f32|s32|u8|s8|f16)", mds))
        post = " +relu" if "relu" in attrs and kind != "eltwise" else ""
        yield (kind + post, impl, prop, types, problem), ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", nargs="?", help="the verbose log (default: stdin)")
    ap.add_argument("--after", help="skip lines up to the first that contains this")
    ap.add_argument("--steps", type=int, default=1, help="steps in the log, for calls/step")
    ap.add_argument("--min-per-step", type=float, default=0.0,
                    help="leave out rows of fewer calls a step (a chooser's one-off candidates)")
    args = ap.parse_args()
    src = open(args.log) if args.log else sys.stdin
    times = {}
    for key, ms in rows(src, args.after):
        times.setdefault(key, []).append(ms)
    table = sorted((kv for kv in times.items() if len(kv[1]) / args.steps >= args.min_per_step),
                   key=lambda kv: -sum(kv[1]))
    per_step = sum(statistics.median(v) * len(v) for _, v in table) / args.steps
    print(f"{'calls/step':>10} {'median ms':>9} {'total ms':>9}  kind, implementation, pass, "
          f"types, problem")
    for (kind, impl, prop, types, problem), v in table:
        print(f"{len(v) / args.steps:10.2f} {statistics.median(v):9.3f} {sum(v):9.1f}  "
              f"{kind}, {impl}, {prop}, {types}, {problem}")
    print(f"per step (calls/step x median): {per_step:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

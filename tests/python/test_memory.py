"""Claim 7: memory stays flat over any number of steps.

claims_memory_loop.py runs 10,000 steps of a from-scratch training loop in
the seed's style (2 devices, one tape per step, allreduce through
`[:] +=` and `.to`, sgd under no_grad) in a child process; its resident set
(/proc/self/statm) after every 500 steps must stay within 5% of its value
after step 100, and the loop must have learnt (its loss falls), so that it
did the work of a training loop.
"""
import claims_run

STEPS = 10_000


def test_rss_flat_over_ten_thousand_steps():
    out = claims_run.run_script("claims_memory_loop.py", "dptrain", STEPS, timeout=600)
    rss = {int(step): int(size) for kind, step, size in
           (line.split() for line in out.splitlines() if line.startswith("rss "))}
    assert 100 in rss and STEPS in rss, out
    base = rss[100]
    worst_step = max(rss, key=lambda s: abs(rss[s] - base))
    print(f"RSS after step 100: {base / 2**20:.1f} MiB; furthest: {rss[worst_step] / 2**20:.1f} "
          f"MiB after step {worst_step}")
    for step, size in sorted(rss.items()):
        assert abs(size - base) <= 0.05 * base, \
            f"RSS {size / 2**20:.1f} MiB after step {step}, {base / 2**20:.1f} MiB after step 100"
    first, last = (float(v) for v in out.split("loss first ")[1].split(" last "))
    assert last < 0.5 * first, out

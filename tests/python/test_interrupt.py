"""Claim 6: Ctrl-C interrupts a waiting call within half a second.

A child Python queues about 3 s of large matrix products on device 0 (they
return at once), then waits for the last one's sum with .item(). The parent sends
SIGINT while the child waits: the child must raise KeyboardInterrupt within
0.5 s of the signal (the wait releases the GIL and checks for signals every
100 ms), and then work: a call on device 1 gives its value at once, and one
on device 0 gives the right value once the products already queued there
have run (the engine keeps running them).
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent("""
    import time
    import dptrain as torch
    a = torch.randn(size=(1024, 1024), device="cuda:0") * 0.015
    for _ in range(2):  # the second product timed (the first sets up the kernel)
        start = time.monotonic()
        (a @ a).sum().item()
        one = time.monotonic() - start
    b = a
    for _ in range(max(10, min(5000, int(3.0 / max(one, 1e-4))))):  # about 3 s of products
        b = b @ a
    total = b.sum()
    print("waiting", flush=True)
    try:
        total.item()
        print("finished before the signal", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    one = torch.ones(3, 3, device="cuda:1")
    print("device 1:", (one @ one).sum().item(), flush=True)
    start = time.monotonic()
    print("device 0:", (torch.ones(4, 4, device="cuda:0") * 2.0).sum().item(), flush=True)
    print(f"device 0 waited {time.monotonic() - start:.1f} s", flush=True)
""")


def test_sigint_interrupts_a_wait_and_the_engine_goes_on():
    env = dict(os.environ, DPTRAIN_DEVICES="2")
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline() == "waiting\n", child.stderr.read()
        time.sleep(0.5)  # well inside the wait
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        line = child.stdout.readline()
        latency = time.monotonic() - sent
        assert line == "interrupted\n", f"{line!r} {child.stderr.read()}"
        assert latency < 0.5, f"KeyboardInterrupt {latency:.3f} s after SIGINT"
        out, err = child.communicate(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert "device 1: 27.0\n" in out, out + err
    assert "device 0: 32.0\n" in out, out + err
    print(f"KeyboardInterrupt {latency * 1000:.0f} ms after SIGINT; {out}")

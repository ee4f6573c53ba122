#!/usr/bin/env python3
"""make test-mutants: the standing list of breaks (tests/mutants.txt), each
made once in a scratch copy of the tree, must fail the test it names.

For each line of the list: the file's pattern (which must occur in it
exactly once) is replaced in build-mutants/tree, a copy of the working
tree's tracked and unignored files; only the library and the named test's
program are rebuilt (build-mutants/build, configured once: Release, no
CUDA, warnings allowed; for a Python test, tests/python's test_*.py, the
extension _dptrain and lenet_calls); only the named CTest test runs (with
its cmocka test filter, or for a Python test its pytest test, when the
line gives one), with CTest's environment; then the file is put back. The working tree is never written. A break is caught
when the test fails (or times out); missed when it passes or skips. A line
whose pattern is not found exactly once, whose test CTest does not know,
whose filter names no test, or whose break does not build is stale: a
failure naming the line. Prints each break's outcome as it goes, then
"N caught, M missed" with the missed and stale named, and the time taken;
exits 1 unless every break was caught.

The tests that need PyTorch or a PyPI venv run as `make test-interop`
leaves them: the venvs under BUILD (build/tensorboard-venv,
build/onnxruntime-venv, build/py-venv, the Python tests' pytest, and
build/py-torch-venv, theirs with PyTorch) are
linked into build-mutants/build, so run it after `make test-interop` (CI
does); without build/py-venv a Python test's break is missed (skipped).

Usage: scripts/test-mutants.py [--list tests/mutants.txt] [--only REGEX]
                               [--jobs N] [--timeout SECONDS]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, "build-mutants")
TREE = os.path.join(WORK, "tree")
BUILD = os.path.join(WORK, "build")
LOGS = os.path.join(WORK, "logs")
VENVS = ["tensorboard-venv", "onnxruntime-venv", "py-venv", "py-torch-venv"]


class Line:
    """One break: `name | file | pattern | replacement | [NAME=VALUE...] test [filter]`."""

    def __init__(self, number, text):
        self.number, self.text = number, text
        fields = [f.strip() for f in text.split(" | ")]
        self.error = None
        if len(fields) != 5 or not all(fields[:2]) or not fields[2] or not fields[4]:
            self.error = ("needs 5 fields: name | file | pattern | replacement | "
                          "[NAME=VALUE...] test [filter]")
            fields = (fields + [""] * 5)[:5]
        self.name, self.file, self.pattern, self.replacement, test = fields
        words = test.split()
        # leading NAME=VALUE words: environment for the test (a shorter run)
        self.env = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("="))
        words = words[len(self.env):]
        self.test = words[0] if words else ""
        self.filter = words[1] if len(words) > 1 else None
        if len(words) > 2 or any("=" in w for w in words):
            self.error = ("the test field is [NAME=VALUE...] a CTest name and at most one cmocka "
                          "or pytest test")

    def where(self):
        return f"tests/mutants.txt:{self.number} ({self.name})"


def read_list(path):
    lines = []
    with open(path) as f:
        for number, text in enumerate(f, 1):
            text = text.rstrip("\n")
            if text.strip() and not text.lstrip().startswith("#"):
                lines.append(Line(number, text))
    return lines


def sync_tree():
    """build-mutants/tree holds the working tree's tracked and unignored
    files: a file is rewritten only where its bytes differ (its mtime then
    tells the build to recompile it), and files no longer there go."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    keep = set()
    for name in names:
        src = os.path.join(ROOT, name)
        if not name or not os.path.isfile(src) or os.path.islink(src):
            continue
        keep.add(name)
        dst = os.path.join(TREE, name)
        with open(src, "rb") as f:
            data = f.read()
        try:
            with open(dst, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
        os.chmod(dst, os.stat(src).st_mode & 0o777)
    for top, _, files in os.walk(TREE):
        for f in files:
            rel = os.path.relpath(os.path.join(top, f), TREE)
            if rel not in keep:
                os.remove(os.path.join(TREE, rel))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def ctest_tests():
    """CTest's tests in build-mutants/build: name -> (command, env, cwd, timeout)."""
    r = run(["ctest", "--show-only=json-v1"], cwd=BUILD, check=True)
    tests = {}
    for t in json.loads(r.stdout)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        env = dict(kv.split("=", 1) for kv in props.get("ENVIRONMENT", []))
        tests[t["name"]] = (t.get("command", []), env, props.get("WORKING_DIRECTORY", BUILD),
                            float(props.get("TIMEOUT", 600)))
    return tests


def program_target(command):
    """The CMake target of a cmocka test's program, or None for a script."""
    if command and os.path.dirname(command[0]) == os.path.join(BUILD, "tests"):
        return os.path.basename(command[0])
    return None


def python_test(command):
    """Whether a CTest test is a tests/python file run by scripts/run-pytest.sh."""
    return len(command) >= 3 and os.path.basename(command[0]) == "run-pytest.sh"


def build(targets, jobs):
    return run(["cmake", "--build", BUILD, "-j", str(jobs), "--target"] + targets)


# The lines that say why a test failed, most telling first: cmocka's
# fail_msg, a script's FAIL line, cmocka's assertion, a test's summary.
WHY = [r"ERROR: .*", r"^\[  ERROR   \] --- (?!\[   LINE).*", r"^FAIL.*",
       r"^\[   LINE   \] --- .*", r".*\d+ passed, [1-9]\d* failed.*"]


def why_failed(out):
    for pattern in WHY:
        m = re.search(pattern, out, re.M)
        if m:
            return m.group(0).strip()
    lines = out.strip().splitlines()
    return lines[-1] if lines else "(no output)"


def kill_session(sid):
    """SIGKILL to every process of session sid: the test and what it started
    in process groups of its own (mpirun, dptrain), which killpg misses."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # after the name: state, ppid, pgrp, session
                os.kill(int(name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def run_test(line, spec, timeout, log_path):
    """(outcome, detail): outcome 'caught', 'missed' or 'stale'."""
    command, env, cwd, limit = spec
    cmd = list(command)
    if line.filter:
        if python_test(command):
            cmd = cmd[:3] + [line.filter]  # run-pytest.sh VENV FILE TEST
        elif not program_target(command):
            return "stale", f"{line.test} is neither a cmocka program nor a Python test: it " \
                            f"takes no test filter"
        else:
            cmd = cmd[:1] + [line.filter]
    full_env = dict(os.environ, **env, **line.env)
    start = time.time()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=min(limit, timeout))
        except subprocess.TimeoutExpired:
            kill_session(p.pid)
            p.wait()
            rc = None
        except BaseException:
            kill_session(p.pid)
            p.wait()
            raise
        kill_session(p.pid)  # anything the test left running
    took = time.time() - start
    with open(log_path, errors="replace") as f:
        out = f.read()
    if rc is None:
        return "caught", f"timed out after {took:.0f} s"
    if "no test matches" in out:
        return "stale", f"no test '{line.filter}' in {line.test}"
    if rc == 0:
        return "missed", f"the test passed ({took:.1f} s)"
    skip = re.search(r"^SKIP [^\n]*", out, re.M)
    if rc == 77:
        return "missed", f"the test skipped ({took:.1f} s): {skip.group(0) if skip else 'exit 77'}"
    return "caught", f"exit {rc} in {took:.1f} s: {why_failed(out)[:200]}"


def interrupt(signum, frame):
    """A SIGTERM ends the run as Ctrl-C does: the file in hand is put back."""
    raise KeyboardInterrupt()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", default=os.path.join(ROOT, "tests", "mutants.txt"))
    ap.add_argument("--only", help="run only the lines whose name matches this regex")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--interop-build", default=os.environ.get("BUILD", "build"),
                    help="the build folder whose PyPI venvs the interop tests use")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, interrupt)
    began = time.time()
    lines = read_list(args.list)
    if args.only:
        lines = [l for l in lines if re.search(args.only, l.name)]
    os.makedirs(LOGS, exist_ok=True)
    sync_tree()
    stale = []  # (line, why)
    for l in lines:
        if l.error:
            continue
        path = os.path.join(TREE, l.file)
        if not os.path.isfile(path):
            l.error = f"{l.file}: no such file in the tree"
            continue
        with open(path) as f:
            n = f.read().count(l.pattern)
        if n != 1:
            l.error = f"{l.file}: the pattern occurs {n} times, not once: {l.pattern!r}"
    if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
        print("test-mutants: configuring build-mutants/build (Release, CPU only)", flush=True)
        r = run(["cmake", "-S", TREE, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release",
                 "-DDP_CUDA=OFF"])
        if r.returncode:
            sys.exit("test-mutants: cmake failed:\n" + r.stdout[-3000:] + r.stderr[-3000:])
    for v in VENVS:
        src, dst = os.path.join(ROOT, args.interop_build, v), os.path.join(BUILD, v)
        if os.path.isdir(src) and not os.path.lexists(dst):
            os.symlink(os.path.abspath(src), dst)
    print("test-mutants: building the untouched tree", flush=True)
    r = run(["cmake", "--build", BUILD, "-j", str(args.jobs)])
    if r.returncode:
        sys.exit("test-mutants: the untouched tree does not build:\n" + r.stdout[-3000:] +
                 r.stderr[-3000:])
    tests = ctest_tests()
    for l in lines:
        if not l.error and l.test not in tests:
            l.error = f"CTest has no test '{l.test}'"
    stale = [(l, l.error) for l in lines if l.error]
    todo = [l for l in lines if not l.error]
    caught, missed = [], []
    for i, l in enumerate(todo, 1):
        path = os.path.join(TREE, l.file)
        with open(path) as f:
            original = f.read()
        t0 = time.time()
        label = f"[{i}/{len(todo)}] {l.name}: {l.file} -> {l.test}" + \
            (f" {l.filter}" if l.filter else "")
        print(label, flush=True)
        try:
            with open(path, "w") as f:
                f.write(original.replace(l.pattern, l.replacement, 1))
            command = tests[l.test][0]
            targets = ["dp", "dptrain"] + ([program_target(command)] if program_target(command)
                                          else [])
            if python_test(command):
                targets += ["_dptrain", "lenet_calls"]
            b = build(targets, args.jobs)
            if b.returncode:
                outcome = "stale"
                err = [x for x in (b.stdout + b.stderr).splitlines() if "error" in x]
                detail = "the break does not build: " + (err[0] if err else "see cmake")
            else:
                outcome, detail = run_test(l, tests[l.test], args.timeout,
                                           os.path.join(LOGS, l.name + ".log"))
        except KeyboardInterrupt:
            print("test-mutants: interrupted; the tree's file is put back", flush=True)
            raise
        finally:
            with open(path, "w") as f:
                f.write(original)
        print(f"    {outcome}: {detail} ({time.time() - t0:.0f} s in all)", flush=True)
        if outcome == "caught":
            caught.append(l)
        elif outcome == "missed":
            missed.append((l, detail))
        else:
            stale.append((l, detail))
    took = time.time() - began
    print(f"test-mutants: {len(caught)} caught, {len(missed)} missed"
          + (f", {len(stale)} stale" if stale else "")
          + f", of {len(lines)} breaks in {int(took // 60)} min {int(took % 60)} s")
    for l, why in missed:
        print(f"  missed {l.where()}: {l.file}: {l.test}" + (f" {l.filter}" if l.filter else "")
              + f": {why}")
    for l, why in stale:
        print(f"  stale {l.where()}: {why}")
    return 1 if missed or stale else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

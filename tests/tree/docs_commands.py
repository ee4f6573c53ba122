#!/usr/bin/env python3
"""What README.md and docs/*.md show is what dptrain does.

Two checks over every page:

- Links. Every relative link ([text](path), ![alt](path)) names a file or
  folder of the repository, and its #anchor a heading of the page it points
  to (GitHub's anchors: lower case, punctuation dropped, spaces as
  hyphens). Every page of docs/ is linked from README.md.

- Commands. A fenced block's `$ ` lines are commands (a block tagged sh or
  bash without any: each of its lines); a line ending in a backslash goes
  on with the next. How a block is checked is said by an HTML comment on
  the line before its fence, which GitHub does not show:

    (no comment)              each dptrain invocation in it (also under
                              mpirun, or after VAR=value) runs with --help
                              appended: dptrain reads and checks every flag
                              and its value first, then prints the usage
                              and exits 0; so a misspelt flag or a bad
                              value fails, and nothing is trained. It runs
                              in the page's scratch folder (below); a
                              --model file that is not there (an ONNX
                              export the page makes with PyTorch) is stood
                              in for by an empty one, since dptrain opens
                              it while it reads the flags.
    <!-- doc-test: run -->    every command runs, in order, in one scratch
                              folder per page (build/, examples/, include/,
                              tests/ and bench/ link to the repository's),
                              and its stdout and stderr together must be
                              the lines shown under it, with timings
                              (N sec, N ms, N samples/s, ... the metrics'
                              timing fields and the kernels that timing
                              chose) replaced by <t> on both sides, and a line "..." standing for any
                              number of lines.
    <!-- doc-test: approx -->  the same, every decimal number also replaced
                              (accuracies and losses, whose last digits
                              depend on the CPU's kernels).
    <!-- doc-test: skip REASON -->  not checked (a command that needs a GPU,
                              several machines or minutes, and whose flags
                              cannot be checked either).
    <!-- doc-test: file NAME -->  the block is written to NAME in the
                              scratch folder (a C program that a later
                              block compiles).

  A comment may go on with shell lines before its "-->": they run in the
  scratch folder before the block (files the commands need). Inline code
  spans that start with build/dptrain or mpirun are parsed as untagged
  blocks are, unless they hold a placeholder (FILE, N, [..], a|b).

Last, the checker is shown a page with a dead link, a dead anchor, a
misspelt flag and a bad value, and must find all four.

Usage: docs_commands.py path/to/dptrain   (DP_SOURCE_DIR: the repository,
DP_BUILD_DIR: the build folder, default the binary's).
"""
import difflib
import os
import re
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))  # tests/tree
SRC = os.environ.get("DP_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BIN = os.path.abspath(sys.argv[1])
BUILD = os.path.abspath(os.environ.get("DP_BUILD_DIR") or os.path.dirname(BIN))
TIMEOUT = 300

passes = 0
fails = 0


def ok(msg):
    global passes
    passes += 1
    print(f"ok   {msg}")


def bad(msg, detail=""):
    global fails
    fails += 1
    print(f"FAIL {msg}")
    for line in detail.splitlines():
        print(f"     {line}")


# ---- reading a page ----------------------------------------------------------

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
TAG = re.compile(r"^<!--\s*doc-test:\s*(\w+)\s*(.*)$")


class Block:
    def __init__(self, line, info, lines, mode, arg, setup):
        self.line, self.info, self.lines = line, info, lines
        self.mode, self.arg, self.setup = mode, arg, setup


def read_page(path):
    """The page's fenced blocks (with their tags) and its prose lines
    (line number, text), fences excluded."""
    with open(path, encoding="utf-8") as f:
        text = f.read().split("\n")
    blocks, prose = [], []
    i = 0
    pending = None  # (mode, arg, setup lines) of a tag just read
    while i < len(text):
        line = text[i]
        m = TAG.match(line.strip())
        if m:
            mode, rest = m.group(1), m.group(2)
            setup = []
            if rest.endswith("-->"):
                arg = rest[:-3].strip()
            else:
                arg = rest.strip()
                i += 1
                while i < len(text) and text[i].strip() != "-->":
                    setup.append(text[i])
                    i += 1
            pending = (mode, arg, setup, i + 1)
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            indent, fence, info = m.group(1), m.group(2), m.group(3)
            start = i + 1
            body = []
            i += 1
            while i < len(text) and not text[i].strip().startswith(fence):
                body.append(text[i][len(indent):] if text[i].startswith(indent) else text[i].lstrip())
                i += 1
            if i == len(text):
                bad(f"{rel(path)}:{start}: the block is never closed")
            mode, arg, setup = "parse", "", []
            if pending and pending[3] == start - 1:
                mode, arg, setup = pending[0], pending[1], pending[2]
            elif pending:
                bad(f"{rel(path)}:{pending[3]}: a doc-test comment must be right above a fence")
            pending = None
            blocks.append(Block(start, info, body, mode, arg, setup))
            i += 1
            continue
        if pending and line.strip():
            bad(f"{rel(path)}:{pending[3]}: a doc-test comment must be right above a fence")
            pending = None
        prose.append((i + 1, line))
        i += 1
    return blocks, prose


def rel(path):
    return os.path.relpath(path, SRC)


# ---- links -------------------------------------------------------------------

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def slug(heading):
    """GitHub's anchor of a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        _, prose = read_page(path)
        for _, line in prose:
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                out.add(s if n == 0 else f"{s}-{n}")
        cache[path] = out
    return cache[path]


def check_links(path, prose):
    """Each relative link of the page; returns the pages it links to."""
    linked = set()
    broken = 0
    for no, line in prose:
        for m in LINK.finditer(CODE_SPAN.sub("", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            where = f"{rel(path)}:{no}: link '{target}'"
            if not os.path.exists(dest):
                bad(f"{where}: no such file {rel(dest)}")
                broken += 1
                continue
            linked.add(dest)
            if frag and dest.endswith(".md") and frag not in anchors(dest):
                bad(f"{where}: {rel(dest)} has no heading with the anchor #{frag}")
                broken += 1
    return linked, broken


# ---- commands ----------------------------------------------------------------

def commands_of(block):
    """(line offset in the block, command, expected output lines)."""
    out = []
    lines = block.lines
    prompted = any(l.startswith("$ ") for l in lines)
    if not prompted and block.info not in ("sh", "bash", "console"):
        return out
    i = 0
    while i < len(lines):
        line = lines[i]
        if prompted and not line.startswith("$ "):
            i += 1
            continue
        cmd = line[2:] if prompted else line
        start = i
        while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        expected = []
        while prompted and i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        if cmd.strip() and not cmd.lstrip().startswith("#"):
            out.append((start, cmd, expected))
    return out


OPERATORS = {"|", "||", "&", "&&", ";", ";;", "(", ")", "<", ">", ">>", "2>", "2>&1", ">&", "&>"}


def invocations(cmd):
    """The dptrain argument lists in a shell command line: each simple
    command whose first word (after VAR=value) is dptrain, or every dptrain
    in an mpirun command (up to mpirun's ':' or an operator)."""
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=";&|<>()")
        lex.whitespace_split = True
        lex.commenters = "#"
        words = list(lex)
    except ValueError:
        return None
    simple, cur = [], []
    for w in words:
        if w in OPERATORS or re.fullmatch(r"[0-9]*[<>&|;()]+", w):
            if w[0] in "<>" and cur and cur[-1].isdigit():
                cur.pop()  # the 2 of 2>&1
            simple.append(cur)
            cur = []
        else:
            cur.append(w)
    simple.append(cur)
    found = []
    for s in simple:
        while s and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", s[0]):
            s = s[1:]
        if not s:
            continue
        is_bin = [os.path.basename(w) == "dptrain" for w in s]
        if is_bin[0]:
            found.append(s[1:])
        elif os.path.basename(s[0]) in ("mpirun", "mpiexec"):
            for k, w in enumerate(s):
                if is_bin[k]:
                    args = []
                    for a in s[k + 1:]:
                        if a == ":":
                            break
                        args.append(a)
                    found.append(args)
    return [[a for a in args if a != "..."] for args in found]


def parse_check(where, cmd, scratch):
    """Runs each dptrain invocation of cmd with --help appended, in the
    page's scratch folder. dptrain reads a --model file while it parses the
    flags; one that the page makes with another tool (an ONNX export) or
    that a reader writes is stood in for by an empty file."""
    invs = invocations(cmd)
    if invs is None:
        bad(f"{where}: the shell cannot read: {cmd}")
        return
    for args in invs:
        for k, a in enumerate(args):
            model = a[len("--model="):] if a.startswith("--model=") else \
                args[k + 1] if a == "--model" and k + 1 < len(args) else None
            if model and re.search(r"\.(onnx|txt)$", model):
                path = os.path.join(scratch, model)
                if not os.path.exists(path):
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    open(path, "w").close()
        top = not args or args[0].startswith("-")
        run = [BIN] + args + ([] if top else ["--help"])
        p = subprocess.run(run, cwd=scratch, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        shown = "dptrain " + " ".join(args)
        if p.returncode == 0 and not p.stderr and (top or p.stdout.startswith("usage:")):
            ok(f"{where}: {shown}: flags parsed")
        else:
            bad(f"{where}: {shown}: its flags are refused", (p.stderr or p.stdout).strip())


TIMING = [
    (re.compile(r"\b\d+(\.\d+)?(\s*)(sec/epoch|sec|ms|s|GFLOP/s|GB/s|samples/s)\b"), r"<t>\2\3"),
    (re.compile(r'"(epoch_seconds|samples_per_second|peak_rss_mb|rss_mb|allreduce_ms|comm_ms|'
                r'exposed_comm_ms)": [-+0-9.e]+'), r'"\1": <t>'),
    (re.compile(r"events\.out\.tfevents\.\S+"), "events.out.tfevents.<id>"),
    # The kernels --conv-algo auto chose by timing them.
    (re.compile(r'"conv_algos": \[[^\]]*\]'), '"conv_algos": [<timed>]'),
]
DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(e[-+]?\d+)?")


def normalise(lines, approx):
    out = []
    for line in lines:
        line = line.rstrip()
        for rx, sub in TIMING:
            line = rx.sub(sub, line)
        if approx:
            line = DECIMAL.sub("<x>", line)
        out.append(line)
    return out


def matches(expected, actual):
    """Whether actual fits expected, where a line "..." in expected stands
    for any number of lines."""
    memo = {}

    def fit(i, j):
        if (i, j) not in memo:
            if i == len(expected):
                r = j == len(actual)
            elif expected[i] == "...":
                r = any(fit(i + 1, k) for k in range(j, len(actual) + 1))
            else:
                r = j < len(actual) and expected[i] == actual[j] and fit(i + 1, j + 1)
            memo[(i, j)] = r
        return memo[(i, j)]

    return fit(0, 0)


def scratch_for(page):
    d = tempfile.mkdtemp(prefix="docs-", dir=os.environ.get("TMPDIR", "/tmp"))
    for name, target in (("build", BUILD), ("examples", "examples"), ("include", "include"),
                         ("tests", "tests"), ("bench", "bench")):
        os.symlink(target if os.path.isabs(target) else os.path.join(SRC, target),
                   os.path.join(d, name))
    os.mkdir(os.path.join(d, "docs"))
    return d


def shell(cmd, cwd):
    env = dict(os.environ)
    env.pop("DPTRAIN_CONV_ALGO", None)  # the default a reader gets
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=TIMEOUT)
    return p.returncode, p.stdout


def run_block(path, block, scratch):
    where0 = f"{rel(path)}:{block.line}"
    if block.setup:
        rc, out = shell("\n".join(block.setup), scratch)
        if rc != 0:
            bad(f"{where0}: the block's setup failed (exit {rc})", out)
            return
    approx = block.mode == "approx"
    for off, cmd, expected in commands_of(block):
        where = f"{rel(path)}:{block.line + off + 1}"
        try:
            rc, out = shell(cmd, scratch)
        except subprocess.TimeoutExpired:
            bad(f"{where}: {cmd}: still running after {TIMEOUT} s")
            continue
        want = normalise(expected, approx)
        got = normalise(out.rstrip("\n").split("\n") if out else [], approx)
        if matches(want, got):
            ok(f"{where}: {cmd}: prints what the page shows")
        else:
            diff = "\n".join(difflib.unified_diff(want, got, "shown", "printed", lineterm=""))
            bad(f"{where}: {cmd}: prints something else (exit {rc})", diff)


def check_spans(path, prose, scratch):
    for no, line in prose:
        for m in CODE_SPAN.finditer(line):
            span = m.group(2).strip()
            if not (span.startswith("build/dptrain ") or
                    (span.startswith("mpirun ") and "build/dptrain" in span)):
                continue
            words = span.split()
            if any(re.fullmatch(r"[A-Z][A-Z0-9_]*(\.\.\.)?|<.*|.*\|.*|\[.*|.*\]", w) for w in words):
                continue
            parse_check(f"{rel(path)}:{no}", span, scratch)


def check_page(path):
    """Checks one page in a scratch folder of its own; returns the pages it
    links to and the folder."""
    scratch = scratch_for(path)
    blocks, prose = read_page(path)
    linked, _ = check_links(path, prose)
    check_spans(path, prose, scratch)
    for block in blocks:
        where = f"{rel(path)}:{block.line}"
        if block.mode == "skip":
            continue
        if block.mode == "file":
            with open(os.path.join(scratch, block.arg), "w", encoding="utf-8") as f:
                f.write("\n".join(block.lines) + "\n")
            continue
        if block.mode in ("run", "approx"):
            run_block(path, block, scratch)
        elif block.mode == "parse":
            for off, cmd, _ in commands_of(block):
                parse_check(f"{rel(path)}:{block.line + off + 1}", cmd, scratch)
        else:
            bad(f"{where}: unknown doc-test mode '{block.mode}' (run, approx, skip, file)")
    return linked, scratch


def main():
    readme = os.path.join(SRC, "README.md")
    docs = os.path.join(SRC, "docs")
    pages = [readme] + sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    scratches = []
    try:
        for page in pages:
            linked, scratch = check_page(page)
            scratches.append(scratch)
            if page == readme:
                missing = [p for p in pages[1:] if p not in linked]
                if missing:
                    bad("README.md does not link " + ", ".join(rel(p) for p in missing))
                else:
                    ok(f"README.md links every page of docs/ ({len(pages) - 1})")
        self_test()
    finally:
        for d in scratches:
            subprocess.run(["rm", "-rf", d])
    print(f"{passes} passed, {fails} failed")
    return 1 if fails else 0


def self_test():
    """A page with three mistakes: the checks must report each."""
    global passes, fails
    before = (passes, fails)
    d = tempfile.mkdtemp(prefix="docs-selftest-")
    page = os.path.join(d, "broken.md")
    with open(page, "w", encoding="utf-8") as f:
        f.write("# Broken\n\nSee [the index](nowhere.md) and [this](#no-such-heading).\n\n"
                "```\n$ build/dptrain train --epoch 3\n```\n\n"
                "```\n$ build/dptrain train --lr -1\n```\n")
    saved = sys.stdout
    with open(os.devnull, "w") as quiet:
        sys.stdout = quiet
        try:
            _, scratch = check_page(page)
            subprocess.run(["rm", "-rf", scratch])
        finally:
            sys.stdout = saved
    caught = fails - before[1]
    passes, fails = before
    subprocess.run(["rm", "-rf", d])
    if caught == 4:
        ok("a page with a dead link, a dead anchor, a misspelt flag and a bad value: all 4 caught")
    else:
        bad(f"a page with 4 mistakes: {caught} caught")


if __name__ == "__main__":
    sys.exit(main())

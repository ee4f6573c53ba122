#!/usr/bin/env bash
# Library messages name a run's options by the option list's names, as
# `name` (dptrain shows the flag there instead, tools/cli_help.c): every
# `name` in a string of src/ or of the list's own help texts is an option of
# include/dp/train_option_list.h, so that a message cannot name one the
# list lacks (or a name it dropped).
# Usage: option_names.sh [SOURCE_ROOT]   (default: the repository's)
set -euo pipefail
root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"}
exec python3 - "$root" <<'PY'
import os
import re
import sys

root = sys.argv[1]
lst = open(os.path.join(root, "include", "dp", "train_option_list.h")).read()
names = set(re.findall(r"^\s*X\(\w+, (\w+),", lst, re.M))
if not names:
    print("include/dp/train_option_list.h: no option found")
    sys.exit(1)

def strings(text):
    """The C string literals of text, comments left out, with line numbers."""
    out, i, line = [], 0, 1
    while i < len(text):
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = len(text) if end < 0 else end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
        elif text[i] == "'":
            m = re.compile(r"'(\\.|[^\\'])*'").match(text, i)
            end = m.end() if m else i + 1
        elif text[i] == '"':
            m = re.compile(r'"(\\.|[^\\"\n])*"').match(text, i)
            end = m.end() if m else i + 1
            out.append((line, text[i:end]))
        else:
            end = i + 1
        line += text.count("\n", i, end)
        i = end
    return out

bad = []
files = [os.path.join(root, "include", "dp", "train_option_list.h")]
for d, _, fs in os.walk(os.path.join(root, "src")):
    files += [os.path.join(d, f) for f in fs if f.endswith((".c", ".h", ".cu"))]
for path in sorted(files):
    for line, s in strings(open(path).read()):
        for name in re.findall(r"`([a-z][a-z0-9_]*)`", s):
            if name not in names:
                bad.append(f"{os.path.relpath(path, root)}:{line}: `{name}` is no option of "
                           "the list")
for b in bad:
    print(b)
print(f"{len(names)} options; {'every' if not bad else 'not every'} `name` in src/ is one of them")
sys.exit(1 if bad else 0)
PY

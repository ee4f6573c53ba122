#!/usr/bin/env bash
# Checks that the parts of a run in src/train/ own their fields, as
# src/train/trainer.h says:
#   - each part declared there (typedef struct dp__train_X dp__train_X) is
#     defined (struct dp__train_X { ... }) in exactly one .c file of
#     src/train/ and in no header, so that no other file can reach its
#     fields: the compiler refuses them;
#   - the fields of dp__trainer itself (the options, the rank and the
#     parts) are written only in trainer.c, which opens and closes a run.
# Prints one line per violation and exits 1 if there is any, else 0.
#
# Usage: scripts/check-train-parts.sh [SOURCE_ROOT]   (default: the repository's)
set -euo pipefail
root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
exec python3 - "$root" <<'PY'
import os
import re
import sys

train = os.path.join(sys.argv[1], "src", "train")
header = open(os.path.join(train, "trainer.h")).read()
parts = re.findall(r"typedef struct (dp__train_\w+) \1;", header)
fields = re.search(r"typedef struct dp__trainer \{(.*?)\} dp__trainer;", header, re.S).group(1)
names = re.findall(r"(\w+)(?:\s*,\s*(\w+))?;", re.sub(r"/\*.*?\*/", "", fields, flags=re.S))
trainer_fields = sorted({n for pair in names for n in pair if n})
violations = []
if not parts:
    violations.append("src/train/trainer.h: no part declared (typedef struct dp__train_X)")
files = sorted(f for f in os.listdir(train) if f.endswith((".c", ".h")))
texts = {f: open(os.path.join(train, f)).read() for f in files}
for part in parts:
    where = [f for f in files if re.search(r"\bstruct %s\s*\{" % part, texts[f])]
    if len(where) != 1 or not where[0].endswith(".c"):
        violations.append(f"src/train: struct {part} is defined in {where or 'no file'}, "
                          "want exactly one .c file")
write = re.compile(r"(?:\bt->|\bt\.)(%s)\s*(?:=[^=]|\+\+|--)|&t(?:->|\.)(%s)\b"
                   % (("|".join(trainer_fields),) * 2))
# A trainer of its own (not a pointer to one) is a run opened elsewhere.
own = re.compile(r"\bdp__trainer\s+\w+\s*[=;]")
for f in files:
    if f == "trainer.c":
        continue
    for lineno, line in enumerate(texts[f].splitlines(), 1):
        if line.lstrip().startswith(("*", "/*")):
            continue
        m = write.search(line)
        if m:
            field = next(g for g in m.groups() if g)
            violations.append(f"src/train/{f}:{lineno}: writes dp__trainer's {field} "
                              "(only trainer.c does)")
        if own.search(line):
            violations.append(f"src/train/{f}:{lineno}: makes a dp__trainer of its own "
                              "(only trainer.c opens a run)")
for v in violations:
    print(v)
sys.exit(1 if violations else 0)
PY

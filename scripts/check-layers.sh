#!/usr/bin/env bash
# Checks that the folders of src/ depend on one another only as the layer
# table of DESIGN.md allows, by their #include "..." lines (.c, .h, .cu,
# .cuh), and its "never" list:
#   - no include cycle between folders of src/;
#   - no include cycle between the files of one folder: a source file and
#     its header are one unit (foo.c implements foo.h), a unit includes
#     another when either of its files does, and the units of a folder
#     depend one way, e.g.
#       include cycle between files in src/nn: a.h -> b.h -> a.h (a.c: includes b.h; b.h: includes a.h)
#   - each folder includes only the folders it may depend on (below);
#   - the backends are those of src/device/backend_list.h's list, each the
#     folder src/device/<name>/, and every folder under src/device/ is one;
#   - a backend never includes another backend, and no folder above
#     src/device/ includes one;
#   - no code outside src/device/ names a backend's table or entry
#     (dp__<name>_ops, dp__<name>_backend) or compares a device's kind or
#     name with a backend's name (it asks dp_device_has, dp_backend_info or
#     the device table instead);
#   - no code outside src/comm/ includes <mpi.h> or <nccl.h> or calls MPI
#     (MPI_...) or NCCL (nccl...): they are comm's backends;
#   - the Python front end's C (python/src/) includes only its own headers
#     (beside it) and the library's public ones (include/dp/*.h), and
#     nothing of src/ includes a file of python/: python/ uses only the
#     library's public API (DESIGN.md), e.g.
#       python/src/ops.c: includes ../../src/ops/conv2d.h (python/ may include only its own headers and include/dp/*.h)
# Public headers (dp/...) and system headers are not folders of src/ and
# are not checked. Prints one line per violation, e.g.
#   src/device/tensor.c: includes autograd/tape.h (device may not depend on autograd)
# and exits 1 if there is any, else prints nothing and exits 0.
#
# Usage: scripts/check-layers.sh [SOURCE_ROOT]   (default: the repository's)
set -euo pipefail
root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
exec python3 - "$root" <<'PY'
import os
import re
import sys

root = sys.argv[1]
src = os.path.join(root, "src")

# What each folder may include besides itself: DESIGN.md's "depends on"
# column, closed over the folders below. train is written against the
# public API: it may not reach the device layer's internals (struct
# dp_tensor, the device table) or a backend. comm (all communication: the
# collectives, MPI and NCCL, the buckets, the statistics exchange) sits
# above nn, whose parameter list the buckets are planned over, and below
# parallel, the only folder that includes it; the layers under it reach it
# only through public handles and the device table's hooks.
BELOW_NN = ["core", "engine", "device", "autograd", "ops"]
ALLOWED = {
    "core": [],
    "engine": ["core"],
    "device": ["core", "engine"],
    "autograd": ["core", "engine", "device"],
    "ops": ["core", "engine", "device", "autograd"],
    "nn": BELOW_NN,
    # Two sources of model definitions, each its own kind: nn.Sequential's
    # text and ONNX graphs. nn may not know them; the loader (models) above
    # them picks one by the name or path it is given.
    "nn/sequential": BELOW_NN + ["nn", "io"],
    "onnx": BELOW_NN + ["nn", "io"],
    "models": BELOW_NN + ["nn", "nn/sequential", "onnx", "io"],
    "optim": BELOW_NN + ["nn"],
    "comm": BELOW_NN + ["nn"],
    "parallel": BELOW_NN + ["nn", "optim", "comm"],
    "data": ["core"],
    "io": ["core"],
    "train": ["core", "engine", "autograd", "ops", "nn", "models", "optim", "parallel", "data",
              "io"],
}

# The backends: the names of DP__BACKEND_LIST in src/device/backend_list.h,
# each the folder device/<name>, which may depend on what device may and
# on device itself, never on another backend.
backend_violations = []
list_h = os.path.join(src, "device", "backend_list.h")
with open(list_h, encoding="utf-8") as f:
    list_text = f.read()
list_body = re.search(r"#define\s+DP__BACKEND_LIST\(X\)((?:.*\\\n)*.*)", list_text)
NAMES = re.findall(r"\bX\((\w+)\)", list_body.group(1)) if list_body else []
if not NAMES:
    backend_violations.append("src/device/backend_list.h: no DP__BACKEND_LIST(X) with X(name) lines")
BACKENDS = tuple("device/" + name for name in NAMES)
for backend in BACKENDS:
    ALLOWED[backend] = ["core", "engine", "device"]
    if not os.path.isdir(os.path.join(src, backend)):
        backend_violations.append(f"src/{backend}/: a backend of src/device/backend_list.h has "
                                  f"no folder")
for name in sorted(os.listdir(os.path.join(src, "device"))):
    if os.path.isdir(os.path.join(src, "device", name)) and "device/" + name not in BACKENDS:
        backend_violations.append(f"src/device/{name}/: a folder under src/device/ that is no "
                                  f"backend of src/device/backend_list.h")


def folder_of(rel):
    """The table's folder of a path relative to src/ (None: not in it)."""
    parts = rel.split("/")
    if len(parts) >= 3 and "/".join(parts[:2]) in ALLOWED:
        return "/".join(parts[:2])
    if len(parts) >= 2 and parts[0] in ALLOWED:
        return parts[0]
    return None


include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# Backend names in code: their tables and entries, or a kind/name compared
# with one.
names_alt = "|".join(map(re.escape, NAMES)) or "(?!)"
backend_name_re = re.compile(
    rf'dp__({names_alt})_(ops|backend)\b|strn?cmp\s*\([^;]*(->kind\b|"({names_alt})\b)')
# MPI and NCCL in code: their headers, or a call of one of their functions.
comm_api_re = re.compile(
    r'#\s*include\s*<(mpi|nccl)\.h>|\bMPI_[A-Z][A-Za-z_]*\s*\(|\bnccl[A-Z]\w*\s*\(')

violations = backend_violations
edges = {}  # (from folder, to folder) -> first "file: includes header"
file_edges = {}  # (from unit, to unit) in one directory -> first "file: includes header"

files = []
for dirpath, dirnames, filenames in os.walk(src):
    dirnames.sort()
    for name in sorted(filenames):
        if name.endswith((".c", ".h", ".cu", ".cuh")):
            files.append(os.path.join(dirpath, name))

for path in files:
    rel = os.path.relpath(path, src).replace(os.sep, "/")
    shown = "src/" + rel
    folder = folder_of(rel)
    if folder is None:
        violations.append(f"{shown}: is in no folder of DESIGN.md's layer table")
        continue
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    in_comment = False
    for lineno, line in enumerate(lines, 1):
        m = include_re.match(line)
        if m:
            header = m.group(1)
            # As the compiler looks: beside the file first, then src/.
            beside = os.path.normpath(os.path.join(os.path.dirname(path), header))
            if os.path.exists(beside):
                target_rel = os.path.relpath(beside, src).replace(os.sep, "/")
            else:
                target_rel = os.path.normpath(header).replace(os.sep, "/")
            if target_rel.startswith("../") or target_rel.startswith("dp/"):
                continue  # outside src/: public or generated headers
            if os.path.dirname(target_rel) == os.path.dirname(rel):
                unit_from, unit_to = os.path.splitext(rel)[0], os.path.splitext(target_rel)[0]
                if unit_from != unit_to:
                    file_edges.setdefault((unit_from, unit_to),
                                          f"{os.path.basename(rel)}: includes {header}")
            target = folder_of(target_rel)
            if target is None:
                if os.path.exists(os.path.join(src, target_rel)):
                    violations.append(f"{shown}: includes {header} (a file in no folder "
                                      f"of DESIGN.md's layer table)")
                continue  # a system or third-party header in quotes
            if target == folder:
                continue
            edges.setdefault((folder, target), f"{shown}: includes {header}")
            if target not in ALLOWED[folder]:
                violations.append(f"{shown}: includes {header} ({folder} may not depend "
                                  f"on {target})")
            continue
        # Backend names outside src/device/, MPI and NCCL outside src/comm/
        # (comments skipped).
        code = line
        if in_comment:
            end = code.find("*/")
            if end < 0:
                continue
            code, in_comment = code[end + 2:], False
        code = re.sub(r"/\*.*?\*/", "", code)
        start = code.find("/*")
        if start >= 0:
            code, in_comment = code[:start], True
        code = code.split("//")[0]
        if not folder.startswith("device") and backend_name_re.search(code):
            violations.append(f"{shown}:{lineno}: names a backend ({folder} may not "
                              f"recognise a backend by its name)")
        if folder != "comm" and comm_api_re.search(code):
            violations.append(f"{shown}:{lineno}: calls MPI or NCCL (only comm may: they "
                              f"are its backends)")


def graph_of(edge_map):
    graph = {}
    for a, b in edge_map:
        graph.setdefault(a, set()).add(b)
    return graph


def shortest_cycle(graph, start):
    """A shortest cycle through `start`, as a list of nodes, or None."""
    prev = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return None


def reachable(graph, start):
    found, stack = set(), [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                stack.append(nxt)
    return found


def cycles(graph):
    """One shortest cycle per group of nodes that all reach one another,
    with the group."""
    reach = {node: reachable(graph, node) for node in graph}
    reported, found = set(), []
    for node in sorted(graph):
        if node in reported or node not in reach[node]:
            continue
        group = {n for n in reach[node] if node in reach.get(n, ())}
        reported |= group
        found.append((shortest_cycle(graph, node), group))
    return found


# Cycles between folders, from the includes actually present.
for cycle, _ in cycles(graph_of(edges)):
    via = "; ".join(edges[(cycle[i], cycle[i + 1])] for i in range(len(cycle) - 1))
    violations.append(f"include cycle between folders: {' -> '.join(cycle)} ({via})")


# Cycles between the files (units) of one directory.
def unit_name(unit):
    """A unit by its header where it has one, else its source file."""
    for ext in (".h", ".cuh", ".c", ".cu"):
        if os.path.exists(os.path.join(src, unit + ext)):
            return os.path.basename(unit) + ext
    return os.path.basename(unit)


for cycle, group in cycles(graph_of(file_edges)):
    via = "; ".join(file_edges[(cycle[i], cycle[i + 1])] for i in range(len(cycle) - 1))
    names = " -> ".join(unit_name(u) for u in cycle)
    others = sorted(unit_name(u) for u in group if u not in cycle)
    more = f"; in one circle with {', '.join(others)}" if others else ""
    violations.append(f"include cycle between files in src/{os.path.dirname(cycle[0])}: "
                      f"{names} ({via}{more})")

# python/src/: its own headers and include/dp/*.h only; and src/ never
# reaches python/.
pysrc = os.path.join(root, "python", "src")
any_include_re = re.compile(r'^\s*#\s*include\s+(["<])([^">]+)[">]')
pyfiles = []
if os.path.isdir(pysrc):
    for dirpath, dirnames, filenames in os.walk(pysrc):
        dirnames.sort()
        pyfiles += [os.path.join(dirpath, n) for n in sorted(filenames) if n.endswith((".c", ".h"))]
for path in pyfiles:
    shown = os.path.relpath(path, root).replace(os.sep, "/")
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = any_include_re.match(line)
            if not m:
                continue
            quote, header = m.groups()
            beside = os.path.normpath(os.path.join(os.path.dirname(path), header))
            public = header.startswith("dp/") and os.path.isfile(os.path.join(root, "include", header))
            own = quote == '"' and os.path.isfile(beside) and \
                os.path.commonpath([beside, pysrc]) == pysrc
            in_src = os.path.isfile(os.path.join(src, header)) or \
                (os.path.isfile(beside) and os.path.commonpath([beside, src]) == src)
            if public or own:
                continue
            if quote == '"' or in_src or header.startswith("dp/"):
                violations.append(f"{shown}: includes {header} (python/ may include only its own "
                                  f"headers and include/dp/*.h)")
python_dir = os.path.join(root, "python")
py_headers = {os.path.basename(p) for p in pyfiles if p.endswith(".h")}
for path in files:
    shown = "src/" + os.path.relpath(path, src).replace(os.sep, "/")
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = any_include_re.match(line)
            if not m:
                continue
            header = m.group(2)
            beside = os.path.normpath(os.path.join(os.path.dirname(path), header))
            found_in_src = os.path.isfile(beside) or os.path.isfile(os.path.join(src, header))
            if (os.path.isfile(beside) and os.path.commonpath([beside, python_dir]) == python_dir) \
                    or (not found_in_src and os.path.basename(header) in py_headers) \
                    or header.startswith("python/"):
                violations.append(f"{shown}: includes {header} (the library never includes "
                                  f"python/: the front end is above its public API)")

for v in violations:
    print(v)
sys.exit(1 if violations else 0)
PY

"""The notebooks of examples/notebooks/ run the seeds' own code.

Each notebook cell tagged "seed" is the seed's code; this test takes the
seed's code out of the seed document (a verbatim copy in
examples/notebooks/seeds/, pinned by its SHA-256) and the notebook's seed
cells, applies the changes each notebook declares below (import lines, the
one stray line removed, the one line a notebook needs for `__file__`), and
asserts that the result is the notebook's code, line for line. It prints
the diff between the seed and the notebook, which is the declared changes
and nothing else.

Blank lines are not compared (splitting a script into cells moves them);
for seed 001, whose page copy lost every line's indentation, leading
whitespace is not compared either, and each cell must parse as Python.

Needs neither the extension nor Jupyter: `pytest tests/python/test_notebook_seeds.py`,
or run it as a script to see the diffs.
"""
import ast
import difflib
import hashlib
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NOTEBOOKS = os.path.join(ROOT, "examples", "notebooks")
SEEDS = os.path.join(NOTEBOOKS, "seeds")

# The seed documents as they came (/work/shared/seeds of the project), so
# that no seed can be edited to make a notebook pass.
SEED_SHA256 = {
    "001_b832d6a125d3183c.txt": "183404e9c70b2ceff9600d11822c3c4543f7377809ae7af47819948608833d42",
    "002_f8323131855a6f37.txt": "813b0ce9111dee4991cb1171123c920c34d496c996dd6feb7440826206ca0f2a",
    "003_3b243badf52b120e.txt": "91a051d22439fb8f7d3304f21dda2aa638f83970d778ec9c52cdda793577dd6f",
}

# ---- the declared changes ----------------------------------------------------

# seed 003 (d2l's from-scratch script) -> lenet_from_scratch.ipynb
IMPORTS_003 = {
    "import torch": "import dptrain as torch",
    "from torch import nn": "from dptrain import nn",
    "from torch.nn import functional as F": "from dptrain.nn import functional as F",
    "import torchvision": "from dptrain import vision as torchvision",
    "from torchvision import transforms": "from dptrain.vision import transforms",
    "from torch.utils import data": "from dptrain.utils import data",
}
REMOVED_003 = ["    l = loss(lenet(X,))"]  # the seed's stray line: lenet without its params
# A notebook has no __file__; the script's data folder and chart are found
# from it, so the notebook names itself (Jupyter runs it in its own folder).
ADDED_003 = {"import os": ['__file__ = os.path.abspath("lenet_from_scratch.ipynb")']}

# seed 001 (PyTorch's DataParallel tutorial) -> dataparallel_tutorial.ipynb
IMPORTS_001 = {
    "import torch": "import dptrain as torch",
    "import torch.nn as nn": "import dptrain.nn as nn",
    "from torch.utils.data import Dataset, DataLoader": "from dptrain.utils.data import Dataset, DataLoader",
}

# seed 002 (MXNet's asynchronous computation) -> async_engine.ipynb: the
# snippets use `nd` without importing it; the notebook imports dptrain's.
# Their comments are written `// ...` on the page, which is not Python:
# the notebook writes them `# ...`.
ADDED_002_FIRST = ["from dptrain import nd"]


# ---- reading the seeds -------------------------------------------------------

def read_seed(name):
    path = os.path.join(SEEDS, name)
    with open(path, "rb") as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    assert digest == SEED_SHA256[name], f"{path}: sha256 {digest}, not the seed's {SEED_SHA256[name]}"
    return raw.decode("utf-8")


def parses(lines):
    try:
        ast.parse("\n".join(lines))
        return True
    except SyntaxError:
        return False


def seed_003_code():
    """The script's lines: the page's `In [..]:` cells, each without the
    output lines printed under its code (dropped from the end until the
    rest parses)."""
    text = read_seed("003_3b243badf52b120e.txt")
    cells, cur = [], None
    for line in text.split("\n"):
        if re.fullmatch(r"In \[[^\]]*\]:", line.strip()):
            cur = []
            cells.append(cur)
        elif cur is not None:
            cur.append(line)
    assert len(cells) == 2, f"seed 003: {len(cells)} cells, expected 2"
    code = []
    for cell in cells:
        while cell and not parses(cell):
            cell = cell[:-1]
        assert cell, "seed 003: a cell with no code that parses"
        code += cell
    return code


def seed_001_notebook():
    """The notebook embedded in the page: its JSON starts at the first line
    that is "{", and the page put a line "|" and a line "||" after each of
    its lines."""
    text = read_seed("001_b832d6a125d3183c.txt")
    lines = text.split("\n")
    start = lines.index("{")
    body = "\n".join(line for line in lines[start:] if line.strip() not in ("|", "||"))
    return json.loads(body)


def seed_001_code():
    nb = seed_001_notebook()
    return [source_lines(c) for c in nb["cells"] if c["cell_type"] == "code"]


def seed_002_snippets():
    """The two asynchrony snippets: from `a = nd.ones((1,2))` to the next
    `print(c)`, twice."""
    lines = read_seed("002_f8323131855a6f37.txt").split("\n")
    snippets, i = [], 0
    while len(snippets) < 2:
        start = lines.index("a = nd.ones((1,2))", i)
        end = lines.index("print(c)", start)
        snippets.append(lines[start:end + 1])
        i = end + 1
    return snippets


# ---- reading the notebooks ---------------------------------------------------

def source_lines(cell):
    src = cell["source"]
    return ("".join(src) if isinstance(src, list) else src).split("\n")


def read_notebook(name):
    with open(os.path.join(NOTEBOOKS, name), encoding="utf-8") as f:
        return json.load(f)


def tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def seed_cells(nb):
    return [source_lines(c) for c in nb["cells"] if c["cell_type"] == "code" and "seed" in tags(c)]


def code_lines(cells, strip_indent=False):
    out = []
    for cell in cells:
        for line in cell:
            line = line.rstrip()
            if line.strip():
                out.append(line.strip() if strip_indent else line)
    return out


def apply_changes(lines, imports=None, removed=(), added=None):
    out = []
    removed = list(removed)
    for line in lines:
        if line in removed:
            removed.remove(line)
            continue
        out.append(imports.get(line, line) if imports else line)
        for extra in (added or {}).get(line, []):
            out.append(extra)
    assert not removed, f"declared removed lines not in the seed: {removed}"
    return out


def compare(title, seed, expected, notebook):
    """Prints the seed-vs-notebook diff; asserts the notebook is the seed
    with the declared changes."""
    diff = [d for d in difflib.unified_diff(seed, notebook, "seed", "notebook", n=0, lineterm="")
            if not d.startswith(("---", "+++"))]
    print(f"== {title}: {len(seed)} lines of seed code, {len(notebook)} in the notebook's seed cells; "
          f"the differences:")
    for d in diff:
        print("   " + d)
    if expected != notebook:
        wrong = "\n".join(difflib.unified_diff(expected, notebook, "seed with the declared changes",
                                               "notebook", n=1, lineterm=""))
        raise AssertionError(f"{title}: the notebook's seed cells differ from the seed beyond the "
                             f"declared changes:\n{wrong}")
    return diff


def changed_lines(diff):
    return sorted(d for d in diff if d[:1] in "+-")


# ---- the tests ---------------------------------------------------------------

def test_lenet_from_scratch_is_seed_003():
    seed = code_lines([seed_003_code()])
    nb = code_lines(seed_cells(read_notebook("lenet_from_scratch.ipynb")))
    expected = apply_changes(seed, IMPORTS_003, REMOVED_003, ADDED_003)
    diff = compare("lenet_from_scratch.ipynb vs seed 003", seed, expected, nb)
    # What the diff holds: each import line twice (-/+) where the script
    # has it (import torch: twice), the stray line, the __file__ line.
    want = sorted(["-" + k for k in IMPORTS_003] + ["+" + v for v in IMPORTS_003.values()]
                  + ["-import torch", "+import dptrain as torch"]
                  + ["-" + REMOVED_003[0]] + ["+" + ADDED_003["import os"][0]])
    assert changed_lines(diff) == want


def test_dataparallel_tutorial_is_seed_001():
    seed_cells_001 = seed_001_code()
    nb = read_notebook("dataparallel_tutorial.ipynb")
    cells = seed_cells(nb)
    assert len(cells) == len(seed_cells_001), \
        f"{len(cells)} seed code cells in the notebook, {len(seed_cells_001)} in the seed"
    for cell in cells:  # the page lost the indentation: the notebook's must be Python
        assert parses([line for line in cell if not line.startswith("%")]), "\n".join(cell)
    seed = code_lines(seed_cells_001, strip_indent=True)
    ours = code_lines(cells, strip_indent=True)
    expected = apply_changes(seed, IMPORTS_001)
    diff = compare("dataparallel_tutorial.ipynb vs seed 001 (indentation not compared)",
                   seed, expected, ours)
    assert changed_lines(diff) == sorted(["-" + k for k in IMPORTS_001]
                                         + ["+" + v for v in IMPORTS_001.values()])
    # The tutorial's prose is the seed's too, cell for cell.
    seed_md = ["".join(c["source"]) for c in seed_001_notebook()["cells"] if c["cell_type"] == "markdown"]
    nb_md = ["".join(c["source"]) for c in nb["cells"]
             if c["cell_type"] == "markdown" and "seed" in tags(c)]
    assert nb_md == seed_md


def slash_comment_to_hash(line):
    code, sep, comment = line.partition(" // ")
    return f"{code}  # {comment}" if sep else line


def test_async_engine_is_seed_002():
    snippets = seed_002_snippets()
    seed = code_lines(snippets)
    cells = seed_cells(read_notebook("async_engine.ipynb"))
    assert len(cells) == 2, f"{len(cells)} seed code cells, expected the seed's 2 snippets"
    ours = code_lines(cells)
    expected = ADDED_002_FIRST + [slash_comment_to_hash(line) for line in seed]
    diff = compare("async_engine.ipynb vs seed 002", seed, expected, ours)
    n_slash = sum(" // " in line for line in seed)
    assert n_slash == 2
    assert len([d for d in diff if d.startswith("+")]) == 1 + n_slash


def test_notebooks_are_stored_clean_and_tagged():
    names = sorted(n for n in os.listdir(NOTEBOOKS) if n.endswith(".ipynb"))
    assert names == ["async_engine.ipynb", "dataparallel_tutorial.ipynb",
                     "lenet_from_scratch.ipynb", "resnet18_concise.ipynb"]
    for name in names:
        nb = read_notebook(name)
        assert nb["metadata"]["kernelspec"]["name"] == "python3", name
        for i, cell in enumerate(nb["cells"]):
            where = f"{name} cell {i}"
            assert len([t for t in tags(cell) if t in ("seed", "dptrain")]) == 1, \
                f"{where}: tagged {tags(cell)}, not one of seed / dptrain"
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, \
                    f"{where}: stored with outputs"
    # Our own cells in the seeds' notebooks say they are not the seed's.
    nb = read_notebook("async_engine.ipynb")
    ours = [c for c in nb["cells"] if "dptrain" in tags(c)]
    assert any(c["cell_type"] == "code" for c in ours)
    assert any("not in the seed" in "".join(c["source"]) for c in ours if c["cell_type"] == "markdown")
    for name in ("lenet_from_scratch.ipynb", "dataparallel_tutorial.ipynb"):
        nb = read_notebook(name)
        assert not [c for c in nb["cells"] if c["cell_type"] == "code" and "dptrain" in tags(c)], \
            f"{name}: a code cell that is not the seed's"


if __name__ == "__main__":
    for test in (test_lenet_from_scratch_is_seed_003, test_dataparallel_tutorial_is_seed_001,
                 test_async_engine_is_seed_002, test_notebooks_are_stored_clean_and_tagged):
        test()
        print(f"ok   {test.__name__}")

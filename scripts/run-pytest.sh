#!/usr/bin/env bash
# One file of tests/python as one CTest test (tests/python/CMakeLists.txt):
# pytest in the build's venv, PYTHON_VENV (PyPI's numpy, pytest and
# matplotlib; `make test`, `make test-python` create it as <build>/py-venv).
# Without that venv the test is skipped, visibly (exit 77, CTest's skip).
# tests/python/conftest.py turns a run where a test skipped (no PyTorch
# without DP_REQUIRE_TORCH=1, no GPU) into exit 77 too, naming the reason.
# TEST, when given, runs only that test of the file (a pytest node:
# FILE::TEST, as scripts/test-mutants.py passes a line's filter).
#
# DP_PY_VENV, when set, is the venv instead: a path, or a name beside
# PYTHON_VENV (make test-interop runs these tests in <build>/py-torch-venv,
# Debian's Python with its python3-torch, for the tests that import torch
# themselves).
#
# Usage: [DP_PY_VENV=VENV] scripts/run-pytest.sh PYTHON_VENV FILE [TEST]
set -u
venv=$1 file=$2 test=${3:-}
if [[ -n ${DP_PY_VENV:-} ]]; then
  [[ $DP_PY_VENV == */* ]] && venv=$DP_PY_VENV || venv=$(dirname "$venv")/$DP_PY_VENV
fi
if [[ ! -x $venv/bin/python ]]; then
  echo "SKIP ${file##*/}: no venv at $venv (make test and make test-python create it)"
  exit 77
fi
"$venv/bin/python" -m pytest -q -rs -p no:cacheprovider "$file${test:+::$test}"
rc=$?
# pytest's 4 (usage: no such node) and 5 (nothing collected)
if [[ -n $test && ( $rc == 4 || $rc == 5 ) ]]; then
  echo "no test matches '$test' in ${file##*/}"
fi
exit $rc

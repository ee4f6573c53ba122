#!/usr/bin/env bash
# The Python front end against the C engine and against PyTorch: one epoch
# of seed 003's from-scratch LeNet on Fashion-MNIST (batch 256, lr 0.2),
#   python   the seed's train_batch loop written in Python, `import dptrain
#            as torch`, on 2 devices (bench/python_vs_c_lenet.py);
#   cli      build/dptrain train --model lenet --devices 2 --batch-size 256
#            --lr 0.2 --epochs 1 (the same network: src/nn/lenet.c is the
#            seed's W1..b4, with its ReLUs fused into the convolutions);
#   pytorch  the same Python code under the current PyTorch from PyPI
#            (bench/.venv, bench/pytorch_venv.sh), 2 threads;
# ROUNDS rounds, each the three once, alternating; medians; the CPU's name
# and flags; the ratios python/cli (goal <= 1.1) and python/pytorch (goal
# <= 0.6). Exits 1 when a goal is missed.
#
# usage: bench/python_vs_c.sh [ROUNDS=3]
#
# Environment: BUILD (default build), NO_BUILD=1 skips `make build`.
# PYTHONPATH gets BUILD/python (_dptrain) and python/ (the package); both
# loops run on bench/.venv's interpreter.
set -euo pipefail

ROUNDS=${1:-3}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=3]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
source "$ROOT/bench/pytorch_venv.sh"
pytorch_venv
if [[ -z $PYTORCH_VENV_PY ]]; then
    echo "error: bench/.venv has no PyTorch from PyPI: the comparison needs it" >&2
    exit 1
fi
if [[ ${NO_BUILD:-0} != 1 ]]; then
    make build BUILD="$BUILD" >&2 || { echo "error: make build failed" >&2; exit 1; }
fi
if ! ls "$BUILD"/python/_dptrain*.so >/dev/null 2>&1; then
    echo "error: no $BUILD/python/_dptrain*.so: the extension is not built" >&2
    exit 1
fi
build_abs=$(cd "$BUILD" && pwd)
export PYTHONPATH="$build_abs/python:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"

lenet="bench/python_vs_c_lenet.py --devices 2 --batch-size 256 --lr 0.2"
exec python3 bench/python_vs_c.py --rounds "$ROUNDS" \
    --python "$PYTORCH_VENV_PY $lenet --framework dptrain" \
    --cli "$BUILD/dptrain train --model lenet --devices 2 --batch-size 256 --lr 0.2 --epochs 1 --progress never" \
    --pytorch "$PYTORCH_VENV_PY $lenet --framework torch --threads 2"

#!/usr/bin/env bash
# Issue 38's point 3: dptrain's image loader against torchvision's
# ImageFolder + DataLoader(num_workers=2) over the same 2,000 JPEGs
# (photograph-like, 300-500 px: bench/make_images.py), images/s of decode +
# RandomResizedCrop(224) + flip + normalize (goal: dptrain >= 2x); then
# torchvision's ResNet-18 from ONNX trained on that folder against the same
# with the batches already in memory (goal: at most 5% slower). Medians of
# ROUNDS alternating runs, the CPU named: bench/images_vs_torchvision.py.
#
# usage: bench/images_vs_torchvision.sh [ROUNDS=3]
#
# Environment:
#   BUILD         build folder (default build); NO_BUILD=1 skips `make build`
#   STEPS         end to end: steps an epoch (default 10, batch 64)
#   NO_E2E=1      only the loader comparison
#   DATA_ARGS     more `dptrain data` arguments; TRAIN_ARGS: more `dptrain train` ones
#   TORCH_PY      the python with PyTorch, torchvision and Pillow (default
#                 bench/.venv's, made on first use; torchvision and Pillow
#                 are added to it where missing)
# The folder is made once under bench/data/ (git ignores it; about 80 MB);
# the ONNX file and the in-memory set (STEPS x 64 samples of 3x224x224
# floats: 385 MB at 10 steps) in a temporary folder removed on exit.
# Needs PyTorch, torchvision and Pillow from PyPI (bench/.venv:
# bench/pytorch_venv.sh, or TORCH_PY) and Debian's python3-torch, -torchvision and -onnx
# for the ONNX export. Exits 77 when a dptrain side is not built yet (it
# says which), 1 when a goal is missed or a run fails, 2 on a bad ROUNDS.
set -euo pipefail

ROUNDS=${1:-3}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=3]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi
STEPS=${STEPS:-10}
if ! [[ $STEPS =~ ^[1-9][0-9]*$ ]]; then
    echo "error: STEPS=$STEPS: a positive integer" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
source "$ROOT/bench/pytorch_venv.sh"
source "$ROOT/bench/pytorch_anchor.sh"
if [[ -n ${TORCH_PY:-} ]]; then
    PYTORCH_VENV_PY=$TORCH_PY
else
    pytorch_venv
fi
if [[ -z $PYTORCH_VENV_PY ]]; then
    echo "error: no PyTorch from PyPI (bench/.venv, or TORCH_PY): the comparison needs it" >&2
    exit 1
fi
if ! "$PYTORCH_VENV_PY" -c 'import torchvision, PIL' 2>/dev/null; then
    echo "== installing torchvision and Pillow from PyPI beside $PYTORCH_VENV_PY's torch" >&2
    "$PYTORCH_VENV_PY" -m pip install --quiet torchvision pillow >&2 || {
        echo "error: could not install torchvision and Pillow ($PYTORCH_VENV_PY -m pip)" >&2
        exit 1; }
fi
if [[ ${NO_BUILD:-0} != 1 ]]; then
    make build BUILD="$BUILD" >&2 || { echo "error: make build failed" >&2; exit 1; }
fi
[[ -x $BUILD/dptrain ]] || { echo "error: no $BUILD/dptrain: build first" >&2; exit 1; }
# PyTorch's threads and OpenBLAS's as the other bench scripts set them; no
# matmul anchor (pytorch_anchor_check): torchvision's side here is Pillow's
# decoding and resizing, which no BLAS takes part in.
pytorch_openblas_env

data=bench/data/jpeg-2000-300-500
"$PYTORCH_VENV_PY" bench/make_images.py "$data" --count 2000 --test-count 200 --min 300 --max 500

args=(--rounds "$ROUNDS" --dptrain "$BUILD/dptrain" --torch-python "$PYTORCH_VENV_PY"
      --data "$data" --count 2000 --data-args "${DATA_ARGS:-}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ ${NO_E2E:-0} != 1 ]]; then
    scripts/install-deps.sh python3-torch python3-torchvision python3-onnx >&2
    /usr/bin/python3 bench/images_resnet18_onnx.py "$tmp/resnet18.onnx"
    "$PYTORCH_VENV_PY" bench/images_torchvision.py npy --data "$data" --count $((64 * STEPS)) \
        --out "$tmp/npy"
    precision=fp32
    if grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then precision=bf16; fi
    args+=(--onnx "$tmp/resnet18.onnx" --npy "$tmp/npy" --steps "$STEPS"
           --precision "$precision" --train-args "${TRAIN_ARGS:-}")
fi
python3 bench/images_vs_torchvision.py "${args[@]}"

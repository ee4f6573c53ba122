#!/usr/bin/env bash
# One epoch of the seed's LeNet on Fashion-MNIST (batch 256, lr 0.2):
# dptrain against PyTorch at its best on this machine.
#
# usage: bench/lenet_vs_pytorch.sh [ROUNDS=3]
#
# Builds dptrain (`make build`), installs the current PyTorch from PyPI into
# bench/.venv on first use (bench/pytorch_venv.sh), then runs ROUNDS rounds,
# each every configuration once, alternating (bench/vs_pytorch.py):
#   dptrain fp32, and bf16 where the CPU has avx512_bf16 or amx_bf16
#     (--conv-algo auto: the kernels are measured in the first step);
#   the current PyTorch in fp32 and in torch.autocast("cpu", bfloat16), each
#     NCHW and channels_last;
#   Debian's python3-torch 1.13 in fp32 (with libopenblas0-pthread,
#     OPENBLAS_NUM_THREADS=1: bench/pytorch_anchor.sh).
# PyTorch runs 2 threads, the machine's 2 cores, as dptrain does. It prints
# every run, the medians, the CPU's name and flags, the fastest PyTorch and
# dptrain's ratio to it, against the goal for this kind of CPU.
#
# Environment:
#   DEVICES       dptrain --devices (default auto: the split that trains fastest)
#   DPTRAIN_ARGS  extra arguments for `dptrain train`
#   IMITATE=avx2  imitate an AVX2-only CPU on both sides
#   BUILD         build folder (default build); NO_BUILD=1 skips `make build`
set -euo pipefail

ROUNDS=${1:-3}
DEVICES=${DEVICES:-auto}
DPTRAIN_ARGS=${DPTRAIN_ARGS:-}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=3]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
source "$ROOT/bench/pytorch_anchor.sh"
source "$ROOT/bench/pytorch_venv.sh"
bench_imitation
pytorch_anchor_check /usr/bin/python3
pytorch_venv
if [[ ${NO_BUILD:-0} != 1 ]]; then
    make build BUILD="$BUILD" >&2 || { echo "error: make build failed" >&2; exit 1; }
fi

train="$BUILD/dptrain train --model lenet --devices $DEVICES --batch-size 256 --lr 0.2"
train+=" --epochs 1 --progress never $DPTRAIN_ARGS"
torch_args="bench/lenet_pytorch.py --epochs 1 --threads 2 --no-eval"
configs=(--config "dptrain fp32=dptrain:$train --precision fp32")
case $BENCH_ISA in
amx | avx512_bf16)
    configs+=(--config "dptrain bf16=dptrain:$train --precision bf16")
    goal=0.6
    ;;
*) goal=0.5 ;;
esac
pytorch_configs "$torch_args"
exec python3 bench/vs_pytorch.py --rounds "$ROUNDS" --unit sec/epoch --goal "$goal" "${configs[@]}"

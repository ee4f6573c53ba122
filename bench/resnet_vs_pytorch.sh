#!/usr/bin/env bash
# ResNet-18 training steps (batch 256) on Fashion-MNIST: dptrain against
# PyTorch at its best on this machine.
#
# usage: bench/resnet_vs_pytorch.sh [ROUNDS=3]
#
# Builds dptrain and build/bench_step (`make build`), installs the current
# PyTorch from PyPI into bench/.venv on first use (bench/pytorch_venv.sh),
# then runs ROUNDS rounds, each every configuration once, alternating
# (bench/vs_pytorch.py). Every side measures the same thing: 2 untimed
# warm-up steps (dptrain measures its kernels there), then the median of 10
# timed steps (forward, loss, backward, allreduce, SGD) on real batches,
# waiting for each step to finish:
#   dptrain (build/bench_step) fp32, and bf16 where the CPU has avx512_bf16
#     or amx_bf16, --conv-algo auto;
#   the current PyTorch in fp32 and in torch.autocast("cpu", bfloat16), each
#     NCHW and channels_last (bench/resnet_pytorch.py);
#   Debian's python3-torch 1.13 in fp32 (bench/pytorch_anchor.sh).
# It prints every run, the medians, the CPU's name and flags, the fastest
# PyTorch and dptrain's ratio to it, against the goal for this kind of CPU.
# One round is several minutes on 2 cores.
#
# Environment:
#   DEVICES       dptrain devices (default 1)
#   IMITATE=avx2  imitate an AVX2-only CPU on both sides
#   BUILD         build folder (default build); NO_BUILD=1 skips building
set -euo pipefail

ROUNDS=${1:-3}
DEVICES=${DEVICES:-1}
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
    { make build BUILD="$BUILD" && cmake --build "$BUILD" --target bench_step; } >&2 ||
        { echo "error: the build failed" >&2; exit 1; }
fi

step="$BUILD/bench_step resnet18 256 $DEVICES 2 10"
torch_args="bench/resnet_pytorch.py --batch-size 256 --lr 0.1 --threads 2 --warmup 2 --steps 10"
configs=(--config "dptrain fp32=dptrain:$step fp32 auto")
case $BENCH_ISA in
amx | avx512_bf16)
    configs+=(--config "dptrain bf16=dptrain:$step bf16 auto")
    goal=0.5
    ;;
avx512) goal=0.6 ;;
*) goal=0.85 ;;
esac
pytorch_configs "$torch_args"
exec python3 bench/vs_pytorch.py --rounds "$ROUNDS" --unit sec/step --goal "$goal" "${configs[@]}"

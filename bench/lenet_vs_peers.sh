#!/usr/bin/env bash
# One epoch of the seed's LeNet on Fashion-MNIST (batch 256, lr 0.2):
# dptrain against every CPU trainer a user might pick, each at its best.
#
# usage: bench/lenet_vs_peers.sh [ROUNDS=3]
#
# Builds dptrain (`make build`), installs each peer into its own venv under
# bench/ on first use (bench/pytorch_venv.sh, bench/peer_venv.sh), then runs
# ROUNDS rounds, each every configuration once, alternating
# (bench/vs_peers.py):
#   dptrain fp32, and bf16 where the CPU has avx512_bf16 or amx_bf16
#     (--conv-algo auto: the kernels are measured in the first step);
#   torch: the current PyTorch (bench/.venv) in fp32 and in
#     torch.autocast("cpu", bfloat16), each NCHW and channels_last, and
#     Debian's python3-torch 1.13 in fp32 (bench/lenet_pytorch.py);
#   tf: TensorFlow CPU (bench/.venv-tf), fp32 and mixed_bfloat16, each with
#     and without jit_compile=True (bench/peer_tf.py);
#   ipex: IPEX with its torch (bench/.venv-ipex), ipex.optimize in bf16
#     (autocast) and fp32 (bench/peer_ipex.py);
#   jax: JAX jit, fp32 and bf16 (bench/peer_jax.py).
# A JAX configuration whose epoch takes over 60 s (on 2 busy cores) is run
# once and left out of the later rounds. Every side runs 2 threads, the machine's 2 cores, as dptrain does. Each
# run prints the test accuracy after its epoch (untimed), a check that it
# trains. A peer that cannot be installed or run here is named in one line
# and left out. It prints every run, the medians, the CPU's name and flags,
# the fastest configuration of each framework, the fastest peer and
# dptrain's ratio to it, against the goal for this kind of CPU.
#
# Environment:
#   PEERS         the peers to run, in this order (default "torch tf ipex jax")
#   DEVICES       dptrain --devices (default auto: the split that trains fastest)
#   DPTRAIN_ARGS  extra arguments for `dptrain train`
#   IMITATE=avx2  imitate an AVX2-only CPU (oneDNN, ATen, XLA)
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
source "$ROOT/bench/peer_venv.sh"
bench_imitation
peers_check
if [[ ${NO_BUILD:-0} != 1 ]]; then
    make build BUILD="$BUILD" >&2 || { echo "error: make build failed" >&2; exit 1; }
fi

train="$BUILD/dptrain train --model lenet --devices $DEVICES --batch-size 256 --lr 0.2"
train+=" --epochs 1 --progress never $DPTRAIN_ARGS"
configs=(--config "dptrain fp32=dptrain:$train --precision fp32")
case $BENCH_ISA in
amx | avx512_bf16)
    configs+=(--config "dptrain bf16=dptrain:$train --precision bf16")
    goal=0.7
    ;;
*) goal=0.8 ;;
esac
peer_configs lenet "--epochs 1 --threads 2" "bench/lenet_pytorch.py --epochs 1 --threads 2"
exec python3 bench/vs_peers.py --rounds "$ROUNDS" --unit sec/epoch --goal "$goal" \
    --drop-over 60 --drop-framework jax "${configs[@]}"

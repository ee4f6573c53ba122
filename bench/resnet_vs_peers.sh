#!/usr/bin/env bash
# ResNet-18 training steps (batch 256, lr 0.1) on Fashion-MNIST: dptrain
# against every CPU trainer a user might pick, each at its best.
#
# usage: bench/resnet_vs_peers.sh [ROUNDS=3]
#
# Builds dptrain and build/bench_step (`make build`), installs each peer
# into its own venv under bench/ on first use (bench/pytorch_venv.sh,
# bench/peer_venv.sh), then runs ROUNDS rounds, each every configuration
# once, alternating (bench/vs_peers.py). Every side measures the same thing:
# 2 untimed warm-up steps (dptrain measures its kernels there, XLA
# compiles), then the median of 10 timed steps (forward, loss, backward,
# allreduce, SGD) on real batches, waiting for each step to finish:
#   dptrain (build/bench_step) fp32, and bf16 where the CPU has avx512_bf16
#     or amx_bf16, --conv-algo auto;
#   torch: the current PyTorch (bench/.venv) in fp32 and bf16 autocast, each
#     NCHW and channels_last, and Debian's python3-torch 1.13 in fp32
#     (bench/resnet_pytorch.py);
#   tf: TensorFlow CPU, fp32 and mixed_bfloat16, each with and without
#     jit_compile=True (bench/peer_tf.py);
#   ipex: ipex.optimize in bf16 (autocast) and fp32, channels_last
#     (bench/peer_ipex.py);
#   jax: JAX jit, fp32 and bf16 (bench/peer_jax.py).
# A JAX configuration whose step takes over 60 s is run once and left out
# of the later rounds. A peer that cannot be installed or run here is named in
# one line and left out. It prints every run, the medians, the CPU's name
# and flags, the fastest configuration of each framework, the fastest peer
# and dptrain's ratio to it, against the goal for this kind of CPU. One
# round is several minutes on 2 cores.
#
# Environment:
#   PEERS         the peers to run, in this order (default "torch tf ipex jax")
#   DEVICES       dptrain devices (default 1)
#   DPTRAIN_ARGS  extra arguments for build/bench_step (after its own)
#   IMITATE=avx2  imitate an AVX2-only CPU (oneDNN, ATen, XLA)
#   BUILD         build folder (default build); NO_BUILD=1 skips building
set -euo pipefail

ROUNDS=${1:-3}
DEVICES=${DEVICES:-1}
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
    { make build BUILD="$BUILD" && cmake --build "$BUILD" --target bench_step; } >&2 ||
        { echo "error: the build failed" >&2; exit 1; }
fi

step="$BUILD/bench_step resnet18 256 $DEVICES 2 10"
configs=(--config "dptrain fp32=dptrain:$step fp32 auto $DPTRAIN_ARGS")
case $BENCH_ISA in
amx | avx512_bf16)
    configs+=(--config "dptrain bf16=dptrain:$step bf16 auto $DPTRAIN_ARGS")
    goal=0.6
    ;;
*) goal=0.8 ;;
esac
common="--batch-size 256 --lr 0.1 --threads 2 --warmup 2 --steps 10"
peer_configs resnet18 "$common" "bench/resnet_pytorch.py $common"
exec python3 bench/vs_peers.py --rounds "$ROUNDS" --unit sec/step --goal "$goal" \
    --drop-over 60 --drop-framework jax "${configs[@]}"

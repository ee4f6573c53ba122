#!/usr/bin/env bash
# ResNet-18 training steps (batch 256) on Fashion-MNIST: dptrain vs PyTorch.
#
# usage: bench/resnet_vs_pytorch.sh [ROUNDS=1]
#
# Builds dptrain and build/bench_step if needed, then alternates dptrain /
# PyTorch ROUNDS times (A B A B ...) so that drift in machine speed hits both
# alike, and prints every run, the median of each, the ratio dptrain/pytorch
# and the seconds per 235-step (full Fashion-MNIST, batch 256) epoch
# extrapolated from them. Both sides measure the same thing: 2 untimed
# warm-up steps, then the median of 10 timed steps (forward, loss, backward,
# allreduce, SGD) on a real batch of 256, waiting for the step to finish:
# build/bench_step (bench/step_bench.c) for dptrain, bench/resnet_pytorch.py
# for PyTorch. One round is several minutes on the 2-core machine.
#
# Environment:
#   DEVICES       dptrain devices (default auto)
#   PYTORCH_ARGS  extra arguments for bench/resnet_pytorch.py (e.g. --channels-last)
#   BUILD         build folder (default build)
#   NO_BUILD=1    do not build, use the binaries as they are
set -euo pipefail

ROUNDS=${1:-1}
DEVICES=${DEVICES:-auto}
PYTORCH_ARGS=${PYTORCH_ARGS:-}
PY=/usr/bin/python3
EPOCH_STEPS=235      # ceil(60000 / 256)

if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=1]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}

# PyTorch at its best, or no ratio at all (bench/pytorch_anchor.sh).
source "$ROOT/bench/pytorch_anchor.sh"
pytorch_anchor_check "$PY"

if [[ ${NO_BUILD:-0} != 1 ]]; then
    echo "== make build" >&2
    if ! make build BUILD="$BUILD" >&2; then
        echo "error: make build failed" >&2
        exit 1
    fi
fi
if [[ ${NO_BUILD:-0} != 1 ]]; then
    cmake -S . -B "$BUILD" >/dev/null && cmake --build "$BUILD" --target bench_step >&2 || exit 1
fi
if [[ ! -x $BUILD/bench_step ]]; then
    echo "error: $BUILD/bench_step not found (cmake --build $BUILD --target bench_step)" >&2
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/resnet_vs_pytorch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

median() {  # median of the arguments
    "$PY" -c 'import statistics, sys; print(statistics.median(float(a) for a in sys.argv[1:]))' "$@"
}

run_dptrain() {  # $1 = round; prints seconds per step
    local log="$TMP/dptrain.$1.log" sec
    # The same measure as PyTorch's: 2 warm-up steps, then the median of 10,
    # every device waited for after each step (build/bench_step).
    if ! "$BUILD/bench_step" resnet18 256 "$DEVICES" 2 10 >"$log" 2>&1; then
        echo "error: bench_step failed (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    sec=$(sed -n 's/^SEC_PER_STEP[[:space:]]\+\([0-9.eE+-]\+\).*/\1/p' "$log" | tail -n 1)
    if [[ -z $sec ]]; then
        echo "error: no SEC_PER_STEP line from bench_step (round $1):" >&2
        cat "$log" >&2
        return 1
    fi
    echo "$sec"
}

run_pytorch() {  # $1 = round; prints seconds per step
    local log="$TMP/pytorch.$1.log" sec
    # shellcheck disable=SC2086  # PYTORCH_ARGS is split into words on purpose
    if ! "$PY" bench/resnet_pytorch.py --batch-size 256 --lr 0.1 --threads 2 \
            --warmup 2 --steps 10 $PYTORCH_ARGS >"$log" 2>&1; then
        echo "error: bench/resnet_pytorch.py failed (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    sec=$(sed -n 's/^SEC_PER_STEP[[:space:]]\+\([0-9.eE+-]\+\).*/\1/p' "$log" | tail -n 1)
    if [[ -z $sec ]]; then
        echo "error: no SEC_PER_STEP line from bench/resnet_pytorch.py (round $1):" >&2
        cat "$log" >&2
        return 1
    fi
    echo "$sec"
}

D=() P=()
for ((r = 1; r <= ROUNDS; r++)); do
    d=$(run_dptrain "$r") || exit 1
    D+=("$d")
    printf 'round %d/%d  dptrain  %8.3f sec/step\n' "$r" "$ROUNDS" "$d"
    p=$(run_pytorch "$r") || exit 1
    P+=("$p")
    printf 'round %d/%d  pytorch  %8.3f sec/step%s\n' "$r" "$ROUNDS" "$p" \
        "${PYTORCH_ARGS:+  ($PYTORCH_ARGS)}"
done

dm=$(median "${D[@]}")
pm=$(median "${P[@]}")
fmt() { local x out=""; for x in "$@"; do out+=$(printf ' %.3f' "$x"); done; echo "$out"; }
echo
printf 'dptrain  sec/step:%s  median %.3f  (median of 10 steps after 2 warm-up)\n' \
    "$(fmt "${D[@]}")" "$dm"
printf 'pytorch  sec/step:%s  median %.3f  (median of 10 steps after 2 warm-up)\n' \
    "$(fmt "${P[@]}")" "$pm"
"$PY" -c 'import sys; d, p, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]); print("ratio dptrain/pytorch: %.2f\nextrapolated sec/epoch (%d steps of 256): dptrain %.0f, pytorch %.0f" % (d / p, n, d * n, p * n))' \
    "$dm" "$pm" "$EPOCH_STEPS"

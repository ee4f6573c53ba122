#!/usr/bin/env bash
# ResNet-18 training steps (batch 256) on Fashion-MNIST: dptrain vs PyTorch.
#
# usage: bench/resnet_vs_pytorch.sh [ROUNDS=1]
#
# Builds dptrain if needed (`make build`), then alternates dptrain / PyTorch
# ROUNDS times (A B A B ...) so that drift in machine speed hits both alike,
# and prints every run, the median of each, the ratio dptrain/pytorch and
# the seconds per 235-step (full Fashion-MNIST, batch 256) epoch extrapolated
# from them. One round is 12 training steps on each side; on the 2-core
# machine that is several minutes.
#
# dptrain: `train --model resnet18 --batch-size 256 --lr 0.1 --epochs 1
# --limit-train 3072 --limit-test 256 --log-steps --metrics FILE`, i.e. one
# epoch of 12 steps. Its step lines carry no time, so sec/step is the epoch
# line's epoch_seconds / 12 (the number of step lines): every step counts,
# the first ones with their one-off costs (oneDNN primitive creation, first
# touch of the buffers), so this slightly overestimates dptrain's steady
# state. PyTorch (bench/resnet_pytorch.py): 2 untimed warm-up steps, then the
# median of 10 timed ones.
#
# Environment:
#   DEVICES       dptrain --devices (default auto)
#   DPTRAIN_ARGS  extra arguments for `dptrain train`
#   PYTORCH_ARGS  extra arguments for bench/resnet_pytorch.py (e.g. --channels-last)
#   BUILD         build folder (default build)
#   NO_BUILD=1    do not run `make build`, use the binary as it is
set -euo pipefail

ROUNDS=${1:-1}
DEVICES=${DEVICES:-auto}
DPTRAIN_ARGS=${DPTRAIN_ARGS:-}
PYTORCH_ARGS=${PYTORCH_ARGS:-}
PY=/usr/bin/python3
STEPS=12             # dptrain steps per run: --limit-train $((256 * STEPS))
EPOCH_STEPS=235      # ceil(60000 / 256)

if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=1]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DPTRAIN="$BUILD/dptrain"

if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
    echo "pytorch not installed: apt-get install python3-torch"
    exit 2
fi

if [[ ${NO_BUILD:-0} != 1 ]]; then
    echo "== make build" >&2
    if ! make build BUILD="$BUILD" >&2; then
        echo "error: make build failed" >&2
        exit 1
    fi
fi
if [[ ! -x $DPTRAIN ]]; then
    echo "error: $DPTRAIN not found after build" >&2
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/resnet_vs_pytorch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Seconds per step from a dptrain metrics file: the per-epoch line's
# epoch_seconds divided by the number of per-step lines (--log-steps) of that
# epoch, or by $STEPS if there are none.
metrics_sec_per_step() {
    "$PY" - "$1" "$STEPS" <<'EOF'
import json, sys
epoch_secs, steps = None, 0
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "step" in obj:
            steps += 1
        elif "epoch_seconds" in obj and epoch_secs is None:
            epoch_secs = float(obj["epoch_seconds"])
if epoch_secs is None:
    sys.exit("no epoch_seconds in " + sys.argv[1])
print("%.4f" % (epoch_secs / (steps or int(sys.argv[2]))))
EOF
}

# Median of the arguments.
median() {
    "$PY" -c 'import statistics, sys; print("%.4f" % statistics.median(float(a) for a in sys.argv[1:]))' "$@"
}

run_dptrain() {  # $1 = round; prints seconds per step
    local metrics="$TMP/dptrain.$1.jsonl" log="$TMP/dptrain.$1.log"
    rm -f "$metrics"
    # shellcheck disable=SC2086  # DPTRAIN_ARGS is split into words on purpose
    if ! "$DPTRAIN" train --model resnet18 --devices "$DEVICES" --batch-size 256 --lr 0.1 \
            --epochs 1 --limit-train $((256 * STEPS)) --limit-test 256 --log-steps \
            --metrics "$metrics" --progress never $DPTRAIN_ARGS >"$log" 2>&1; then
        echo "error: dptrain failed (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    if [[ ! -s $metrics ]]; then
        echo "error: dptrain wrote no metrics to $metrics (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    if ! metrics_sec_per_step "$metrics"; then
        echo "error: could not read epoch_seconds from dptrain metrics (round $1):" >&2
        cat "$metrics" >&2
        return 1
    fi
}

run_pytorch() {  # $1 = round; prints seconds per step
    local log="$TMP/pytorch.$1.log" sec
    # shellcheck disable=SC2086  # PYTORCH_ARGS is split into words on purpose
    if ! OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=1 \
            "$PY" bench/resnet_pytorch.py --batch-size 256 --lr 0.1 --threads 2 \
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
printf 'dptrain  sec/step:%s  median %.3f  (epoch_seconds / %d steps, warm-up included)\n' \
    "$(fmt "${D[@]}")" "$dm" "$STEPS"
printf 'pytorch  sec/step:%s  median %.3f  (median of 10 steps after 2 warm-up)\n' \
    "$(fmt "${P[@]}")" "$pm"
"$PY" -c 'import sys; d, p, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]); print("ratio dptrain/pytorch: %.2f\nextrapolated sec/epoch (%d steps of 256): dptrain %.0f, pytorch %.0f" % (d / p, n, d * n, p * n))' \
    "$dm" "$pm" "$EPOCH_STEPS"

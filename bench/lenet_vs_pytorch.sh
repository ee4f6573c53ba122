#!/usr/bin/env bash
# One epoch of LeNet on Fashion-MNIST: dptrain vs PyTorch on this machine.
#
# usage: bench/lenet_vs_pytorch.sh [ROUNDS=3]
#
# Builds dptrain if needed (`make build`), then alternates dptrain / PyTorch
# ROUNDS times (A B A B ...) so that drift in machine speed hits both alike,
# and prints every run, the median of each and the ratio dptrain/pytorch.
#
# Environment:
#   DEVICES       dptrain --devices (default 1)
#   DPTRAIN_ARGS  extra arguments for `dptrain train`
#   PYTORCH_ARGS  extra arguments for bench/lenet_pytorch.py
#   BUILD         build folder (default build)
#   GOAL          the ratio to meet (default 0.40; printed only)
#   NO_BUILD=1    do not run `make build`, use the binary as it is
set -euo pipefail

ROUNDS=${1:-3}
DEVICES=${DEVICES:-1}
DPTRAIN_ARGS=${DPTRAIN_ARGS:-}
PYTORCH_ARGS=${PYTORCH_ARGS:-}
GOAL=${GOAL:-0.40}
PY=/usr/bin/python3

if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=3]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DPTRAIN="$BUILD/dptrain"

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
if [[ ! -x $DPTRAIN ]]; then
    echo "error: $DPTRAIN not found after build" >&2
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/lenet_vs_pytorch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Mean epoch_seconds over the per-epoch JSON lines of a dptrain metrics file.
metrics_seconds() {
    "$PY" - "$1" <<'EOF'
import json, sys
secs = []
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        # per-epoch objects only (--log-steps adds per-step ones)
        if isinstance(obj, dict) and "epoch_seconds" in obj and "step" not in obj:
            secs.append(float(obj["epoch_seconds"]))
if not secs:
    sys.exit("no epoch_seconds in " + sys.argv[1])
print("%.4f" % (sum(secs) / len(secs)))
EOF
}

# Median of the arguments.
median() {
    "$PY" -c 'import statistics, sys; print("%.4f" % statistics.median(float(a) for a in sys.argv[1:]))' "$@"
}

run_dptrain() {  # $1 = round; prints seconds per epoch
    local metrics="$TMP/dptrain.$1.jsonl" log="$TMP/dptrain.$1.log"
    rm -f "$metrics"
    # shellcheck disable=SC2086  # DPTRAIN_ARGS is split into words on purpose
    if ! "$DPTRAIN" train --model lenet --devices "$DEVICES" --batch-size 256 --lr 0.2 \
            --epochs 1 --metrics "$metrics" $DPTRAIN_ARGS >"$log" 2>&1; then
        echo "error: dptrain failed (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    if [[ ! -s $metrics ]]; then
        echo "error: dptrain wrote no metrics to $metrics (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    if ! metrics_seconds "$metrics"; then
        echo "error: could not read epoch_seconds from dptrain metrics (round $1):" >&2
        cat "$metrics" >&2
        return 1
    fi
}

run_pytorch() {  # $1 = round; prints seconds per epoch
    local log="$TMP/pytorch.$1.log" sec
    # shellcheck disable=SC2086  # PYTORCH_ARGS is split into words on purpose
    if ! "$PY" bench/lenet_pytorch.py --epochs 1 --threads 2 $PYTORCH_ARGS >"$log" 2>&1; then
        echo "error: bench/lenet_pytorch.py failed (round $1); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    sec=$(sed -n 's/^SEC_PER_EPOCH[[:space:]]\+\([0-9.eE+-]\+\).*/\1/p' "$log" | tail -n 1)
    if [[ -z $sec ]]; then
        echo "error: no SEC_PER_EPOCH line from bench/lenet_pytorch.py (round $1):" >&2
        cat "$log" >&2
        return 1
    fi
    echo "$sec"
}

D=() P=()
for ((r = 1; r <= ROUNDS; r++)); do
    d=$(run_dptrain "$r") || exit 1
    D+=("$d")
    printf 'round %d/%d  dptrain  %8.3f sec/epoch\n' "$r" "$ROUNDS" "$d"
    p=$(run_pytorch "$r") || exit 1
    P+=("$p")
    printf 'round %d/%d  pytorch  %8.3f sec/epoch\n' "$r" "$ROUNDS" "$p"
done

dm=$(median "${D[@]}")
pm=$(median "${P[@]}")
fmt() { local x out=""; for x in "$@"; do out+=$(printf ' %.2f' "$x"); done; echo "$out"; }
echo
printf 'dptrain  sec/epoch:%s  median %.2f\n' "$(fmt "${D[@]}")" "$dm"
printf 'pytorch  sec/epoch:%s  median %.2f\n' "$(fmt "${P[@]}")" "$pm"
"$PY" -c 'import sys; d, p, g = map(float, sys.argv[1:]); print("ratio dptrain/pytorch: %.2f (goal <= %s)" % (d / p, sys.argv[3]))' \
    "$dm" "$pm" "$GOAL"

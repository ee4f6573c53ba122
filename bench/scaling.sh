#!/usr/bin/env bash
# How training scales with devices on this machine, and what the allreduce
# costs.
#
# usage: bench/scaling.sh [ROUNDS=3]
#
# 1. LeNet on Fashion-MNIST (batch 256, lr 0.2, one epoch per run, test set
#    cut to 256 samples) in three splits of the cores:
#      1x1  --devices 1 --threads 1   one device, one core
#      2x1  --devices 2 --threads 1   two devices, one core each
#      1x2  --devices 1 --threads 2   one device, two cores
#    alternated (1x1 2x1 1x2 1x1 ...) ROUNDS times so that drift in machine
#    speed hits all alike; prints every run's samples/s (read from the
#    --metrics JSON line), the medians, the speedup of 2x1 over 1x1 (goal
#    >= 1.8) and the fastest split.
# 2. build/bench_allreduce: naive vs ring allreduce time and GB/s at 1, 10 and
#    100 MB across 2 and 4 devices.
#
# Environment:
#   ROUNDS          rounds when no argument is given (default 3)
#   BUILD           build folder (default build)
#   NO_BUILD=1      do not build; use the binaries as they are
#   DPTRAIN_ARGS    extra arguments for every `dptrain train` (split on spaces)
#   ALLREDUCE_ARGS  arguments for bench_allreduce (split on spaces)
#   GOAL            the 2x1 / 1x1 speedup to meet (default 1.8; printed only)
#
# Exits 2 on a bad argument, 1 if the build or a run fails (with its output).
set -euo pipefail

ROUNDS=${1:-${ROUNDS:-3}}
DPTRAIN_ARGS=${DPTRAIN_ARGS:-}
ALLREDUCE_ARGS=${ALLREDUCE_ARGS:-}
GOAL=${GOAL:-1.8}

if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=3]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DPTRAIN="$BUILD/dptrain"
ALLREDUCE="$BUILD/bench_allreduce"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=$(command -v python3 || true)
if [[ -z $PY ]]; then
    echo "error: python3 is needed to read the metrics JSON (apt-get install python3)" >&2
    exit 1
fi

if [[ ${NO_BUILD:-0} != 1 ]]; then
    echo "== make build, then bench_allreduce" >&2
    # The configure step picks up CMakeLists.txt changes in an existing
    # build folder, so that the bench_allreduce target is known.
    if ! make build BUILD="$BUILD" >&2 || ! cmake -S . -B "$BUILD" >/dev/null ||
        ! cmake --build "$BUILD" --target bench_allreduce >&2; then
        echo "error: the build failed" >&2
        exit 1
    fi
fi
for bin in "$DPTRAIN" "$ALLREDUCE"; do
    if [[ ! -x $bin ]]; then
        echo "error: $bin not found (build it, or drop NO_BUILD=1)" >&2
        exit 1
    fi
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/scaling.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# samples_per_second of the last per-epoch JSON line of a metrics file.
metrics_rate() {
    "$PY" - "$1" <<'EOF'
import json, sys
rate = None
with open(sys.argv[1]) as f:
    for line in f:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "samples_per_second" in obj and "step" not in obj:
            rate = float(obj["samples_per_second"])
if rate is None:
    sys.exit("no samples_per_second in " + sys.argv[1])
print("%.1f" % rate)
EOF
}

median() {
    "$PY" -c 'import statistics, sys; print("%.1f" % statistics.median(float(a) for a in sys.argv[1:]))' "$@"
}

# run_split NAME DEVICES THREADS ROUND: one epoch; prints samples/s.
run_split() {
    local name=$1 devices=$2 threads=$3 round=$4
    local metrics="$TMP/$name.$round.jsonl" log="$TMP/$name.$round.log"
    # shellcheck disable=SC2086  # DPTRAIN_ARGS is split into words on purpose
    if ! "$DPTRAIN" train --model lenet --devices "$devices" --threads "$threads" \
            --batch-size 256 --lr 0.2 --epochs 1 --limit-test 256 --progress never \
            --metrics "$metrics" $DPTRAIN_ARGS >"$log" 2>&1; then
        echo "error: dptrain train --devices $devices --threads $threads failed (round $round); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    if ! metrics_rate "$metrics"; then
        echo "error: could not read samples_per_second (round $round, $name); metrics and output:" >&2
        cat "$metrics" "$log" >&2
        return 1
    fi
}

NAMES=(1x1 2x1 1x2)
DEVS=(1 2 1)
THREADS=(1 1 2)
LABELS=("1 device  x 1 core " "2 devices x 1 core " "1 device  x 2 cores")
declare -A RATES

echo "LeNet, Fashion-MNIST, batch 256, lr 0.2, 1 epoch per run, $ROUNDS rounds alternated"
echo "(on $(nproc) cores; other processes on the machine make these numbers noisy)"
for ((r = 1; r <= ROUNDS; r++)); do
    for i in 0 1 2; do
        rate=$(run_split "${NAMES[i]}" "${DEVS[i]}" "${THREADS[i]}" "$r") || exit 1
        RATES[${NAMES[i]}]+=" $rate"
        printf 'round %d/%d  %s  %9.1f samples/s\n' "$r" "$ROUNDS" "${LABELS[i]}" "$rate"
    done
done

echo
declare -A MED
for i in 0 1 2; do
    # shellcheck disable=SC2086  # the rates are a space-separated list
    MED[${NAMES[i]}]=$(median ${RATES[${NAMES[i]}]})
    printf '%s  (--devices %s --threads %s)  median %9.1f samples/s  runs:%s\n' "${LABELS[i]}" \
        "${DEVS[i]}" "${THREADS[i]}" "${MED[${NAMES[i]}]}" "${RATES[${NAMES[i]}]}"
done
"$PY" - "${MED[1x1]}" "${MED[2x1]}" "${MED[1x2]}" "$GOAL" <<'EOF'
import sys
one, two_dev, two_thr = map(float, sys.argv[1:4])
goal = float(sys.argv[4])
s = two_dev / one
print("speedup 2 devices x 1 core vs 1 x 1: %.2fx (goal >= %g: %s)"
      % (s, goal, "met" if s >= goal else "not met"))
print("speedup 1 device x 2 cores vs 1 x 1: %.2fx" % (two_thr / one))
best = max([(one, "1 device x 1 core"), (two_dev, "2 devices x 1 core"),
            (two_thr, "1 device x 2 cores")])
print("fastest: %s (%.1f samples/s)" % (best[1], best[0]))
EOF

echo
# shellcheck disable=SC2086  # ALLREDUCE_ARGS is split into words on purpose
if ! "$ALLREDUCE" $ALLREDUCE_ARGS >"$TMP/allreduce.log" 2>&1; then
    echo "error: $ALLREDUCE failed; its output:" >&2
    cat "$TMP/allreduce.log" >&2
    exit 1
fi
cat "$TMP/allreduce.log"

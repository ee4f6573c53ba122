#!/usr/bin/env bash
# How LeNet training scales with MPI ranks on this machine, and what the
# allreduce across ranks costs per step.
#
# usage: bench/mpi_scaling.sh [ROUNDS=3]
#
# LeNet on Fashion-MNIST (batch 256, lr 0.2, one epoch per run, test set cut
# to 256 samples), each rank one device with one core (mpirun --bind-to core):
#   1 rank   mpirun -np 1 dptrain train --devices 1 --threads 1
#   2 ranks  mpirun -np 2 dptrain train --devices 1 --threads 1
# alternated ROUNDS times; prints every run's samples/s and the time per step
# the ranks spent in MPI_Allreduce (both read from the --metrics JSON line;
# the allreduce time includes waiting for the slower rank), the medians and
# the speed-up of 2 ranks over 1 (goal >= 1.7). Then bench/mpi_paper.py with
# the measured 1-rank step time: the same on paper for 2-64 nodes.
#
# Environment:
#   ROUNDS        rounds when no argument is given (default 3)
#   BUILD         build folder (default build)
#   NO_BUILD=1    do not build; use build/dptrain as it is
#   DPTRAIN_ARGS  extra arguments for every `dptrain train` (split on spaces)
#   MPIRUN_ARGS   extra arguments for mpirun (split on spaces)
#   GOAL          the speed-up to meet (default 1.7; printed only)
#
# Exits 2 on a bad argument, 1 if mpirun is missing, the build or a run fails.
set -euo pipefail

ROUNDS=${1:-${ROUNDS:-3}}
DPTRAIN_ARGS=${DPTRAIN_ARGS:-}
MPIRUN_ARGS=${MPIRUN_ARGS:-}
GOAL=${GOAL:-1.7}
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [ROUNDS=3]   (ROUNDS a positive integer, got '$ROUNDS')" >&2
    exit 2
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DPTRAIN="$BUILD/dptrain"
PY=$(command -v python3 || true)
[[ -n $PY ]] || { echo "error: python3 is needed to read the metrics JSON" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "error: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
if [[ ${NO_BUILD:-0} != 1 ]] && ! make build BUILD="$BUILD" >&2; then
    echo "error: the build failed" >&2
    exit 1
fi
# mpirun refuses root unless told; CI containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mpi_scaling.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# "samples_per_second allreduce_ms" of the epoch line of a metrics file.
metrics_read() {
    "$PY" - "$1" <<'PYEOF'
import json, sys
for line in open(sys.argv[1]):
    obj = json.loads(line)
    if "samples_per_second" in obj:
        print("%.1f %.3f" % (obj["samples_per_second"], obj.get("allreduce_ms", 0.0)))
        sys.exit(0)
sys.exit("no samples_per_second in " + sys.argv[1])
PYEOF
}

median() {
    "$PY" -c 'import statistics, sys; print("%.3f" % statistics.median(float(a) for a in sys.argv[1:]))' "$@"
}

run_ranks() {
    local np=$1 round=$2
    local metrics="$TMP/$np.$round.jsonl" log="$TMP/$np.$round.log"
    # shellcheck disable=SC2086  # the *_ARGS are split into words on purpose
    if ! mpirun -np "$np" --bind-to core $MPIRUN_ARGS "$DPTRAIN" train --model lenet \
            --devices 1 --threads 1 --batch-size 256 --lr 0.2 --epochs 1 --limit-test 256 \
            --progress never --metrics "$metrics" $DPTRAIN_ARGS >"$log" 2>&1; then
        echo "error: mpirun -np $np dptrain train failed (round $round); its output:" >&2
        cat "$log" >&2
        return 1
    fi
    metrics_read "$metrics"
}

echo "LeNet, Fashion-MNIST, batch 256, lr 0.2, 1 epoch per run, each rank 1 device x 1 core,"
echo "$ROUNDS rounds alternated (on $(nproc) cores; other processes make these numbers noisy)"
declare -A RATES COMM
for ((r = 1; r <= ROUNDS; r++)); do
    for np in 1 2; do
        read -r rate comm < <(run_ranks "$np" "$r") || exit 1
        [[ -n ${rate:-} ]] || exit 1
        RATES[$np]+=" $rate"
        COMM[$np]+=" $comm"
        printf 'round %d/%d  %d rank(s)  %9.1f samples/s  allreduce %6.3f ms/step\n' \
            "$r" "$ROUNDS" "$np" "$rate" "$comm"
    done
done
echo
# shellcheck disable=SC2086  # space-separated lists
one=$(median ${RATES[1]}) two=$(median ${RATES[2]}) comm=$(median ${COMM[2]})
printf '1 rank   median %9.1f samples/s   runs:%s\n' "$one" "${RATES[1]}"
printf '2 ranks  median %9.1f samples/s   runs:%s\n' "$two" "${RATES[2]}"
printf '2 ranks  allreduce across ranks: median %.3f ms per step (runs:%s)\n' "$comm" "${COMM[2]}"
"$PY" - "$one" "$two" "$GOAL" <<'PYEOF'
import sys
one, two, goal = map(float, sys.argv[1:])
s = two / one
print("speed-up 2 ranks vs 1: %.2fx (goal >= %g: %s)" % (s, goal, "met" if s >= goal else "not met"))
print("step time on 1 rank: %.1f ms" % (256 / one * 1e3))
PYEOF
echo
step=$("$PY" -c "import sys; print(256 / float(sys.argv[1]))" "$one")
"$PY" bench/mpi_paper.py --lenet-step "$step"

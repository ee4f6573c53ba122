#!/usr/bin/env bash
# Issue 38's point 2: memory does not grow with the dataset. Trains one
# epoch of a small CNN with RandomResizedCrop(64) on generated folders of
# 2,000 and of 50,000 JPEGs (200-500 px a side, bench/make_images.py) and
# compares the peak resident memory of the two runs (/usr/bin/time's
# "Maximum resident set size", the process's VmHWM, and the --metrics line's
# peak_rss_mb beside it): goal within 10% of each other. Then the same for
# the two folders as tar shards made by `dptrain shards`.
#
# usage: bench/images_memory.sh
#
# Environment:
#   BUILD         build folder (default build); NO_BUILD=1 skips `make build`
#   COUNTS        the two dataset sizes (default "2000 50000")
#   TRAIN_ARGS    more `dptrain train` arguments (split on spaces)
#   TORCH_PY      a python with numpy and Pillow for make_images.py
#                 (default bench/.venv's; else python3 where it has them)
# The folders are made once under bench/data/ (git ignores it): 50,000
# JPEGs at about 31 KB each on average are about 1.5 GB, and their shards
# as much again; the script checks the free space first (df) and says so.
# Exits 77 when the streaming loader (or, for the shards, `dptrain
# shards`) is not built yet, saying which; 1 when the peaks differ by more
# than 10% or a run fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
read -r -a counts <<<"${COUNTS:-2000 50000}"
positive='^[1-9][0-9]*$'
if [[ ${#counts[@]} -ne 2 ]] || ! [[ ${counts[0]} =~ $positive && ${counts[1]} =~ $positive ]]; then
    echo "error: COUNTS='${COUNTS:-}': two positive integers, e.g. \"2000 50000\"" >&2
    exit 2
fi
PY=${TORCH_PY:-bench/.venv/bin/python}
if ! "$PY" -c 'import numpy, PIL' 2>/dev/null; then
    PY=python3
    "$PY" -c 'import numpy, PIL' 2>/dev/null || {
        echo "error: no python with numpy and Pillow (bench/.venv, TORCH_PY, or python3 -m pip" \
             "install numpy pillow)" >&2; exit 1; }
fi
[[ -x /usr/bin/time ]] || scripts/install-deps.sh time >&2
if [[ ${NO_BUILD:-0} != 1 ]]; then
    make build BUILD="$BUILD" >&2 || { echo "error: make build failed" >&2; exit 1; }
fi
bin=$BUILD/dptrain
[[ -x $bin ]] || { echo "error: no $bin: build first" >&2; exit 1; }

python3 -c 'import sys; sys.path.insert(0, "bench")
from images_vs_torchvision import cpu_line; print("# CPU:", cpu_line())'
echo "# memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 2^20}' /proc/meminfo)"

# Before any image is made: the streaming loader is what this measures.
# The loader that decodes every image up front would need 50,000 x ~350 x
# 350 x 3 bytes (18 GB) and, with images of many sizes, refuses them.
# (The help is read whole first: grep -q leaving the pipe early would fail
# it under pipefail.)
help=$("$bin" train --help 2>&1 || true)
if ! grep -q -- '--train-transform' <<<"$help"; then
    echo "dptrain train --train-transform: not built yet (the streaming folder loader of" \
         "issue 38): the folder and shard runs are SKIPPED"
    exit 77
fi

# Disk: 31 KB a JPEG on average at 200-500 px, twice (folder and shards),
# plus 10% for the file system.
need_mb=$(( (counts[0] + counts[1] + 400) * 31 * 2 * 11 / 10 / 1024 ))
mkdir -p bench/data
have_mb=$(df -Pm bench/data | awk 'NR == 2 {print $4}')
echo "# disk: bench/data has ${have_mb} MB free; the folders and shards need up to ${need_mb} MB" \
     "(less where made before)"
if (( have_mb < need_mb )); then
    echo "error: not enough free space in bench/data (df -m bench/data)" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A LeNet-like network for 3x64x64 images: 64 -> 32 -> 16 -> 8 pixels.
cat >"$tmp/small_cnn.txt" <<'EOF'
Conv2d(3, 16, kernel_size=5, padding=2)
ReLU()
MaxPool2d(kernel_size=2, stride=2)
Conv2d(16, 32, kernel_size=5, padding=2)
ReLU()
MaxPool2d(kernel_size=2, stride=2)
Conv2d(32, 64, kernel_size=3, padding=1)
ReLU()
MaxPool2d(kernel_size=2, stride=2)
Flatten()
Linear(64 * 8 * 8, 10)
EOF

# train_peak NAME DATA_ARGS...: one epoch; prints a line and sets PEAK_KB.
train_peak() {
    local name=$1 out status=0
    shift
    out=$tmp/${name//[^A-Za-z0-9]/_}
    # shellcheck disable=SC2086
    /usr/bin/time -v -o "$out.time" "$bin" train --model "$tmp/small_cnn.txt" "$@" \
        --train-transform random-resized-crop:64,flip --test-transform resize:64,center-crop:64 \
        --batch-size 64 --lr 0.05 --epochs 1 --metrics "$out.jsonl" --progress never \
        ${TRAIN_ARGS:-} >"$out.log" 2>&1 || status=$?
    if [[ $status != 0 ]]; then
        echo "error: $name: dptrain train failed (exit $status):" >&2
        cat "$out.log" >&2
        exit 1
    fi
    PEAK_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out.time")
    local metrics secs acc
    metrics=$(python3 -c 'import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and "\"step\"" not in l][-1]
print(e.get("peak_rss_mb", "?"), e["epoch_seconds"], e["test_acc"])' "$out.jsonl")
    read -r metrics_mb secs acc <<<"$metrics"
    printf '%-30s peak RSS %8.1f MB (metrics peak_rss_mb %s)   epoch %7.1f s   test acc %s\n' \
        "$name" "$(awk -v k="$PEAK_KB" 'BEGIN {print k / 1024}')" "$metrics_mb" "$secs" "$acc"
}

# compare KIND PEAK_A PEAK_B: the two peaks within 10%? Sets FAILED.
FAILED=0
compare() {
    local kind=$1 a=$2 b=$3
    if awk -v a="$a" -v b="$b" 'BEGIN { lo = a < b ? a : b; hi = a < b ? b : a;
            d = 100 * (hi - lo) / lo; printf "%.2f", d; exit !(d <= 10) }' >"$tmp/diff"; then
        echo "$kind: peaks differ by $(cat "$tmp/diff")% (goal within 10%: met)"
    else
        echo "$kind: peaks differ by $(cat "$tmp/diff")% (goal within 10%: NOT met)"
        FAILED=1
    fi
}

declare -a folders peaks
for n in "${counts[@]}"; do
    d=bench/data/jpeg-$n-200-500
    "$PY" bench/make_images.py "$d" --count "$n" --test-count 200 --min 200 --max 500
    folders+=("$d")
done
for i in 0 1; do
    train_peak "folder, ${counts[i]} JPEGs" --dataset folder --data "${folders[i]}"
    peaks+=("$PEAK_KB")
done
compare "folder" "${peaks[0]}" "${peaks[1]}"

# The shards: `dptrain shards DIR OUT` writes OUT/train-NNNNNN.tar,
# OUT/test-NNNNNN.tar and OUT/classes.txt; --dataset tar --data OUT reads them.
if ! "$bin" shards --help >/dev/null 2>&1; then
    echo "dptrain shards: not built yet: the tar shard runs are SKIPPED"
    [[ $FAILED == 1 ]] && exit 1
    exit 77
fi
peaks=()
for i in 0 1; do
    s=bench/data/shards-${counts[i]}-200-500
    if [[ ! -f $s/classes.txt || $s/classes.txt -ot ${folders[i]}/make_images.json ]]; then
        rm -rf "$s"
        "$bin" shards "${folders[i]}" "$s" >&2
    fi
    train_peak "tar shards, ${counts[i]} JPEGs" --dataset tar --data "$s"
    peaks+=("$PEAK_KB")
done
compare "tar shards" "${peaks[0]}" "${peaks[1]}"
exit "$FAILED"

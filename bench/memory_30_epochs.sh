#!/usr/bin/env bash
# Memory over a long run: 30 epochs of LeNet on all of Fashion-MNIST with a
# checkpoint after every epoch, then the peak and current resident memory
# of epoch 2 against epoch 30 (read from the --metrics JSON lines). A flat
# profile keeps epoch 30 within 5% of epoch 2. tests/train/test_reliability_memory.c
# runs the same check on 4096 samples an epoch.
#
# usage: bench/memory_30_epochs.sh [EPOCHS=30]
#
# Environment:
#   BUILD         build folder (default build)
#   DPTRAIN_ARGS  extra arguments for `dptrain train` (split on spaces)
set -euo pipefail
epochs=${1:-30}
build=${BUILD:-build}
bin=$build/dptrain
[[ -x $bin ]] || { echo "no $bin: build first (cmake -S . -B $build && cmake --build $build)" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# shellcheck disable=SC2086
"$bin" train --model lenet --epochs "$epochs" --checkpoint "$dir/ck.safetensors" \
  --metrics "$dir/m.jsonl" --progress never ${DPTRAIN_ARGS:-}
python3 - "$dir/m.jsonl" "$epochs" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"epoch"')]
last = int(sys.argv[2])
by = {l["epoch"]: l for l in lines}
ok = True
for key in ("peak_rss_mb", "rss_mb"):
    a, b = by[2][key], by[last][key]
    growth = 100.0 * (b - a) / a
    ok &= b <= 1.05 * a
    print(f"{key:12s} epoch 2: {a:8.1f} MB   epoch {last}: {b:8.1f} MB   ({growth:+.2f}%)")
print("flat (within 5%)" if ok else "GROWS by more than 5%")
sys.exit(0 if ok else 1)
PY

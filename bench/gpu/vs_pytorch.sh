#!/usr/bin/env bash
# One epoch of LeNet and of ResNet-18 (batch 256) on Fashion-MNIST on one
# GPU: dptrain against PyTorch on the same GPU; prints sec/epoch of each and
# the ratio dptrain / PyTorch.
#
# usage: bench/gpu/vs_pytorch.sh [DEVICE=cuda:0]
#   BUILD   dptrain's CUDA build directory [build]
#   PY      python with torch built for CUDA [python3]
#   DATA    Fashion-MNIST directory [/usr/share/datasets/fashion-mnist]
# Both sides keep their defaults for TF32: cuDNN convolutions may use it,
# matrix products may not.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${1:-cuda:0}
BUILD=${BUILD:-build}
PY=${PY:-python3}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
BS=256

if [[ ! -x $BUILD/dptrain ]]; then
    echo "error: $BUILD/dptrain not built (cmake -S . -B $BUILD -DDP_CUDA=ON && cmake --build $BUILD)" >&2
    exit 1
fi
if ! "$BUILD/dptrain" devices | grep -q "^  $DEVICE "; then
    echo "error: $BUILD/dptrain does not see $DEVICE:" >&2
    "$BUILD/dptrain" devices >&2
    exit 1
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpu_vs_pytorch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# epoch_seconds of the last epoch in a --metrics file.
epoch_seconds() {
    "$PY" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "epoch_seconds" in l][-1]["epoch_seconds"])' "$1"
}

printf "%-10s %14s %14s %8s\n" model "dptrain s/ep" "PyTorch s/ep" ratio
for model in lenet resnet18; do
    lr=0.2
    [[ $model == resnet18 ]] && lr=0.05
    "$BUILD/dptrain" train --model "$model" --devices "$DEVICE" --batch-size $BS --lr $lr \
        --epochs 1 --data "$DATA" --metrics "$TMP/$model.jsonl" >"$TMP/$model.dp.log" 2>&1 || {
        echo "error: dptrain $model failed:" >&2; cat "$TMP/$model.dp.log" >&2; exit 1; }
    dp=$(epoch_seconds "$TMP/$model.jsonl")
    "$PY" bench/gpu/pytorch_epoch.py --model "$model" --batch-size $BS --lr $lr \
        --device "$DEVICE" --data-dir "$DATA" >"$TMP/$model.pt.log" 2>"$TMP/$model.pt.err" || {
        echo "error: PyTorch $model failed:" >&2; cat "$TMP/$model.pt.err" >&2; exit 1; }
    pt=$(awk '/^SEC_PER_EPOCH/ {print $2}' "$TMP/$model.pt.log")
    printf "%-10s %14.3f %14.3f %8.2f\n" "$model" "$dp" "$pt" "$(echo "$dp / $pt" | bc -l)"
done
"$BUILD/dptrain" devices | sed -n '1,/^cuda\|^cpu/p' | head -5
head -1 "$TMP/resnet18.pt.err"

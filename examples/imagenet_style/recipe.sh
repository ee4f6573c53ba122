#!/usr/bin/env bash
# The ImageNet-style recipe end to end (docs/your-data.md, "An ImageNet-style
# run"): a folder of JPEGs of assorted sizes, torchvision's ResNet-18 from
# ONNX trained on it with --transform imagenet (streamed from disk on
# decoder threads), `dptrain predict` on a photo of another size, `dptrain
# data --grid` to look at what the model sees, then the same set as tar
# shards (`dptrain shards`, --dataset tar).
#
# Usage, from the repository root after `make build`:
#   examples/imagenet_style/recipe.sh [WORKDIR]   (default imagenet_style)
# Environment, with defaults:
#   DPTRAIN=build/dptrain  PYTHON=/usr/bin/python3 (torch, torchvision, PIL)
#   CLASSES=10 TRAIN=20 TEST=4 (images a class) MIN=300 MAX=500 (sides, px)
#   BATCH=16 EPOCHS=1 LIMIT (--limit-train N, left out when unset)
#   SIZE=224: the side the model sees; 224 is --transform imagenet, another
#     spells out the same transforms at that side (the test-transform's
#     resize SIZE*256/224) with ImageNet's mean and std, for quick checks
#   PRECISION: bf16 where the CPU has avx512_bf16 or amx_bf16, else fp32
# Each command is printed before it runs, as the docs show it (build/dptrain,
# python3 and the scripts by their paths from the repository root).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
onnx=$(cd "$here/../onnx" && pwd)
dptrain=$(realpath "${DPTRAIN:-build/dptrain}")
py=${PYTHON:-/usr/bin/python3}
w=${1:-imagenet_style}
classes=${CLASSES:-10}
if [[ -z ${PRECISION:-} ]]; then
  if grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then PRECISION=bf16; else PRECISION=fp32; fi
fi

# Prints a command as the docs show it, then runs it.
run() {
  local shown=("$@")
  [[ ${shown[0]} == "$dptrain" ]] && shown[0]=build/dptrain
  if [[ ${shown[0]} == "$py" ]]; then
    shown[0]=python3
    shown[1]=${shown[1]/#$here/examples/imagenet_style}
    shown[1]=${shown[1]/#$onnx/examples/onnx}
  fi
  echo "\$ ${shown[*]}"
  "$@"
}

mkdir -p "$w"
run "$py" "$here/make_images.py" "$w/photos" --classes "$classes" --train "${TRAIN:-20}" \
  --test "${TEST:-4}" --min "${MIN:-300}" --max "${MAX:-500}" --photo "$w/new_photo.jpg"
# torchvision's resnet18(num_classes=10), random weights, for 3x224x224
run "$py" "$onnx/resnet18.py" "$w/resnet18.onnx" --classes "$classes" ${SIZE:+--size "$SIZE"}

size=${SIZE:-224}
transforms=(--transform imagenet)
if [[ $size != 224 ]]; then
  transforms=(--train-transform "random-resized-crop:$size,flip"
              --test-transform "resize:$((size * 256 / 224)),center-crop:$size"
              --normalize 0.485,0.456,0.406,0.229,0.224,0.225)
fi
train=(--model "$w/resnet18.onnx" "${transforms[@]}" --precision "$PRECISION"
       --batch-size "${BATCH:-16}" --epochs "${EPOCHS:-1}")
[[ -n ${LIMIT:-} ]] && train+=(--limit-train "$LIMIT")

# What the model sees: the first 16 training samples of epoch 0.
run "$dptrain" data --dataset folder --data "$w/photos" "${transforms[@]}" --count 16 --grid "$w/grid.png"
# Streamed from disk (a folder's default), one decoder thread per core.
run "$dptrain" train --dataset folder --data "$w/photos" "${train[@]}" --verbose --checkpoint "$w/ck.safetensors"
# The checkpoint's test transform (resize:256,center-crop:224) on a 640x480 photo.
run "$dptrain" predict --checkpoint "$w/ck.safetensors" --model "$w/resnet18.onnx" --topk 3 "$w/new_photo.jpg"

# The same images as tar shards (WebDataset's layout), 64 samples a shard.
run "$dptrain" shards "$w/photos" "$w/shards" --shard-size 64
run "$dptrain" train --dataset tar --data "$w/shards" "${train[@]}" --verbose --checkpoint "$w/ck_tar.safetensors"
run "$dptrain" predict --checkpoint "$w/ck_tar.safetensors" --model "$w/resnet18.onnx" --topk 3 "$w/new_photo.jpg"

#!/usr/bin/env bash
# `dptrain model` prints a model's layers and totals: the parameter counts
# are PyTorch's sum(p.numel() for p in net.parameters()) for the same
# networks (the seed's LeNet 129,068; d2l's LeNet file 61,706; d2l's
# resnet18 11,175,818 with 1 input channel and 11,176,970 with 3, as
# tests/util/pytorch_compat.py's resnet18 counts them), and bad input gets one
# line on stderr and exit status 2.
# Usage: cli_model.sh path/to/dptrain
set -u
bin=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0

ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() {
  fails=$((fails + 1)); echo "FAIL $1"
  sed 's/^/     /' "$dir/out" "$dir/err"
}

# expect_total NAME ARGS... -- COUNT
expect_total() {
  local want=${*: -1} name=$1
  set -- "${@:2:$#-2}"
  if "$bin" model "$@" >"$dir/out" 2>"$dir/err" &&
     grep -qx "total parameters: $want" "$dir/out"; then
    ok "$name: $want parameters"
  else
    fail "$name: $want parameters"
  fi
}

expect_total "seed's lenet" lenet 129,068
expect_total "d2l lenet file" "$root/examples/models/d2l_lenet.txt" 61,706
expect_total "resnet18, 1 channel" resnet18 11,175,818
expect_total "resnet18, 3 channels" resnet18 --input 3x32x32 11,176,970

# The rows: one per op, the output shape of one sample, params summing to
# the total (checked above), FLOPs of the first convolution 2*6*25*28*28.
"$bin" model "$root/examples/models/d2l_lenet.txt" >"$dir/out" 2>"$dir/err"
if grep -Eq '^0 +conv2d +\[1, 6, 28, 28\] +156 +235,200$' "$dir/out" &&
   grep -Eq '^11 +linear +\[1, 10\] +850 +1,680$' "$dir/out"; then
  ok "d2l lenet rows: shapes, params and FLOPs"
else
  fail "d2l lenet rows: shapes, params and FLOPs"
fi

# expect_error NAME PATTERN ARGS...: exit 2 (usage) or 1, one line naming it.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  "$bin" model "$@" >"$dir/out" 2>"$dir/err"
  local rc=$?
  if [[ $rc -ne 0 && $(wc -l <"$dir/err") -eq 1 ]] && grep -q -- "$pattern" "$dir/err"; then
    ok "$name"
  else
    echo "     exit $rc"
    fail "$name"
  fi
}

# An ONNX model without --input is summarised on the samples its graph
# declares: conv-bn-gemm (the onnx fuzz target's seed, written with
# onnx.helper) takes 1x4x4 and holds 51 parameters (Conv 2x1x3x3 + 2,
# BatchNormalization 2 + 2, Gemm 8x3 + 3); other samples are refused.
cp "$root/tests/fuzz/corpus/onnx/conv-bn-gemm" "$dir/cbg.onnx"
if "$bin" model "$dir/cbg.onnx" >"$dir/out" 2>"$dir/err" &&
   [[ $(head -n 1 "$dir/out") == "$dir/cbg.onnx on 1x4x4 inputs" ]] &&
   grep -qx "total parameters: 51" "$dir/out"; then
  ok "an ONNX model on the 1x4x4 samples it declares: 51 parameters"
else
  fail "an ONNX model on the 1x4x4 samples it declares: 51 parameters"
fi
expect_total "an ONNX model, --input as declared" "$dir/cbg.onnx" --input 1x4x4 51

printf 'Conv2d(1, 6, kernel_size=5)\nFlatten()\nLinear(400, 10)\n' >"$dir/bad.txt"
expect_error "unknown model" "unknown model" nosuchmodel
expect_error "a model path that is not there says why" \
  "nosuch/net.onnx: cannot read the model file: No such file or directory" nosuch/net.onnx
expect_error "bad --input" "--input 3x32: expected CxHxW" lenet --input 3x32
expect_error "lenet too small" "at least 1x14x14" lenet --input 1x8x8
expect_error "shape mismatch names file and line" \
  "bad.txt: line 3: Linear(400, 10) expects 400 inputs, the layer before gives 3456" "$dir/bad.txt"
expect_error "unknown option" "unknown option '--bogus'" lenet --bogus
expect_error "an ONNX model on other samples" \
  "cbg.onnx: the graph takes 1x4x4 inputs, the data are 3x4x4" "$dir/cbg.onnx" --input 3x4x4

# --pipeline: LeNet's second convolution is 90% of its FLOPs, so 2 stages
# split right before it; ResNet-18's 4 stages start at residual blocks and
# carry 24-28% of the FLOPs each; 1F1B keeps K - k micro-batches alive.
"$bin" model lenet --pipeline 2 --micro-batches 4 >"$dir/out" 2>"$dir/err"
if grep -qx 'stage 0: layers 0-1, 200 parameters, 246,740 FLOPs (5.5%)' "$dir/out" &&
   grep -qx 'stage 1: layers 2-7, 128,868 parameters, 4,259,088 FLOPs (94.5%)' "$dir/out" &&
   grep -q '^4 micro-batches, 1f1b: .*(equal stages: 0.200); .* at most: 2 1$' "$dir/out"; then
  ok "lenet in 2 stages by FLOPs"
else
  fail "lenet in 2 stages by FLOPs"
fi
"$bin" model resnet18 --input 3x32x32 --pipeline 4 --micro-batches 8 --schedule gpipe \
  >"$dir/out" 2>"$dir/err"
starts=$(awk 'BEGIN { last = "none" } $NF ~ /^[0-9]+$/ && $(NF-1) ~ /^(yes|no)$/ {
  if ($NF != last) { print $1 ":" $(NF-1) } last = $NF }' "$dir/out" | tr '\n' ' ')
if [[ $starts == "0:yes 13:yes 26:yes 39:yes " ]] &&
   [[ $(grep -c '^stage [0-3]: layers .* FLOPs (2[4-8]\.[0-9]%)$' "$dir/out") -eq 4 ]] &&
   grep -q '^8 micro-batches, gpipe: .*(equal stages: 0.273); .* at most: 8 8 8 8$' "$dir/out"; then
  ok "resnet18 in 4 stages, each starting at a block: $starts"
else
  fail "resnet18 in 4 stages, each starting at a block: $starts"
fi
expect_error "a stage list that skips a layer" \
  "^dptrain: error: --stages 0-3,5-7: layer 4 is in no stage$" lenet --stages 0-3,5-7
expect_error "a stage list that repeats a layer" \
  "^dptrain: error: --stages 0-3,3-7: layer 3 is in two stages$" lenet --stages 0-3,3-7
expect_error "a stage inside a residual block" \
  "--stages 0-4,5-55: layer 5 cannot start a stage (it is inside a residual block" resnet18 --stages 0-4,5-55
expect_error "a stage at LeNet's first pool, which runs with its convolution" \
  "--stages 0-0,1-7: layer 1 cannot start a stage (it is inside a residual block, or runs in one kernel with the layer before it" \
  lenet --stages 0-0,1-7
expect_error "more stages than layers" \
  "^dptrain: error: --pipeline 9: the model has 7 layers where a stage may start$" \
  lenet --pipeline 9
expect_error "--pipeline and --stages disagree" \
  "--pipeline 3 and --stages 0-3,4-7 (2 stages) disagree" lenet --pipeline 3 --stages 0-3,4-7
expect_error "bad --schedule" "--schedule fast: expected 1f1b or gpipe" lenet --schedule fast
expect_error "--micro-batches without stages" "--micro-batches and --schedule need --pipeline K" \
  lenet --micro-batches 4

# A model file under a long path: train with a checkpoint, resume, evaluate
# (the checkpoint keeps the whole path as the model's name; eval is given
# the file, as a checkpoint never chooses which file is read).
long="$dir/a-directory-with-a-rather-long-name/and-another-one-below-it"
mkdir -p "$long" && cp "$root/examples/models/d2l_lenet.txt" "$long/lenet.txt"
if "$bin" train --model "$long/lenet.txt" --epochs 1 --batch-size 64 --limit-train 256 \
     --limit-test 64 --checkpoint "$dir/long.safetensors" >"$dir/out" 2>"$dir/err" &&
   "$bin" train --model "$long/lenet.txt" --epochs 2 --batch-size 64 --limit-train 256 \
     --limit-test 64 --checkpoint "$dir/long.safetensors" --resume "$dir/long.safetensors" \
     >"$dir/out" 2>"$dir/err" &&
   "$bin" eval --checkpoint "$dir/long.safetensors" --model "$long/lenet.txt" --limit-test 64 \
     >"$dir/out" 2>"$dir/err" &&
   grep -Eq '^test acc: [0-9.]+$' "$dir/out"; then
  ok "a model file under a long path trains, resumes and evaluates"
else
  fail "a model file under a long path trains, resumes and evaluates"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

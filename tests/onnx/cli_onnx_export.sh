#!/usr/bin/env bash
# `dptrain export` of the built-in resnet18 and of an nn.Sequential file
# holding every module dptrain reads, each trained for a few steps: the
# file loads back (`dptrain model FILE.onnx` counts the model's
# parameters), and onnx.checker.check_model (full_check, with shape
# inference) accepts it. Without onnx in /usr/bin/python3 the checker's
# part is skipped, visibly (exit 77), after the rest has run; under
# DP_REQUIRE_TORCH=1 (make test-interop, which installs python3-onnx) it fails.
# Usage: cli_onnx_export.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0; skipped=0

ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() {
  fails=$((fails + 1)); echo "FAIL $1"
  sed 's/^/     /' "$dir/out" "$dir/err"
}

cat >"$dir/every.txt" <<'MODEL'
Conv2d(1, 8, 3, padding=1)
BatchNorm2d(8)
PReLU(8)
Conv2d(8, 8, 3, groups=4, dilation=2, padding='same')
ReLU6()
MaxPool2d(3, 2, ceil_mode=True)
Conv2d(8, 8, (3, 1), padding=(1, 0), bias=False)
Hardswish()
AvgPool2d(2, ceil_mode=True, count_include_pad=False)
ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1)
ELU()
AvgPool2d(3, stride=1, padding=1)
Conv2d(4, 8, 3, stride=2)
SELU()
Hardsigmoid()
LeakyReLU(0.1)
GELU()
SiLU()
Sigmoid()
Tanh()
Softmax(dim=1)
AdaptiveAvgPool2d(1)
Flatten()
Linear(8, 16)
BatchNorm1d(16)
PReLU()
Dropout(0.2)
ReLU()
Linear(16, 10)
LogSoftmax(dim=1)
MODEL

have_onnx=0
/usr/bin/python3 -c 'import onnx' 2>/dev/null && have_onnx=1

# export_case NAME MODEL PARAMS: train, export, load back, check.
export_case() {
  local name=$1 model=$2 params=$3
  if "$bin" train --model "$model" --epochs 1 --batch-size 16 --limit-train 32 \
       --limit-test 16 --checkpoint "$dir/$name.safetensors" >"$dir/out" 2>"$dir/err" &&
     "$bin" export --checkpoint "$dir/$name.safetensors" --model "$model" \
       --onnx "$dir/$name.onnx" >"$dir/out" 2>"$dir/err" &&
     "$bin" model "$dir/$name.onnx" >"$dir/out" 2>"$dir/err" &&
     grep -qx "total parameters: $params" "$dir/out"; then
    ok "$name: exported, and loads back with its $params parameters"
  else
    fail "$name: exported, and loads back with its $params parameters"
    return
  fi
  if [[ $have_onnx -eq 0 && ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    fail "$name: onnx.checker (no onnx in /usr/bin/python3, and DP_REQUIRE_TORCH=1 (make test-interop) needs it)"
    return
  elif [[ $have_onnx -eq 0 ]]; then
    skipped=$((skipped + 1)); echo "skip $name: onnx.checker (no onnx in /usr/bin/python3)"
    return
  fi
  if /usr/bin/python3 -c 'import onnx, sys
m = onnx.load(sys.argv[1])
onnx.checker.check_model(m, full_check=True)
print("opset", m.opset_import[0].version, len(m.graph.node), "nodes")' "$dir/$name.onnx" \
       >"$dir/out" 2>"$dir/err"; then
    ok "$name: onnx.checker accepts it ($(cat "$dir/out"))"
  else
    fail "$name: onnx.checker accepts it"
  fi
}

export_case resnet18 resnet18 11,175,818
export_case every "$dir/every.txt" 1,383

echo "$passes passed, $fails failed, $skipped skipped"
[[ $fails -eq 0 ]] || exit 1
[[ $skipped -eq 0 ]] || exit 77

#!/usr/bin/env bash
# torchvision's ResNet-18, MobileNetV2, SqueezeNet 1.1 and a DenseNet-style
# net, exported by torch.onnx.export, run and trained by dptrain as PyTorch
# runs and trains them (forward in eval and training mode, 5 SGD steps,
# the checkpoint back in the torchvision module), and dptrain's own ONNX
# exports (LeNet, nn.Sequential files, the imported MobileNetV2) run in
# ONNX Runtime with dptrain eval's accuracy: tests/onnx/onnx_torchvision.py.
#
# PyTorch is Debian's /usr/bin/python3 (python3-torch, python3-torchvision,
# python3-onnx): without them a skip (77), unless DP_REQUIRE_TORCH=1 (make
# test-interop), which makes it a failure. ONNX Runtime is PyPI's
# onnxruntime (with numpy) in BUILD/onnxruntime-venv, which only
# DP_REQUIRE_TORCH=1 makes: without it the PyTorch checks run and the run
# ends in a skip (77) that names the ONNX Runtime checks left out.
# BUILD/tests/onnx_forward (built with the tests) gives dptrain's
# training-mode outputs.
# Usage: cli_onnx_torchvision.sh path/to/dptrain
set -u
bin=$1
build=${DP_BUILD_DIR:-$(cd "$(dirname "$bin")" && pwd)}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=/usr/bin/python3
if ! "$PY" -c 'import torch, torchvision, onnx' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import torch, torchvision and onnx, and DP_REQUIRE_TORCH=1 (make test-interop) needs them"
    exit 1
  fi
  echo "SKIP cli_onnx_torchvision: $PY lacks torch, torchvision or onnx (make test-interop installs python3-torch, python3-torchvision and python3-onnx)"
  exit 77
fi
forward=$build/tests/onnx_forward
if [[ ! -x $forward ]]; then
  echo "FAIL: no $forward (cmake --build $build builds it with the tests)"
  exit 1
fi
venv=$build/onnxruntime-venv
ort=()
if "$venv/bin/python" -c 'import onnxruntime, numpy' >/dev/null 2>&1; then
  ort=(--ort-python "$venv/bin/python")
elif [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
  rm -rf "$venv"
  if ! "$PY" -m venv "$venv" || ! "$venv/bin/pip" install -q onnxruntime numpy; then
    echo "FAIL: could not make $venv ($PY -m venv; pip install onnxruntime numpy)"
    exit 1
  fi
  ort=(--ort-python "$venv/bin/python")
fi
# One OpenBLAS thread under PyTorch's own (bench/pytorch_anchor.sh).
source "$here/../../bench/pytorch_anchor.sh"
pytorch_openblas_env
exec "$PY" "$here/onnx_torchvision.py" --dptrain "$bin" --forward "$forward" "${ort[@]}"

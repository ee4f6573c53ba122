#!/usr/bin/env bash
# Batch norm's first gradients against PyTorch's in float64
# (tests/device/cpu/bn_float64.py). Without torch a skip (77), unless DP_REQUIRE_TORCH=1
# (make test-interop, which installs python3-torch).
# Usage: cli_bn_float64.sh path/to/dptrain
set -u
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import torch, and DP_REQUIRE_TORCH=1 (make test-interop) needs it"
    exit 1
  fi
  echo "SKIP cli_bn_float64: python3-torch is not installed (make test-interop installs it)"
  exit 77
fi
if [[ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  echo "SKIP cli_bn_float64: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PY" "$(dirname "${BASH_SOURCE[0]}")/bn_float64.py" "$1" "$work"

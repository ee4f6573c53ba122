#!/usr/bin/env bash
# dptrain's optimizers, schedules, clipping and label smoothing against
# torch.optim step by step (tests/optim/pytorch_recipe.py): six recipes, twenty
# steps each, every loss within 1e-4 and every learning rate within 1e-7.
# Without torch a skip (77), unless DP_REQUIRE_TORCH=1 (make test-interop).
# Usage: cli_pytorch_recipe.sh path/to/dptrain
set -u
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import torch, and DP_REQUIRE_TORCH=1 (make test-interop) needs it"
    exit 1
  fi
  echo "SKIP cli_pytorch_recipe: python3-torch is not installed (make test-interop installs it)"
  exit 77
fi
source "$(dirname "${BASH_SOURCE[0]}")/../../bench/pytorch_anchor.sh"
pytorch_openblas_env
exec "$PY" "$(dirname "${BASH_SOURCE[0]}")/pytorch_recipe.py" "$1"

#!/usr/bin/env bash
# dptrain's --tensorboard files read by TensorBoard's own EventAccumulator
# (tests/train/tensorboard_check.py): every scalar at every step, once, as the
# --metrics file says; 2 devices, 2 ranks, a run killed with SIGKILL (read
# while it trained, and after) and resumed, a run stopped by SIGTERM and
# resumed. PyPI's tensorboard lives in a venv under the build folder
# (BUILD/tensorboard-venv; no TensorFlow needed): without it a skip (77),
# unless DP_REQUIRE_TORCH=1 (make test-interop), which makes it.
# Usage: cli_tensorboard.sh path/to/dptrain
set -u
bin=$1
build=${DP_BUILD_DIR:-$(cd "$(dirname "$bin")" && pwd)}
venv=$build/tensorboard-venv
if ! "$venv/bin/python" -c 'import tensorboard' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} != 1 ]]; then
    echo "SKIP cli_tensorboard: no $venv with PyPI's tensorboard (make test-interop makes it)"
    exit 77
  fi
  rm -rf "$venv"
  if ! python3 -m venv "$venv" || ! "$venv/bin/pip" install -q tensorboard; then
    echo "FAIL: could not make $venv (python3 -m venv; pip install tensorboard)"
    exit 1
  fi
fi
"$venv/bin/python" -c 'import tensorboard; print("tensorboard", tensorboard.__version__)'
exec "$venv/bin/python" "$(dirname "${BASH_SOURCE[0]}")/tensorboard_check.py" "$bin"

#!/usr/bin/env bash
# dptrain's --augment and --normalize against torchvision's functional
# pad, crop, hflip and normalize at the same draws, on real images
# (tests/data/augment_torchvision.py, which loads libdptrain next to dptrain).
# Without torchvision a skip (77), unless DP_REQUIRE_TORCH=1 (make
# test-interop, which installs python3-torchvision).
# Usage: cli_augment_torchvision.sh path/to/dptrain
set -u
PY=/usr/bin/python3
if ! "$PY" -c 'import torchvision' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import torchvision, and DP_REQUIRE_TORCH=1 (make test-interop) needs it"
    exit 1
  fi
  echo "SKIP cli_augment_torchvision: python3-torchvision is not installed (make test-interop installs it)"
  exit 77
fi
if [[ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  echo "SKIP cli_augment_torchvision: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  exit 77
fi
lib=$(dirname "$1")/libdptrain.so
if [[ ! -f $lib ]]; then
  echo "FAIL: $lib is missing (the shared library is built next to dptrain)"
  exit 1
fi
# A sanitizer build's library needs its runtime loaded first, before
# Python's own libraries; Python's allocations are not the library's leaks.
runtimes=$(ldd "$lib" | awk '/lib(asan|ubsan|tsan)\.so/ { print $3 }' | tr '\n' ' ')
if [[ -n ${runtimes// /} ]]; then
  export LD_PRELOAD="$runtimes${LD_PRELOAD:+ $LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
exec "$PY" "$(dirname "${BASH_SOURCE[0]}")/augment_torchvision.py" "$lib"

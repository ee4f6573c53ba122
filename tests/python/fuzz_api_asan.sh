#!/usr/bin/env bash
# fuzz_api.py for SECONDS (default 60) with _dptrain and the library built
# with AddressSanitizer, loaded into an uninstrumented CPython: libasan is
# preloaded (it must come first), CPython's own allocator is replaced by
# malloc (PYTHONMALLOC=malloc) so that ASan sees every object's memory, and
# leak detection is off (CPython does not free everything at exit, which is
# not ours to report). Any ASan report, or a crash, fails the run; ASan
# aborts (abort_on_error) so that faulthandler prints the Python stack of
# the call that hit it, and fuzz_api.py's seed replays the same calls.
#
# Usage: [FUZZ_SEED=S] [FUZZ_ARGS="--skip optimizer"] fuzz_api_asan.sh [SECONDS] [BUILD_DIR]
# BUILD_DIR (default build-pyasan) is configured with DP_SANITIZE=address
# when it has no CMakeCache.txt, and its target _dptrain built (make
# test-asan passes build-asan, built with address;undefined). PYTHON
# (default the first of build/py-venv's, Debian's python3) must import
# numpy.
set -euo pipefail
seconds=${1:-60}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${2:-$src/build-pyasan}
if [[ -z ${PYTHON:-} ]]; then
  for PYTHON in "$src/build/py-venv/bin/python" /usr/bin/python3 python3; do
    "$PYTHON" -c 'import numpy' 2>/dev/null && break
  done
fi
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDP_SANITIZE=address \
    -DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$(command -v "$PYTHON")" >/dev/null
fi
cmake --build "$build" --target _dptrain -j "${JOBS:-2}" >/dev/null
libasan=$(gcc -print-file-name=libasan.so)
[[ -f $libasan ]] || { echo "FAIL: no libasan.so ($libasan)"; exit 1; }
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
set +e
LD_PRELOAD=$libasan PYTHONMALLOC=malloc DPTRAIN_DEVICES=2 \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:log_path=$log/asan \
  PYTHONPATH="$build/python:$src/python" "$PYTHON" "$src/tests/python/fuzz_api.py" "$seconds" \
  ${FUZZ_SEED:+--seed "$FUZZ_SEED"} ${FUZZ_ARGS:-}
rc=$?
set -e
if compgen -G "$log/asan*" >/dev/null; then
  cat "$log"/asan*
  echo "FAIL: AddressSanitizer reported the above (fuzz_api.py exited $rc)"
  exit 1
fi
if [[ $rc -ne 0 ]]; then
  echo "FAIL: fuzz_api.py exited $rc under ASan"
  exit 1
fi
echo "PASS: fuzz_api.py ran $seconds s under AddressSanitizer with no report"

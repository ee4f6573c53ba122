#!/usr/bin/env bash
# One line naming every test that CTest skipped in the given build
# directories, with the reason the test gave, for the end of `make test`:
#   skipped: test_cuda_ops (no CUDA GPU here (cudaGetDeviceCount = 0)) in build, build-asan; ...
# A test that skips prints "SKIP <what>: <reason>" (tests/util/testutil.h's
# tu_skip, or the cli_*.sh scripts) and exits 77, which CTest reports as
# skipped; so a test is listed when its output in the last ctest run holds
# such a line and it did not fail.
# Usage: scripts/skipped-tests.sh BUILD_DIR...
set -euo pipefail
for dir in "$@"; do
  log=$dir/Testing/Temporary/LastTest.log
  [[ -f $log ]] || continue
  failed=$dir/Testing/Temporary/LastTestsFailed.log
  awk -v build="${dir%/}" -v failed_log="$failed" '
    BEGIN { while ((getline line < failed_log) > 0) { sub(/^[0-9]+:/, "", line); failed[line] = 1 } }
    /^[0-9]+\/[0-9]+ Test: / { name = $3 }
    /^SKIP [^:]*: / && !(name in failed) { print name "\t" build "\t" substr($0, index($0, ": ") + 2) }
  ' "$log"
done | sort -u | awk -F'\t' '
  { key = $1 " (" $3 ")"; if (!(key in builds)) { order[++n] = key; builds[key] = $2 }
    else if (index(", " builds[key] ", ", ", " $2 ", ") == 0) builds[key] = builds[key] ", " $2 }
  END {
    if (n == 0) { print "skipped: none"; exit }
    line = "skipped:"
    for (i = 1; i <= n; i++) line = line (i > 1 ? ";" : "") " " order[i] " in " builds[order[i]]
    print line
  }'

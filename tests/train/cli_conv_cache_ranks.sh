#!/usr/bin/env bash
# The convolution kernels' cache under mpirun: rank 0 reads it and adds to
# it, the other ranks run rank 0's table (its broadcast), so
#   - the same 2-rank command run twice against one cache gives the same
#     tensors, and the second run's rank 0 measures nothing;
#   - a cache whose every choice is gemm makes rank 1 run gemm too (its
#     --verbose table, "by rank 0").
# Skipped (exit 77) in a build without MPI or without mpirun.
# Usage: cli_conv_cache_ranks.sh path/to/dptrain
set -u
bin=$1
if "$bin" --version | grep -q '^multi-process (MPI): off'; then
  echo "SKIP cli_conv_cache_ranks: this build has no MPI (install libopenmpi-dev and rebuild)"
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "SKIP cli_conv_cache_ranks: no mpirun on PATH (apt-get install openmpi-bin)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); echo "ok   $*"; }
bad() { fails=$((fails + 1)); echo "FAIL $*"; }

source "$(dirname "${BASH_SOURCE[0]}")/../tools/tiny_idx_set.sh"
tiny_idx_set "$dir/data"
unset DPTRAIN_CONV_ALGO_CACHE
cache=$dir/cache/conv-algos.txt
train=(mpirun -np 2 "$bin" train --model lenet --dataset mnist --data "$dir/data" --devices 1
       --batch-size 4 --epochs 1 --limit-train 8 --seed 3 --no-shuffle --conv-algo auto
       --conv-algo-cache "$cache" --progress never --verbose)
measured() { sed -n 's/.*convolution kernels: \([0-9]*\) passes measured.*/\1/p' "$1"; }
tensors() {
  local n
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1" | sha256sum | cut -d' ' -f1
}

"${train[@]}" --checkpoint "$dir/a.st" >"$dir/a.log" 2>&1; ra=$?
"${train[@]}" --checkpoint "$dir/b.st" >"$dir/b.log" 2>&1; rb=$?
ma=$(measured "$dir/a.log"); mb=$(measured "$dir/b.log")
# rank 0 alone says how many it measured: one line a run
if [[ $ra -eq 0 && $rb -eq 0 && ${ma:-0} -gt 0 && $mb == 0 && -s $cache &&
      $(grep -c 'passes measured' "$dir/b.log") == 1 &&
      $(tensors "$dir/a.st") == $(tensors "$dir/b.st") ]]; then
  ok "2 ranks twice: rank 0 measured $ma then $mb passes, the same tensors"
else
  bad "2 ranks: exit $ra/$rb, measured '$ma'/'$mb': $(tail -3 "$dir/b.log")"
fi

sed -i '/^[^#[]/s/=[a-z]*/=gemm/g' "$cache"
"${train[@]}" >"$dir/c.log" 2>&1; rc=$?
# the table rank 1 ran, as its --verbose lists it
# ("dptrain: rank 1 on HOST:   f32 ...: forward=gemm ...")
table=$(grep -E 'rank 1 on [^:]*:   (f32|bf16) ' "$dir/c.log" | sed 's/.*: //' | grep -o '=[a-z]*' |
        sort -u)
if [[ $rc -eq 0 && $table == "=gemm" ]] && grep -q 'rank 1 on .*by rank 0' "$dir/c.log"; then
  ok "a gemm cache read by rank 0: every rank ran gemm"
else
  bad "gemm cache under mpirun: exit $rc, kernels '$table': $(tail -3 "$dir/c.log")"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

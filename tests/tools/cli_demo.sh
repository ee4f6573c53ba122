#!/usr/bin/env bash
# The seeds' demos: PyTorch's DataParallel tutorial transcripts for 2, 3 and
# 8 devices (the chunk sizes its notebook shows), the allreduce check and
# the async engine.
# Usage: cli_demo.sh path/to/dptrain
set -u
bin=$1
fails=0; passes=0
check() { # check NAME EXPECTED ACTUAL
  if [[ "$2" == "$3" ]]; then passes=$((passes + 1)); echo "ok   $1"; else
    fails=$((fails + 1)); echo "FAIL $1"; diff <(echo "$2") <(echo "$3") | sed 's/^/     /'; fi
}

# transcript K SIZES...: "Let's use K devices!", then for each batch (30, 30,
# 30, 10) the replicas' chunk sizes, then the batch's "Outside" line.
transcript() {
  local k=$1; shift
  echo "Let's use $k devices!"
  local batch
  for batch in 30 30 30 10; do
    local sizes=$1; shift
    for s in ${sizes//,/ }; do
      printf '\tIn Model: input size [%s, 5] output size [%s, 2]\n' "$s" "$s"
    done
    echo "Outside: input size [$batch, 5] output_size [$batch, 2]"
  done
}
check "tutorial, 2 devices" "$(transcript 2 15,15 15,15 15,15 5,5)" \
  "$("$bin" demo dataparallel --devices 2)"
check "tutorial, 3 devices" "$(transcript 3 10,10,10 10,10,10 10,10,10 4,4,2)" \
  "$("$bin" demo dataparallel --devices 3)"
check "tutorial, 8 devices" \
  "$(transcript 8 4,4,4,4,4,4,4,2 4,4,4,4,4,4,4,2 4,4,4,4,4,4,4,2 2,2,2,2,2)" \
  "$("$bin" demo dataparallel --devices 8)"

for algo in ring naive; do
  out=$("$bin" demo allreduce --devices 3 --allreduce $algo)
  check "allreduce $algo: every device holds 1 + 2 + 3" \
    "$(printf ' [[6, 6]] on cpu:0\n [[6, 6]] on cpu:1\n [[6, 6]] on cpu:2')" \
    "$(sed -n '/^after allreduce/,/^input/p' <<<"$out" | grep ' on cpu')"
  check "allreduce $algo: scatter of arange(20).reshape(4, 5) over 3 devices is 2 + 2 rows" \
    "$(printf ' [[0, 1, 2, 3, 4]\n  [5, 6, 7, 8, 9]] on cpu:0\n [[10, 11, 12, 13, 14]\n  [15, 16, 17, 18, 19]] on cpu:1')" \
    "$(sed -n '/^output:/,$p' <<<"$out" | tail -n +2)"
done

out=$("$bin" demo async --ops 2000)
check "async: both timings and the result" "y = [[4002, 4002]] after 4001 additions" \
  "$(grep '^y = ' <<<"$out")"
if grep -q '^synchronous .* sec$' <<<"$out" && grep -q '^asynchronous .* sec (front end' <<<"$out"; then
  passes=$((passes + 1)); echo "ok   async prints both timings"
else fails=$((fails + 1)); echo "FAIL async output:"; echo "$out"; fi

# floats FILE: a safetensors file's data, one float a line (past the 8-byte
# header length and the JSON header; the demo writes float32 tensors only,
# in the same order every run).
floats() {
  local n
  n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1" | od -An -v -tf4 -w4 | tr -d ' '
}
# rel_diff A B: max |a - b| / max |b| over every weight of two checkpoints;
# "inf" where a value is not finite or the counts differ (tests/util/compare.py).
compare=$(dirname "${BASH_SOURCE[0]}")/../util/compare.py
rel_diff() {
  python3 "$compare" max-rel-diff <(floats "$1") <(floats "$2")
}

# The seed's from-scratch step on 1, 2 and 3 devices ends at the same
# weights, all 129068 compared (to float rounding: the devices' sums are
# added in another order, 4e-6 of the largest weight measured), and they
# moved: steps 2 to 10 change them by a third of the largest (0.34).
if [[ -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
  tmp=$(mktemp -d)
  "$bin" demo scratch --devices 1 --steps 1 --checkpoint "$tmp/step1.safetensors" >/dev/null
  "$bin" demo scratch --devices 1 --steps 10 --checkpoint "$tmp/ref.safetensors" >/dev/null
  moved=$(rel_diff "$tmp/ref.safetensors" "$tmp/step1.safetensors")
  if python3 "$compare" more-than "$moved" 1e-2; then
    passes=$((passes + 1)); echo "ok   scratch: steps 2-10 moved the weights by $moved of the largest"
  else fails=$((fails + 1)); echo "FAIL scratch: steps 2-10 moved the weights by $moved"; fi
  for run in "2 naive" "2 ring" "3 naive" "3 ring"; do
    set -- $run
    rm -f "$tmp/got.safetensors"
    "$bin" demo scratch --devices "$1" --allreduce "$2" --steps 10 \
      --checkpoint "$tmp/got.safetensors" >/dev/null
    d=$(rel_diff "$tmp/got.safetensors" "$tmp/ref.safetensors")
    if python3 "$compare" at-most "$d" 1e-5; then
      passes=$((passes + 1)); echo "ok   scratch on $1 devices ($2): every weight within $d of the largest of 1 device's"
    else fails=$((fails + 1)); echo "FAIL scratch on $1 devices ($2): weights $d (of the largest) from 1 device's"; fi
  done
  rm -rf "$tmp"
else
  echo "SKIP scratch: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  skipped=1
fi

"$bin" demo nope >/dev/null 2>"${TMPDIR:-/tmp}/demo_err.$$"; rc=$?
check "unknown demo exits 2 with one line" "2 1" "$rc $(wc -l <"${TMPDIR:-/tmp}/demo_err.$$")"
rm -f "${TMPDIR:-/tmp}/demo_err.$$"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]] || exit 1
# A skipped part makes the whole script a skip for CTest (exit 77).
[[ ${skipped:-0} -eq 0 ]] || exit 77

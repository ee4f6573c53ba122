#!/usr/bin/env bash
# `dptrain train --pipeline` and `dptrain demo pipeline`: each bad
# combination is one line on stderr and a non-zero exit; a pipelined run
# prints its stages and writes bubble_fraction into its metrics; the demo
# prints a timeline with a row per device and draws its Gantt chart.
# Usage: cli_pipeline.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0; skips=0

ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() {
  fails=$((fails + 1)); echo "FAIL $1"
  sed 's/^/     /' "$dir/out" "$dir/err"
}

# expect_error NAME STATUS PATTERN -- COMMAND...: exit STATUS, one line on
# stderr matching PATTERN, nothing on stdout.
expect_error() {
  local name=$1 status=$2 pattern=$3; shift 4
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$? lines
  lines=$(wc -l <"$dir/err")
  if [[ $rc -eq $status && $lines -eq 1 && ! -s "$dir/out" ]] && grep -Eq -- "$pattern" "$dir/err"
  then
    ok "$name: exit $rc: $(cat "$dir/err")"
  else
    fails=$((fails + 1)); echo "FAIL $name: exit $rc, $lines stderr lines, expected /$pattern/"
    sed 's/^/     /' "$dir/err" "$dir/out"
  fi
}

# Flags alone: refused before any data is read.
expect_error "micro-batches without pipeline" 2 "--micro-batches and --schedule need --pipeline" \
  -- "$bin" train --micro-batches 4
expect_error "pipeline of 0" 2 "--pipeline 0: expected an integer from 1" \
  -- "$bin" train --pipeline 0
expect_error "unknown schedule" 2 "--schedule zigzag: expected 1f1b or gpipe" \
  -- "$bin" train --pipeline 2 --schedule zigzag

help=$("$bin" train --help)
for flag in --pipeline --stages --micro-batches --schedule; do
  # The flag's entry: its line and the continuation lines up to the next flag.
  entry=$(awk -v f="$flag" '$1 == f {on = 1; print; next} /^  -/ {on = 0} on' <<<"$help")
  if grep -q '\[.*\]' <<<"$entry"; then ok "train --help lists $flag with its default"
  else fails=$((fails + 1)); echo "FAIL train --help lacks $flag"; fi
done

if [[ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz &&
      ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]]; then
  echo "SKIP the runs: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  skips=1
else
  small=(--epochs 1 --limit-train 512 --limit-test 128 --batch-size 64 --progress never)
  expect_error "more stages than layers" 1 \
    "--pipeline 9 is larger than lenet's 8 layers" -- \
    "$bin" train --devices 9 --pipeline 9 "${small[@]}"
  expect_error "a layer in no stage" 1 "--stages 0-3,5-7: layer 4 is in no stage" -- \
    "$bin" train --devices 2 --pipeline 2 --stages 0-3,5-7 "${small[@]}"
  expect_error "a layer in two stages" 1 "--stages 0-4,4-7: layer 4 is in two stages" -- \
    "$bin" train --devices 2 --pipeline 2 --stages 0-4,4-7 "${small[@]}"
  expect_error "stage inside a residual block" 1 "layer 4 cannot start a stage \\(it is inside a residual block" -- \
    "$bin" train --model resnet18 --devices 2 --pipeline 2 --stages 0-3,4-55 "${small[@]}"
  expect_error "stage list against --pipeline" 1 "--stages 0-1,2-4,5-7 has 3 stages, --pipeline is 2" -- \
    "$bin" train --devices 2 --pipeline 2 --stages 0-1,2-4,5-7 "${small[@]}"
  expect_error "micro-batches above the batch" 1 \
    "--micro-batches 65 is larger than --batch-size 64 allows" -- \
    "$bin" train --devices 2 --pipeline 2 --micro-batches 65 "${small[@]}"
  expect_error "sync batch norm" 1 "--sync-bn with --pipeline 2" -- \
    "$bin" train --model resnet18 --devices 2 --pipeline 2 --sync-bn "${small[@]}"
  expect_error "devices not a multiple" 1 "--pipeline 2 does not divide the 3 devices" -- \
    "$bin" train --devices 3 --pipeline 2 "${small[@]}"

  # A run: its stages on stdout, bubble_fraction in every epoch's metrics.
  if "$bin" train --devices 2 --pipeline 2 --micro-batches 4 --stages 0-1,2-7 \
       --metrics "$dir/m.jsonl" "${small[@]}" >"$dir/out" 2>"$dir/err" &&
     grep -Eq '^stage 0 \(layers 0-1\): 200 parameters \(0\.00 MB\), activations at most [0-9.]+ MB$' "$dir/out" &&
     grep -Eq '^stage 1 \(layers 2-7\): 128868 parameters' "$dir/out" &&
     grep -Eq '^test acc: [0-9.]+, [0-9.]+ sec/epoch on \[cpu:0, cpu:1\]$' "$dir/out" &&
     grep -Eq '"pipeline_stages": 2, "bubble_fraction": 0\.[0-9]+' "$dir/m.jsonl"; then
    ok "train --pipeline 2: stages printed, bubble_fraction in the metrics"
  else
    fail "train --pipeline 2"
  fi
  # Planning the stages reads the model's shapes on the meta device, which
  # must not take the run's bf16 precision.
  if "$bin" train --devices 2 --pipeline 2 --precision bf16-reference "${small[@]}" \
       >"$dir/out" 2>"$dir/err" && grep -q '^test acc: ' "$dir/out"; then
    ok "train --pipeline 2 --precision bf16-reference"
  else
    fail "train --pipeline 2 --precision bf16-reference"
  fi
fi

# The demo: a row per device, tasks as digits and letters, the idle share.
if "$bin" demo pipeline --model lenet --batch-size 64 --micro-batches 4 --steps 2 \
     --plot "$dir/gantt.png" >"$dir/out" 2>"$dir/err" &&
   grep -Eq '^cpu:0 +\|[0-9a-d.]+\|$' "$dir/out" && grep -Eq '^cpu:1 +\|[0-9a-d.]+\|$' "$dir/out" &&
   grep -Eq '^the devices idled 0\.[0-9]+ of the step \(stages of equal cost: \(K-1\)/\(M\+K-1\) = 0\.200\)$' "$dir/out" &&
   [[ $(head -c 8 "$dir/gantt.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]; then
  ok "demo pipeline: timeline and Gantt chart"
else
  fail "demo pipeline"
fi
expect_error "demo pipeline with a bad plot name" 2 "--plot x.jpg: the file name must end in .png or .svg" \
  -- "$bin" demo pipeline --plot x.jpg

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]] || exit 1
[[ $skips -eq 0 ]] || exit 77

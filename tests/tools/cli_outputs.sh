#!/usr/bin/env bash
# Outputs that cannot be written fail the run before its first step: a
# checkpoint naming a directory, under /proc, or whose temporary file
# (NAME.tmp.PID) is longer than NAME_MAX; a plot or metrics file in a
# missing directory or naming a directory; a TensorBoard directory that is
# a file, under a file or under /proc. Each ends in under 2 seconds with
# one line naming the path and the reason, and a metrics file given beside
# it (opened at the end of the setup, written with every step) is never
# created: no step ran.
# Usage: cli_outputs.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0

# A small valid MNIST-style data set: 8 training and 4 test images of 28x28.
source "$(dirname "${BASH_SOURCE[0]}")/tiny_idx_set.sh"
data=$dir/data
tiny_idx_set "$data"
train=("$bin" train --dataset mnist --data "$data" --devices 1 --batch-size 4 --epochs 2
       --progress never)

# expect_refused NAME PATTERN WITNESS -- flags...: the run fails in under 2 s
# with one line matching PATTERN on stderr, and the file WITNESS (a metrics
# file or a checkpoint asked for beside the bad output) was never written.
expect_refused() {
  local name=$1 pattern=$2 witness=$3; shift 4
  rm -f "$witness"
  local start end rc lines ms
  start=$(date +%s%N)
  "${train[@]}" "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  lines=$(wc -l <"$dir/err")
  if [[ $rc -ne 0 && $lines -eq 1 && $ms -lt 2000 && ! -e "$witness" ]] &&
     grep -Eq -- "$pattern" "$dir/err"; then
    passes=$((passes + 1)); echo "ok   $name: exit $rc in $ms ms: $(cat "$dir/err")"
  else
    fails=$((fails + 1))
    echo "FAIL $name: exit $rc in $ms ms, $lines stderr lines, $witness $([[ -e $witness ]] &&
      echo written || echo absent), expected /$pattern/"
    sed 's/^/     /' "$dir/err"
  fi
}

# The same run with good outputs trains and writes them all.
out=$dir/out.d; mkdir -p "$out"
if "${train[@]}" --checkpoint "$out/ck.safetensors" --metrics "$out/m.jsonl" --log-steps \
     --plot "$out/p.png" --tensorboard "$out/tb/run1" >"$dir/ok" 2>&1 &&
   [[ -s $out/ck.safetensors && -s $out/p.png ]] && grep -q '"step"' "$out/m.jsonl" &&
   [[ -z $(ls "$out" | grep tmp) && $(ls "$out/tb/run1") == events.out.tfevents.* ]]; then
  passes=$((passes + 1)); echo "ok   good outputs are written: $(ls "$out" | tr '\n' ' ')"
else
  fails=$((fails + 1)); echo "FAIL good outputs: $(cat "$dir/ok"; ls "$out")"
fi

# --log-every N keeps every Nth step's line, steps counted over the run: of
# 2 epochs of 2 batches (steps 1 to 4), --log-every 2 keeps steps 2 and 4.
"${train[@]}" --metrics "$out/every.jsonl" --log-steps --log-every 2 >/dev/null 2>&1
kept=$(grep -o '^{"step": [0-9]*' "$out/every.jsonl" | sed 's/.* //' | tr '\n' ' ')
if [[ $kept == "2 4 " ]]; then passes=$((passes + 1)); echo "ok   --log-every 2 keeps steps $kept"
else fails=$((fails + 1)); echo "FAIL --log-every 2 kept steps '$kept'"; fi

m=$dir/witness.jsonl
mkdir -p "$dir/a_directory" "$dir/plot_dir.png"
expect_refused "checkpoint is a directory" "$dir/a_directory: is a directory" "$m" -- \
  --checkpoint "$dir/a_directory" --metrics "$m" --log-steps
expect_refused "checkpoint under /proc" "/proc/dptrain-ck: cannot create /proc/dptrain-ck\\.tmp\\.[0-9]+: " \
  "$m" -- --checkpoint /proc/dptrain-ck --metrics "$m" --log-steps
long=$(printf 'c%.0s' {1..250}) # NAME_MAX is 255: the name fits, NAME.tmp.PID does not
expect_refused "checkpoint's temporary name over NAME_MAX" "$long\\.tmp\\.[0-9]+: File name too long" \
  "$m" -- --checkpoint "$dir/$long" --metrics "$m" --log-steps
expect_refused "plot in a missing directory" \
  "cannot write the plot /nonexistent/p.png: No such file or directory" "$m" -- \
  --plot /nonexistent/p.png --metrics "$m" --log-steps
expect_refused "plot is a directory" "cannot write the plot $dir/plot_dir.png: it is a directory" \
  "$m" -- --plot "$dir/plot_dir.png" --metrics "$m" --log-steps
ck=$dir/witness.safetensors
expect_refused "metrics in a missing directory" \
  "cannot write the metrics file /nonexistent/m.jsonl: No such file or directory" "$ck" -- \
  --metrics /nonexistent/m.jsonl --checkpoint "$ck"
expect_refused "metrics is a directory" "cannot write the metrics file $dir/a_directory: it is a directory" \
  "$ck" -- --metrics "$dir/a_directory" --checkpoint "$ck"
expect_refused "metrics under /proc" "cannot write the metrics file /proc/dptrain-m.jsonl: " "$ck" -- \
  --metrics /proc/dptrain-m.jsonl --checkpoint "$ck"
echo x >"$dir/a_file"
expect_refused "tensorboard directory is a file" \
  "cannot write TensorBoard events in $dir/a_file: it is not a directory" "$m" -- \
  --tensorboard "$dir/a_file" --metrics "$m" --log-steps
expect_refused "tensorboard directory under a file" \
  "cannot write TensorBoard events in $dir/a_file/tb: cannot make $dir/a_file/tb: Not a directory" \
  "$m" -- --tensorboard "$dir/a_file/tb" --metrics "$m" --log-steps
expect_refused "tensorboard under /proc" "cannot write TensorBoard events in /proc/dptrain-tb: " \
  "$m" -- --tensorboard /proc/dptrain-tb --metrics "$m" --log-steps
# A missing TensorBoard directory is made for the check and removed again
# (this run is refused after the checks, for its device).
"${train[@]}" --tensorboard "$dir/tb_new/run" --devices gpu:0 >/dev/null 2>&1

# The checks leave nothing behind: no temporary file, no empty output.
left=$(ls "$dir" | grep -Ev '^(data|out\.d|a_directory|plot_dir\.png|a_file|out|err|ok)$')
if [[ -z $left ]]; then passes=$((passes + 1)); echo "ok   the checks left no file behind"
else fails=$((fails + 1)); echo "FAIL left behind: $left"; fi

# An existing metrics file is checked without being truncated.
echo '{"kept": true}' >"$dir/kept.jsonl"
"${train[@]}" --metrics "$dir/kept.jsonl" --checkpoint "$dir/a_directory" >/dev/null 2>&1
if [[ $(cat "$dir/kept.jsonl") == '{"kept": true}' ]]; then
  passes=$((passes + 1)); echo "ok   an existing metrics file is left as it was by a refused run"
else fails=$((fails + 1)); echo "FAIL kept.jsonl changed: $(cat "$dir/kept.jsonl")"; fi
rm -f "$dir/kept.jsonl"

# demo pipeline --plot: the same check before its steps.
start=$(date +%s%N)
"$bin" demo pipeline --plot /nonexistent/g.png >"$dir/out" 2>"$dir/err"; rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
if [[ $rc -ne 0 && $(wc -l <"$dir/err") -eq 1 && ! -s "$dir/out" && $ms -lt 2000 ]] &&
   grep -q "cannot write the plot /nonexistent/g.png: No such file or directory" "$dir/err"; then
  passes=$((passes + 1)); echo "ok   demo pipeline --plot /nonexistent/g.png: exit $rc in $ms ms: $(cat "$dir/err")"
else
  fails=$((fails + 1)); echo "FAIL demo pipeline --plot: exit $rc in $ms ms: $(cat "$dir/err" "$dir/out")"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

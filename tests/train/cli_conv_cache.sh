#!/usr/bin/env bash
# The convolution kernels' cache file (--conv-algo-cache, default
# $XDG_CACHE_HOME/dptrain/conv-algos.txt) makes `--conv-algo auto`
# reproducible:
#   - the same `train` command run twice on 2 devices against one fresh
#     cache gives checkpoints with the same tensors, byte for byte, and the
#     same recorded kernels; the first run measured, the second measured
#     nothing (--verbose);
#   - the run takes the file's choices, not fresh ones: a cache whose every
#     choice is gemm makes a run record gemm for every pass;
#   - a section of another key (its oneDNN version edited) is not used: the
#     run measures again, and that section stays in the file as it was;
#   - a corrupt cache is one warning naming the file and line, the run
#     succeeds and rewrites it; an unwritable folder is one warning and the
#     run succeeds; `off` measures and writes nothing.
# Usage: cli_conv_cache.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); echo "ok   $*"; }
bad() { fails=$((fails + 1)); echo "FAIL $*"; }

source "$(dirname "${BASH_SOURCE[0]}")/../tools/tiny_idx_set.sh"
data=$dir/data
tiny_idx_set "$data"
unset DPTRAIN_CONV_ALGO_CACHE DNNL_MAX_CPU_ISA
export XDG_CACHE_HOME=$dir/xdg
cache=$XDG_CACHE_HOME/dptrain/conv-algos.txt
train=("$bin" train --model lenet --dataset mnist --data "$data" --devices 2 --batch-size 4
       --epochs 1 --limit-train 8 --seed 3 --no-shuffle --conv-algo auto --progress never --verbose)

# measured LOG: the count of "N passes measured" in a --verbose log.
measured() { sed -n 's/.*convolution kernels: \([0-9]*\) passes measured.*/\1/p' "$1"; }
# tensors FILE: a safetensors file's tensor bytes (after its 8-byte length
# and JSON header, which holds the run's times), as a checksum.
tensors() {
  local n
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  tail -c +$((9 + n)) "$1" | sha256sum | cut -d' ' -f1
}
# choices FILE: the kernels a checkpoint recorded (its dptrain.conv_algos).
choices() {
  local n
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  head -c $((8 + n)) "$1" | tail -c "$n" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["__metadata__"]["dptrain.conv_algos"])'
}
# meta FILE: the checkpoint's header (dtypes, shapes, offsets, every
# metadata entry) with each history entry cut to its run-independent
# fields (epoch, train loss and accuracy, test accuracy): the rest are the
# epoch's seconds, samples/s and peak memory, which no two runs share.
meta() {
  local n
  n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
  head -c $((8 + n)) "$1" | tail -c "$n" | python3 -c '
import json, sys
h = json.load(sys.stdin)
m = h["__metadata__"]
m["dptrain.history"] = ";".join(" ".join(e.split()[:4]) for e in m["dptrain.history"].split(";"))
print(json.dumps(h, sort_keys=True))'
}

# ---- the same command twice: the same tensors, the second measures nothing
"${train[@]}" --checkpoint "$dir/a.st" >"$dir/a.out" 2>"$dir/a.err"; ra=$?
"${train[@]}" --checkpoint "$dir/b.st" >"$dir/b.out" 2>"$dir/b.err"; rb=$?
ma=$(measured "$dir/a.err"); mb=$(measured "$dir/b.err")
if [[ $ra -eq 0 && $rb -eq 0 && -s $cache && ${ma:-0} -gt 0 && $mb == 0 ]]; then
  ok "run 1 measured $ma passes into $cache, run 2 measured $mb"
else
  bad "runs: exit $ra/$rb, measured '$ma'/'$mb', cache $(ls -l "$cache" 2>&1): $(tail -3 "$dir/b.err")"
fi
if [[ $ra -eq 0 && $rb -eq 0 && $(tensors "$dir/a.st") == $(tensors "$dir/b.st") &&
      "$(choices "$dir/a.st")" == "$(choices "$dir/b.st")" && -n $(choices "$dir/a.st") &&
      -n "$(meta "$dir/a.st")" && "$(meta "$dir/a.st")" == "$(meta "$dir/b.st")" ]]; then
  ok "the two checkpoints hold the same tensors, kernels and metadata (the epochs' times aside)"
else
  bad "the checkpoints differ: $(tensors "$dir/a.st") $(tensors "$dir/b.st"); $(diff <(meta "$dir/a.st" | tr ',' '\n') <(meta "$dir/b.st" | tr ',' '\n') | head -4 | tr '\n' ' ')"
fi

# ---- the file's choices are the ones run: every choice gemm
cp "$cache" "$dir/measured.txt"
sed -i '/^[^#[]/s/=[a-z]*/=gemm/g' "$cache"
"${train[@]}" --checkpoint "$dir/c.st" >"$dir/c.out" 2>"$dir/c.err"; rc=$?
recorded=$(choices "$dir/c.st" 2>/dev/null)
if [[ $rc -eq 0 && $(measured "$dir/c.err") == 0 && -n $recorded &&
      $(grep -o '=[a-z]*' <<<"$recorded" | sort -u) == "=gemm" ]]; then
  ok "a cache of gemm choices makes the run record gemm for every pass"
else
  bad "gemm cache: exit $rc, measured '$(measured "$dir/c.err")', recorded: $recorded"
fi

# ---- another key (oneDNN's version edited) is passed over and kept
cp "$dir/measured.txt" "$cache"
sed -i 's/^\(\[.*onednn=\)/\1999./' "$cache"
other=$(grep '^\[' "$cache")
"${train[@]}" --checkpoint "$dir/d.st" >"$dir/d.out" 2>"$dir/d.err"; rd=$?
md=$(measured "$dir/d.err")
if [[ $rd -eq 0 && ${md:-0} -gt 0 && $other == *onednn=999.* ]] && grep -qF "$other" "$cache" &&
   [[ $(grep -c '^\[' "$cache") == 2 ]] && grep -q 'passed over.*onednn=999' "$dir/d.err"; then
  ok "another oneDNN's section: passed over (said why), measured $md again, kept in the file"
else
  bad "other key: exit $rd, measured '$md', sections $(grep -c '^\[' "$cache"): $(grep -i cache "$dir/d.err")"
fi

# ---- a corrupt cache: one warning naming file and line; the run succeeds and rewrites it
printf 'not a cache\n' >"$cache"
"${train[@]}" >"$dir/e.out" 2>"$dir/e.err"; re=$?
warnings=$(grep -c "warning.*$cache:1:" "$dir/e.err")
if [[ $re -eq 0 && $warnings == 1 && $(measured "$dir/e.err") -gt 0 ]] && grep -q '^\[dptrain=' "$cache" &&
   ! grep -q 'not a cache' "$cache"; then
  ok "corrupt cache: $(grep "$cache:1:" "$dir/e.err")"
else
  bad "corrupt cache: exit $re, $warnings warnings: $(cat "$dir/e.err" | grep -iv '^ ' | tail -3)"
fi

# ---- an unwritable folder: a warning, the run succeeds
: >"$dir/plain"
"${train[@]}" --conv-algo-cache "$dir/plain/sub/c.txt" >"$dir/f.out" 2>"$dir/f.err"; rf=$?
if [[ $rf -eq 0 ]] && [[ $(grep -c "warning.*$dir/plain/sub/c.txt" "$dir/f.err") == 1 ]]; then
  ok "unwritable folder: $(grep "$dir/plain/sub" "$dir/f.err")"
else
  bad "unwritable folder: exit $rf: $(tail -3 "$dir/f.err")"
fi

# ---- off: measures, writes nothing
rm -rf "$XDG_CACHE_HOME"
"${train[@]}" --conv-algo-cache off >"$dir/g.out" 2>"$dir/g.err"; rg=$?
if [[ $rg -eq 0 && $(measured "$dir/g.err") -gt 0 && ! -e $XDG_CACHE_HOME ]]; then
  ok "--conv-algo-cache off: measured, no file"
else
  bad "off: exit $rg, $(ls -R "$XDG_CACHE_HOME" 2>&1 | head -3)"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

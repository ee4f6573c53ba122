#!/usr/bin/env bash
# Flags as GNU programs take them, and the limits the library and the CLI
# share: every flag that takes a value takes it as --flag=value too (what
# glibc's getopt_long reads), with the same meaning and the same errors as
# --flag value; --epochs is 1 to 1000 in the CLI as in the library; more
# kernel threads per device than CPUs is warned about; --help, the CLI
# reference (docs/cli.md) and the docs say what the tool does and agree;
# DPTRAIN_CONV_ALGO sets --conv-algo's default.
# Usage: cli_flags.sh path/to/dptrain
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0
ok() { passes=$((passes + 1)); echo "ok   $*"; }
bad() { fails=$((fails + 1)); echo "FAIL $*"; }

# accepts CMD FLAG VALUE [ARG]: "CMD [ARG] FLAG=VALUE --help" parses (the
# help comes last, so every flag before it is read and checked first).
accepts() {
  local cmd=$1 flag=$2 value=$3 arg=${4:-}
  if "$bin" $cmd $arg "$flag=$value" --help >"$dir/out" 2>"$dir/err" && grep -q '^usage' "$dir/out" &&
     [[ ! -s $dir/err ]]; then
    ok "$cmd $flag=$value"
  else
    bad "$cmd $flag=$value: $(cat "$dir/err")"
  fi
}
# same_error CMD FLAG BAD [ARG]: --flag=BAD fails as --flag BAD does.
same_error() {
  local cmd=$1 flag=$2 value=$3 arg=${4:-} a b
  a=$("$bin" $cmd $arg "$flag=$value" 2>&1 >/dev/null); local ra=$?
  b=$("$bin" $cmd $arg "$flag" "$value" 2>&1 >/dev/null); local rb=$?
  if [[ $ra -eq 2 && $rb -eq 2 && "$a" == "$b" && -n $a ]]; then
    ok "$cmd $flag=$value fails as $flag $value: $a"
  else
    bad "$cmd $flag=$value: exit $ra '$a', $flag $value: exit $rb '$b'"
  fi
}

touch "$dir/m.txt"
for pair in --model=lenet --devices=2 --threads=1 --batch-size=64 --lr=0.1 --epochs=1000 \
            --seed=7 --data=/tmp --metrics=m.jsonl --plot=p.svg --momentum=0.9 \
            --weight-decay=0.001 --limit-train=100 --limit-test=10 --progress=never \
            --allreduce=ring --checkpoint=c.st --init=c.st --on-checkpoint-error=continue \
            --dataset=mnist --init-normal=0.01 --bucket-mb=2 --grad-compress=bf16 --pipeline=2 \
            --stages=0-1,2-7 --micro-batches=4 --schedule=gpipe --max-memory=8G; do
  accepts train "${pair%%=*}" "${pair#*=}"
done
accepts train --resume c.st
for pair in --checkpoint=c.st --model=lenet --devices=1 --threads=1 --batch-size=8 --data=/tmp \
            --limit-test=5 --dataset=mnist; do
  accepts eval "${pair%%=*}" "${pair#*=}"
done
for pair in --devices=2 --allreduce=naive --ops=10 --steps=3 --model=lenet --pipeline=2 \
            --micro-batches=2 --schedule=gpipe --batch-size=8 --plot=g.svg; do
  accepts demo "${pair%%=*}" "${pair#*=}" pipeline
done
for pair in --input=3x32x32 --pipeline=2 --stages=0-1,2-7 --micro-batches=4 --schedule=gpipe; do
  accepts model "${pair%%=*}" "${pair#*=}" lenet
done
for pair in --devices=1 --threads=1 --seconds=0.5; do
  accepts devices "${pair%%=*}" "${pair#*=}"
done

same_error train --lr abc
same_error train --epochs 0
same_error train --max-memory 8X
same_error eval --batch-size -3
same_error demo --schedule sideways pipeline
same_error model --input 3x32 lenet
same_error devices --threads many
# A value may hold '=' itself: only the first one splits.
accepts train --checkpoint "a=b.safetensors"
# A flag that takes no value takes none this way either.
if ! "$bin" train --sync-bn=yes >/dev/null 2>"$dir/err" &&
   grep -q "unknown option '--sync-bn=yes'" "$dir/err"; then
  ok "train --sync-bn=yes is refused: $(cat "$dir/err")"
else bad "train --sync-bn=yes: $(cat "$dir/err")"; fi

# The values are the ones given: a summary on 3x32x32 inputs, split as asked.
out=$("$bin" model lenet --input=3x32x32 --stages=0-1,2-7)
if grep -q '^lenet on 3x32x32 inputs' <<<"$out" && grep -q '^stage 1: layers 2-7' <<<"$out"; then
  ok "model lenet --input=3x32x32 --stages=0-1,2-7 summarises 3x32x32 in 2 stages"
else bad "model --input=: $out"; fi

# --epochs: the CLI's limit is the library's (1000).
if ! "$bin" train --epochs 1001 >/dev/null 2>"$dir/err" &&
   grep -q -- "--epochs 1001: expected an integer from 1 to 1000" "$dir/err"; then
  ok "train --epochs 1001: $(cat "$dir/err")"
else bad "train --epochs 1001: $(cat "$dir/err")"; fi
if "$bin" train --help | grep -q -- "--epochs E  *epochs, 1 to 1000"; then
  ok "train --help says 1 to 1000 epochs"
else bad "train --help: $("$bin" train --help | grep -- --epochs)"; fi

# More kernel threads per device than CPUs: a warning naming both counts.
cpus=$(nproc)
"$bin" devices --threads $((cpus + 1)) >/dev/null 2>"$dir/err"
if grep -q "warning: $((cpus + 1)) kernel threads per device, more than the $cpus CPUs this process may use" "$dir/err"; then
  ok "devices --threads $((cpus + 1)) on $cpus CPUs: $(cat "$dir/err")"
else bad "devices --threads $((cpus + 1)): no warning: $(cat "$dir/err")"; fi
"$bin" devices --threads "$cpus" >/dev/null 2>"$dir/err"
if [[ ! -s $dir/err ]]; then ok "devices --threads $cpus: no warning"
else bad "devices --threads $cpus: $(cat "$dir/err")"; fi

# --split-invariant with a short last batch (100 samples in 32s: 4 left,
# half a block): a warning that its step is not split-invariant; none for
# 96 (three whole batches).
if [[ -d /usr/share/datasets/fashion-mnist ]]; then
  for n in 100 96; do
    "$bin" train --model lenet --limit-train $n --limit-test 10 --batch-size 32 --epochs 1 \
      --split-invariant 8 --progress never >/dev/null 2>"$dir/err"
    if [[ $n == 100 ]] && grep -q -- "warning: --split-invariant: the last batch of each epoch holds 4 of the 100 training samples" "$dir/err"; then
      ok "train --split-invariant 8, 100 samples in batches of 32: $(cat "$dir/err")"
    elif [[ $n == 96 && ! -s $dir/err ]]; then ok "train --split-invariant 8, 96 samples: no warning"
    else bad "train --split-invariant 8, $n samples: $(cat "$dir/err")"; fi
  done
else
  echo "skip --split-invariant's last-batch warning: Fashion-MNIST is not installed"
fi

# What the docs and --help say is what dptrain does: the demos --help
# lists are those `demo nope` names, and the docs' unclosed bracket
# (docs/your-model.md) prints what they show.
listed=$("$bin" --help | sed -n '/^  demo /,/^$/p' | sed 's/.*demonstrations://' | tr -d ' \n')
named=$("$bin" demo nope 2>&1 | sed 's/.*(\(.*\))/\1/' | tr -d ' ')
if [[ -n $listed && $listed == "$named" ]]; then ok "--help lists the demos demo nope names: $listed"
else bad "--help lists '$listed', demo nope names '$named'"; fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
printf 'Conv2d(1, 6, 5\n' >"$dir/paren.txt"
said=$(cd "$dir" && "$bin" train --model paren.txt 2>&1)
if cat "$root/README.md" "$root"/docs/*.md | grep -qxF -- "$said" && grep -qF "missing ')'" <<<"$said"; then
  ok "the docs' unclosed bracket is what dptrain prints: $said"
else bad "the docs do not show '$said'"; fi

# The reference, docs/cli.md, lists every flag that each command's --help
# lists, in that command's section (tests/tools/cli_docs.sh checks that it is
# what the build makes); and every flag that README.md or a page of docs/
# shows after `dptrain COMMAND` is one of that command's.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for cmd in $("$bin" help --commands); do
  section=$(awk -v h="## dptrain $cmd" '/^## / { on = ($0 == h) } on' "$root/docs/cli.md")
  missing=""
  for flag in $("$bin" "$cmd" --help | grep -Eo '^  --[a-z0-9-]+'); do
    grep -qF -- "\`$flag" <<<"$section" || missing+=" $flag"
  done
  if [[ -n $section && -z $missing ]]; then ok "docs/cli.md lists every flag of $cmd --help"
  else bad "docs/cli.md's dptrain $cmd lacks:${missing:- the section}"; fi
done
shown=0
unknown=""
for page in "$root/README.md" "$root"/docs/*.md; do
  [[ $page == */docs/cli.md || ! -f $page ]] && continue
  # Commands continued over lines with a backslash are read whole.
  while read -r _ cmd rest; do
    for flag in $(grep -o -- '--[a-z0-9-]*' <<<"$rest"); do
      [[ $flag == --help ]] && continue
      shown=$((shown + 1))
      "$bin" "$cmd" --help | grep -qE -- "^  $flag( |\$)" || unknown+=" $(basename "$page"): $cmd $flag;"
    done
  done < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$page" |
             grep -o 'dptrain \(train\|eval\|predict\|model\|export\|devices\|demo\)\b[^`|;&#)]*')
done
if [[ -z $unknown ]]; then ok "the $shown flags README.md and docs/ show after dptrain commands are theirs"
else bad "flags the docs show that their commands lack:$unknown"; fi

# --conv-algo's default: auto (the kernels timed, --verbose lists them)
# unless DPTRAIN_CONV_ALGO names another; a bad value there is refused.
short=(train --epochs 1 --limit-train 256 --limit-test 64 --batch-size 64 --progress never --verbose)
env -u DPTRAIN_CONV_ALGO "$bin" "${short[@]}" >/dev/null 2>"$dir/err"
if grep -q 'convolution kernels, measured' "$dir/err"; then ok "--conv-algo defaults to auto"
else bad "no kernels measured by default: $(tail -3 "$dir/err")"; fi
DPTRAIN_CONV_ALGO=direct "$bin" "${short[@]}" >/dev/null 2>"$dir/err"
if [[ $? -eq 0 ]] && ! grep -q 'convolution kernels, measured' "$dir/err"; then
  ok "DPTRAIN_CONV_ALGO=direct: nothing measured"
else bad "DPTRAIN_CONV_ALGO=direct: $(tail -3 "$dir/err")"; fi
said=$(DPTRAIN_CONV_ALGO=fast "$bin" train --epochs 1 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 2 && $said == "dptrain: error: DPTRAIN_CONV_ALGO=fast: expected auto, direct or winograd" ]]; then
  ok "a bad DPTRAIN_CONV_ALGO: $said"
else bad "DPTRAIN_CONV_ALGO=fast: exit $rc '$said'"; fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

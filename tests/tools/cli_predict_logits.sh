#!/usr/bin/env bash
# dptrain predict --logits OUT.npy: the raw outputs of 300 Fashion-MNIST
# test images as NumPy's float32 (300, 10), rows in the images' order.
# Read back here with od and awk (no NumPy): the header is np.save's; each
# row's softmax gives the top 3 classes and probabilities predict prints
# (to its four decimals); each row's largest output is right exactly as
# often as `dptrain eval --limit-test 300` says. A file that cannot be
# written is refused in one line naming it, before the model runs.
# Usage: cli_predict_logits.sh path/to/dptrain
set -u
bin=$1
data=/usr/share/datasets/fashion-mnist
if [[ ! -r $data/t10k-images-idx3-ubyte.gz ]]; then
  echo "SKIP cli_predict_logits: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export DPTRAIN_CONV_ALGO=direct
n=300
# An np.save header (format 1.0, padded to 64 bytes) for the dict $1.
npy_header() {
  local hl=$(((10 + ${#1} + 1 + 63) / 64 * 64 - 10))
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $((hl % 256)))\\x$(printf %02x $((hl / 256)))"
  printf '%s%*s\n' "$1" $((hl - ${#1} - 1)) ""
}
{
  npy_header "{'descr': '|u1', 'fortran_order': False, 'shape': ($n, 28, 28), }"
  gzip -dc "$data/t10k-images-idx3-ubyte.gz" | tail -c +17 | head -c $((n * 784))
} >"$dir/images.npy"
labels=$(gzip -dc "$data/t10k-labels-idx1-ubyte.gz" | tail -c +9 | head -c $n | od -An -tu1 -v)

if ! "$bin" train --epochs 1 --limit-train 5120 --optimizer adamw --lr 0.003 \
     --checkpoint "$dir/ck.safetensors" --progress never >"$dir/train.log" 2>&1; then
  echo "FAIL train"; cat "$dir/train.log"; exit 1
fi
fail=0
# A directory that does not exist: one line naming the file, no output.
"$bin" predict --checkpoint "$dir/ck.safetensors" --logits "$dir/none/l.npy" "$dir/images.npy" \
  >"$dir/bad.out" 2>"$dir/bad.err"
rc=$?
if [[ $rc -ne 0 && $(wc -l <"$dir/bad.err") -eq 1 && ! -s $dir/bad.out ]] &&
   grep -q "logits file $dir/none/l.npy" "$dir/bad.err"; then
  echo "ok   --logits $dir/none/l.npy refused (exit $rc): $(cat "$dir/bad.err")"
else
  echo "FAIL --logits into a missing directory: exit $rc"; cat "$dir/bad.err" "$dir/bad.out"; fail=1
fi

acc=$("$bin" eval --checkpoint "$dir/ck.safetensors" --limit-test $n | sed -n 's/^test acc: //p')
if ! "$bin" predict --checkpoint "$dir/ck.safetensors" --topk 3 --logits "$dir/l.npy" \
     "$dir/images.npy" >"$dir/p.txt" 2>"$dir/p.err"; then
  echo "FAIL predict --logits"; cat "$dir/p.err"; exit 1
fi
npy_header "{'descr': '<f4', 'fortran_order': False, 'shape': ($n, 10), }" >"$dir/want.hdr"
hs=$(stat -c %s "$dir/want.hdr")
if cmp -s -n "$hs" "$dir/want.hdr" "$dir/l.npy" &&
   [[ $(stat -c %s "$dir/l.npy") -eq $((hs + n * 10 * 4)) ]]; then
  echo "ok   $dir/l.npy: np.save's header for float32 ($n, 10), $((n * 10 * 4)) bytes of data"
else
  echo "FAIL $dir/l.npy: header or size is not np.save's for float32 ($n, 10)"
  head -c "$hs" "$dir/l.npy" | od -c | head -8; fail=1
fi
names="t-shirt;trouser;pullover;dress;coat;sandal;shirt;sneaker;bag;ankle boot"
# Rows of 10 floats; softmax, top 3 by repeated maxima (ties: the lower
# class first, as predict sorts), compared with predict's line: the same
# classes, each probability within one unit of its 4th decimal (predict
# rounds its float softmax, this its double one of od's printed logits: a
# value on a rounding boundary may print either way).
tail -c +$((hs + 1)) "$dir/l.npy" | od -An -v -tf4 -w40 >"$dir/l.txt"
read -r bad right <<<"$(awk -v labels="$labels" -v names="$names" '
  BEGIN { split(labels, y, " "); split(names, c, ";") }
  FNR == NR { line[FNR] = $0; next }
  {
    split(line[FNR], l, " "); top = 1; sum = 0
    for (k = 2; k <= 10; k++) if (l[k] > l[top]) top = k
    for (k = 1; k <= 10; k++) { e[k] = exp(l[k] - l[top]); sum += e[k]; used[k] = 0 }
    s = ""
    for (j = 0; j < 3; j++) {
      b = 0
      for (k = 1; k <= 10; k++) if (!used[k] && (b == 0 || e[k] > e[b])) b = k
      used[b] = 1; s = s sprintf("%s %s %.4f", j ? "," : "", c[b], e[b] / sum)
    }
    got = $0; sub(/^[^:]*:/, "", got)
    if (!same(s, got) && ++bad <= 2)
      print "row " FNR ": logits give" s ", predict" got > "/dev/stderr"
    if (top - 1 == y[FNR]) right++
  }
  END { print bad + 0, right + 0 }
  # " name p, name p, name p" twice: equal names, probabilities within 1e-4
  function same(a, b,   n, m, i, x, y, px, py) {
    n = split(a, x, ", "); m = split(b, y, ", ")
    if (n != m) return 0
    for (i = 1; i <= n; i++) {
      px = x[i]; py = y[i]
      sub(/ [^ ]*$/, "", px); sub(/ [^ ]*$/, "", py)
      if (px != py) return 0
      px = x[i]; py = y[i]; sub(/^.* /, "", px); sub(/^.* /, "", py)
      if (px - py > 1.0001e-4 || py - px > 1.0001e-4) return 0
    }
    return 1
  }' "$dir/l.txt" "$dir/p.txt")"
got=$(awk -v r="$right" -v n=$n 'BEGIN { printf "%.4f", r / n }')
rows=$(wc -l <"$dir/l.txt")
if [[ $rows -eq $n && $bad -eq 0 ]]; then
  first=$(head -1 "$dir/p.txt" | sed 's/^[^:]*: //')
  echo "ok   each of $n rows' softmax gives predict's top 3 and probabilities ($first)"
else
  echo "FAIL $bad of $n rows' softmax differ from predict's top 3 ($rows rows)"; fail=1
fi
if [[ $got == "$acc" ]] && python3 "$(dirname "${BASH_SOURCE[0]}")/../util/compare.py" more-than "$acc" 0.3; then
  echo "ok   the largest logit is right for $right of $n ($got), dptrain eval $acc"
else
  echo "FAIL the largest logit is right for $right of $n ($got), dptrain eval says $acc"; fail=1
fi
exit $fail

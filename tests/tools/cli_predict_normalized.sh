#!/usr/bin/env bash
# dptrain predict sees images as the checkpoint's run saw its test set: a
# run trained with --normalize, its predictions of the first 500
# Fashion-MNIST test images (written here as an .npy batch of bytes) are
# right exactly as often as `dptrain eval --limit-test 500` says.
# Usage: cli_predict_normalized.sh path/to/dptrain
set -u
bin=$1
data=/usr/share/datasets/fashion-mnist
if [[ ! -r $data/t10k-images-idx3-ubyte.gz ]]; then
  echo "SKIP cli_predict_normalized: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export DPTRAIN_CONV_ALGO=direct
n=500
# images.npy: NumPy's format 1.0, uint8 (n, 28, 28), the header padded to
# 64 bytes with spaces and a newline.
dict="{'descr': '|u1', 'fortran_order': False, 'shape': ($n, 28, 28), }"
hl=$(((10 + ${#dict} + 1 + 63) / 64 * 64 - 10)) # the header's length, newline included
{
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $((hl % 256)))\\x$(printf %02x $((hl / 256)))"
  printf '%s%*s\n' "$dict" $((hl - ${#dict} - 1)) ""
  gzip -dc "$data/t10k-images-idx3-ubyte.gz" | tail -c +17 | head -c $((n * 784))
} >"$dir/images.npy"
labels=$(gzip -dc "$data/t10k-labels-idx1-ubyte.gz" | tail -c +9 | head -c $n | od -An -tu1 -v)

if ! "$bin" train --epochs 1 --limit-train 5120 --normalize 0.2860,0.3530 --optimizer adamw \
     --lr 0.003 --checkpoint "$dir/ck.safetensors" --progress never >"$dir/train.log" 2>&1; then
  echo "FAIL train --normalize"; cat "$dir/train.log"; exit 1
fi
acc=$("$bin" eval --checkpoint "$dir/ck.safetensors" --limit-test $n | sed -n 's/^test acc: //p')
if ! "$bin" predict --checkpoint "$dir/ck.safetensors" --topk 1 "$dir/images.npy" >"$dir/p.txt" \
     2>"$dir/p.err"; then
  echo "FAIL predict"; cat "$dir/p.err"; exit 1
fi
names=("t-shirt" "trouser" "pullover" "dress" "coat" "sandal" "shirt" "sneaker" "bag" "ankle boot")
right=$(awk -v labels="$labels" -v names="$(IFS=';'; echo "${names[*]}")" '
  BEGIN { split(labels, y, " "); split(names, c, ";") }
  { sub(/^[^:]*: /, ""); sub(/ [0-9.]+$/, ""); if ($0 == c[y[NR] + 1]) right++ }
  END { print right + 0 }' "$dir/p.txt")
got=$(awk -v r="$right" -v n=$n 'BEGIN { printf "%.4f", r / n }')
if [[ $(wc -l <"$dir/p.txt") -eq $n && $got == "$acc" ]] &&
   python3 "$(dirname "${BASH_SOURCE[0]}")/../util/compare.py" more-than "$acc" 0.3; then
  echo "ok   predict on $n normalised test images: $right right ($got), dptrain eval $acc"
  exit 0
fi
echo "FAIL predict: $right of $n right ($got), dptrain eval says $acc"
head -3 "$dir/p.txt"
exit 1

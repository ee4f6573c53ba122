#!/usr/bin/env bash
# CIFAR-10 (3x32x32 images) trains end to end from the command line: a small
# binary directory (data_batch_1..5.bin, test_batch.bin: records of one
# label byte and 3072 pixel bytes) and
#   dptrain train --dataset cifar10 --data DIR --model resnet18|FILE ...
# for the built-in ResNet-18 (its first convolution takes the dataset's 3
# channels) and for an nn.Sequential file whose first Conv2d takes 3. The
# same file with Conv2d(1, ...) is refused, naming its line.
# Usage: cli_cifar10.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0

# make_batch FILE FIRST COUNT: COUNT records; record r has label r % 10 and
# every pixel (r * 37) % 256.
make_batch() {
  local f=$1 first=$2 n=$3 r
  : >"$f"
  for ((r = first; r < first + n; r++)); do
    printf "\\$(printf %03o $((r % 10)))" >>"$f"
    head -c 3072 /dev/zero | tr '\0' "\\$(printf %03o $((r * 37 % 256)))" >>"$f"
  done
}
data=$dir/cifar
mkdir -p "$data"
for i in 1 2 3 4 5; do make_batch "$data/data_batch_$i.bin" $(((i - 1) * 4)) 4; done
make_batch "$data/test_batch.bin" 100 8
size=$(stat -c %s "$data/data_batch_1.bin")
if [[ $size -ne $((4 * 3073)) ]]; then
  echo "FAIL data_batch_1.bin has $size bytes, expected $((4 * 3073))"; exit 1
fi

# expect_train NAME MODEL: trains MODEL on the CIFAR-10 directory; exit 0
# and d2l's last line, "test acc: A, S sec/epoch on [cpu:0]".
expect_train() {
  local name=$1 model=$2
  "$bin" train --dataset cifar10 --data "$data" --model "$model" --epochs 1 --batch-size 8 \
    --limit-train 16 --limit-test 8 --progress never >"$dir/out" 2>"$dir/err"
  local rc=$?
  if [[ $rc -eq 0 ]] && grep -Eq '^test acc: [01]\.[0-9]+, [0-9.]+ sec/epoch on \[' "$dir/out"; then
    passes=$((passes + 1)); echo "ok   $name: $(tail -n 1 "$dir/out")"
  else
    fails=$((fails + 1)); echo "FAIL $name: exit $rc"
    sed 's/^/     /' "$dir/out" "$dir/err"
  fi
}

expect_train "resnet18 on cifar10" resnet18

cat >"$dir/cifar_cnn.txt" <<'MODEL'
# a small CNN for 3x32x32 images
nn.Conv2d(3, 8, kernel_size=3, padding=1)
nn.BatchNorm2d(8)
nn.ReLU()
nn.MaxPool2d(2)                    # 8 x 16 x 16
nn.Conv2d(8, 16, kernel_size=3, padding=1)
nn.ReLU()
nn.AdaptiveAvgPool2d((4, 4))
nn.Flatten()
nn.Dropout(0.25)
nn.Linear(16 * 4 * 4, 10)
MODEL
expect_train "nn.Sequential file on cifar10" "$dir/cifar_cnn.txt"

# The same file for 1-channel images does not fit CIFAR-10's 3 channels.
sed 's/Conv2d(3, 8/Conv2d(1, 8/' "$dir/cifar_cnn.txt" >"$dir/gray_cnn.txt"
"$bin" train --dataset cifar10 --data "$data" --model "$dir/gray_cnn.txt" --epochs 1 \
  --batch-size 8 --limit-train 16 --limit-test 8 --progress never >"$dir/out" 2>"$dir/err"
rc=$?
if [[ $rc -ne 0 && $(wc -l <"$dir/err") -eq 1 ]] &&
   grep -qF 'gray_cnn.txt: line 2: nn.Conv2d(1, 8, kernel_size=3, padding=1) expects 1 input channels, the layer before gives 3' "$dir/err"; then
  passes=$((passes + 1)); echo "ok   1-channel file on cifar10 refused: $(cat "$dir/err")"
else
  fails=$((fails + 1)); echo "FAIL 1-channel file on cifar10: exit $rc"
  sed 's/^/     /' "$dir/out" "$dir/err"
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

#!/usr/bin/env bash
# The ImageNet-style recipe of README.md and docs/your-data.md, run small:
# examples/imagenet_style/recipe.sh with 2 training and 1 test JPEG a class
# of 40-90 px and one step (--limit-train 16), ResNet-18 from ONNX at 32 px
# (SIZE=32: --transform imagenet's stages and mean and std spelt out at
# that side, since 224 px takes minutes on a shared 2-core machine). Checks what each command
# gives (the grid is a 16-sample PNG, the checkpoint names the 10 classes
# and the transforms, predict prints 3 classes whose probabilities are
# finite and sum to at most 1, the shards hold every image), and that each
# dptrain command the script prints is a line of docs/your-data.md with
# only --limit-train and the 32 px transforms in place of --transform
# imagenet, so the page shows what the script runs.
# PyTorch (for the ONNX export) and PIL are Debian's /usr/bin/python3's:
# without them a skip (77), unless DP_REQUIRE_TORCH=1.
# Usage: cli_imagenet_recipe.sh path/to/dptrain
set -u
# Kernels chosen without timing each shape first (the recipe's auto times
# ResNet-18's every convolution, minutes on a shared 2-core machine).
export DPTRAIN_CONV_ALGO=${DPTRAIN_CONV_ALGO:-direct}
bin=$(realpath "$1")
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY=/usr/bin/python3
if ! "$PY" -c 'import torch, torchvision, PIL' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import torch, torchvision and PIL, and DP_REQUIRE_TORCH=1 needs them"
    exit 1
  fi
  echo "SKIP cli_imagenet_recipe: $PY lacks torch, torchvision or PIL (python3-torchvision, python3-pil)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

w=$tmp/r
if ! (cd "$tmp" && DPTRAIN=$bin PYTHON=$PY SIZE=32 TRAIN=2 TEST=1 MIN=40 MAX=90 LIMIT=16 \
      "$src/examples/imagenet_style/recipe.sh" r) > "$tmp/out" 2>&1; then
  cat "$tmp/out"
  echo "FAIL recipe.sh exited non-zero"
  exit 1
fi
cat "$tmp/out"

# The grid: a PNG, and 16 samples.
grep -qx 'wrote r/grid.png: 16 samples with their class names' "$tmp/out" \
  && [[ $(head -c 8 "$w/grid.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] \
  && ok "data --grid: r/grid.png is a PNG of 16 samples" || fail "data --grid: no PNG of 16 samples"

# Both runs trained and tested: one 'test acc' line each, accuracy in [0, 1].
n=$(grep -cE '^test acc: (0\.[0-9]+|1\.00), [0-9.]+ sec/epoch on \[cpu:0' "$tmp/out")
[[ $n == 2 ]] && ok "train: folder and tar runs each print test acc" || fail "train: $n of 2 'test acc' lines"

# The checkpoints name the classes and the transforms (safetensors' header).
for ck in ck ck_tar; do
  if "$PY" - "$w/$ck.safetensors" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
classes = json.loads(meta["dptrain.classes"])
assert classes == [f"class_{k}" for k in range(10)], classes
assert meta["dptrain.train_transform"] == "random-resized-crop:32,flip", meta["dptrain.train_transform"]
assert meta["dptrain.test_transform"] == "resize:36,center-crop:32", meta["dptrain.test_transform"]
PYEOF
  then ok "$ck.safetensors: classes class_0..class_9, transforms random-resized-crop:32,flip and resize:36,center-crop:32"
  else fail "$ck.safetensors: classes or transforms not recorded"; fi
done

# predict: 3 named classes each run, finite probabilities summing to <= 1.
preds=$(grep '^r/new_photo.jpg: ' "$tmp/out")
if [[ $(wc -l <<<"$preds") == 2 ]] && "$PY" - "$preds" <<'PYEOF'
import math, re, sys
for line in sys.argv[1].splitlines():
    pairs = re.findall(r"(class_\d) ([0-9.]+)", line.split(": ", 1)[1])
    ps = [float(p) for _, p in pairs]
    assert len(pairs) == 3 and len({c for c, _ in pairs}) == 3, line
    assert all(math.isfinite(p) and 0 <= p <= 1 for p in ps) and sum(ps) <= 1.0002, line
    assert ps == sorted(ps, reverse=True), line
PYEOF
then ok "predict: top 3 of 10 named classes, probabilities in order, sum <= 1"
else fail "predict: not two lines of 3 classes with probabilities: $preds"; fi

# shards: all 20 training and 10 test images.
grep -qx 'wrote r/shards: train 20 samples in 1 shards, test 10 in 1, 10 classes' "$tmp/out" \
  && ok "shards: 20 training and 10 test samples" || fail "shards: counts"

# Each dptrain command printed is on docs/your-data.md (--limit-train 16 and
# the scratch folder's name aside).
while IFS= read -r cmd; do
  shown=${cmd// --limit-train 16/}
  shown=${shown// --train-transform random-resized-crop:32,flip --test-transform resize:36,center-crop:32 --normalize 0.485,0.456,0.406,0.229,0.224,0.225/ --transform imagenet}
  shown=${shown// r\// imagenet_style/}
  grep -qxF -- "$shown" "$src/docs/your-data.md" && ok "docs/your-data.md shows: ${shown#\$ }" \
    || fail "docs/your-data.md lacks the line: $shown"
done < <(grep '^\$ build/dptrain ' "$tmp/out")

echo "$fails failed"
[[ $fails == 0 ]]

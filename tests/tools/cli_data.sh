#!/usr/bin/env bash
# dptrain data: the samples as the loader hands them to the step, dumped
# (float32 N x C x H x W and int64 labels, which np.load reads) and drawn;
# the same bytes for 1 worker or 4, streamed or cached; another epoch
# another draw; a bad output path refused before anything is decoded.
# Usage: cli_data.sh path/to/dptrain
set -u
dptrain=$1
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import numpy, and DP_REQUIRE_TORCH=1 (make test-interop) needs it"
    exit 1
  fi
  echo "SKIP cli_data: $PY has no numpy (apt-get install python3-numpy)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# Two classes of PNGs of assorted sizes, written by zlib alone.
"$PY" - "$tmp/d" <<'PYEOF'
import os, struct, sys, zlib
root = sys.argv[1]
def png(path, w, h, seed):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 3 + seed * 40) % 256 for x in range(3 * w))
                   for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
sizes = [(40, 30), (23, 57), (64, 64), (31, 18), (50, 90)]
for split in ("train", "test"):
    for c, name in enumerate(("cat", "dog")):
        os.makedirs(f"{root}/{split}/{name}")
        for i, (w, h) in enumerate(sizes):
            png(f"{root}/{split}/{name}/{i}.png", w, h, c * 5 + i)
PYEOF

flags=(--dataset folder --data "$tmp/d" --train-transform random-resized-crop:16,flip
       --test-transform resize:20,center-crop:16 --count 7 --batch-size 3)
out=$("$dptrain" data "${flags[@]}" --workers 1 --dump "$tmp/a.npy" --grid "$tmp/a.png" 2>&1) ||
  fail "data --dump --grid: $out"
"$PY" - "$tmp/a.npy" "$tmp/a.labels.npy" <<'PYEOF' || fail "the dump is not 7 x 3 x 16 x 16 float32 with int64 labels"
import sys, numpy as np
x, y = np.load(sys.argv[1]), np.load(sys.argv[2])
assert x.shape == (7, 3, 16, 16) and x.dtype == np.float32, (x.shape, x.dtype)
assert y.shape == (7,) and y.dtype == np.int64 and set(y.tolist()) <= {0, 1}, y
assert np.isfinite(x).all() and 0 <= x.min() and x.max() <= 1, (x.min(), x.max())
PYEOF
[[ $(head -c 8 "$tmp/a.png" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "--grid wrote no PNG"

"$dptrain" data "${flags[@]}" --workers 4 --dump "$tmp/b.npy" >/dev/null 2>&1 || fail "data --workers 4"
cmp -s "$tmp/a.npy" "$tmp/b.npy" || fail "--workers 4 gave other samples than --workers 1"
cmp -s "$tmp/a.labels.npy" "$tmp/b.labels.npy" || fail "--workers 4 gave other labels"
"$dptrain" data "${flags[@]}" --cache --dump "$tmp/c.npy" >/dev/null 2>&1 || fail "data --cache"
cmp -s "$tmp/a.npy" "$tmp/c.npy" || fail "--cache gave other samples than streaming"
"$dptrain" data "${flags[@]}" --epoch 1 --dump "$tmp/e.npy" >/dev/null 2>&1 || fail "data --epoch 1"
cmp -s "$tmp/a.npy" "$tmp/e.npy" && fail "epoch 1 drew the same samples as epoch 0"
"$dptrain" data "${flags[@]}" --test --dump "$tmp/t.npy" >/dev/null 2>&1 || fail "data --test"

# A bad output path: one line naming it, before any image is decoded (a
# corrupt image would otherwise be the error).
printf 'not a png' >"$tmp/d/train/cat/9.png"
for bad in "$tmp/nowhere/x.npy" "$tmp/x.txt" "$tmp"; do
  err=$("$dptrain" data "${flags[@]}" --dump "$bad" 2>&1)
  st=$?
  if [[ $st != 2 || $(wc -l <<<"$err") != 1 || $err != *"--dump $bad"* ]]; then
    fail "--dump $bad: expected exit 2 and one line naming it, got $st: $err"
  fi
done
err=$("$dptrain" data "${flags[@]}" --count 10 --dump "$tmp/f.npy" 2>&1)
[[ $? == 1 && $(wc -l <<<"$err") == 1 && $err == *"9.png"* ]] ||
  fail "a corrupt image: expected exit 1 and its one line, got: $err"
[[ -e $tmp/f.npy ]] && fail "a failed dump left $tmp/f.npy"

# The checkpoint records the transforms: predict takes an image of any
# size through the test transform.
"$PY" - "$tmp/wide.png" <<'PYEOF'
import struct, sys, zlib
w, h = 77, 33
raw = b"".join(b"\0" + bytes((x * 5 + y) % 256 for x in range(3 * w)) for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PYEOF
rm -f "$tmp/d/train/cat/9.png"
out=$("$dptrain" train --dataset folder --data "$tmp/d" --train-transform random-resized-crop:28,flip \
  --test-transform resize:32,center-crop:28 --epochs 1 --batch-size 4 --progress never \
  --checkpoint "$tmp/ck.safetensors" 2>&1) || fail "train with transforms: $out"
out=$("$dptrain" predict --checkpoint "$tmp/ck.safetensors" "$tmp/wide.png" 2>&1)
[[ $? == 0 && $out == "$tmp/wide.png: "* ]] || fail "predict through the test transform: $out"
out=$("$dptrain" eval --checkpoint "$tmp/ck.safetensors" --dataset folder --data "$tmp/d" 2>&1)
[[ $? == 0 && $out == "test acc: "* ]] || fail "eval of a folder of any sizes through the test transform: $out"

# --help: every flag has its default.
help=$("$dptrain" data --help)
for flag in --train-transform --workers --prefetch --bad-images --epoch --count --dump --grid; do
  grep -q -- "^  $flag" <<<"$help" || fail "data --help lacks $flag"
done
grep -q 'OUT.labels.npy' <<<"$help" || fail "data --help does not name the labels' file"

if ((fails)); then exit 1; fi
echo "ok cli_data: dump and grid, 1 and 4 workers and --cache alike, epochs differ, bad paths refused first"

#!/usr/bin/env bash
# A tar set's epoch holds whole batches only (the remainder left out, as the
# loader counts them), so --split-invariant does not warn about a short last
# batch that the run never takes; the same images as a folder (whose last
# batch is short: 22 = 2 x 8 + 6, 6 samples being 3 blocks of 2, not a power
# of two) do warn.
# Usage: cli_tar_last_batch.sh path/to/dptrain
set -u
dptrain=$1
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# 2 classes of 11 training and 2 test 12 x 12 PNGs, written by zlib alone.
"$PY" - "$tmp/f" <<'PYEOF'
import os, struct, sys, zlib
root = sys.argv[1]
def png(path, w, h, v):
    raw = b"".join(b"\0" + bytes((v + 7 * x + 3 * y) % 256 for x in range(3 * w)) for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for split, n in (("train", 11), ("test", 2)):
    for c in range(2):
        os.makedirs(f"{root}/{split}/c{c}")
        for i in range(n):
            png(f"{root}/{split}/c{c}/{i:02d}.png", 12, 12, 90 * c + i)
PYEOF
"$dptrain" shards "$tmp/f" "$tmp/s" --shard-size 4 >"$tmp/shards.log" 2>&1 ||
  fail "dptrain shards: $(tail -2 "$tmp/shards.log")"

run=(train --model lenet --batch-size 8 --epochs 1 --threads 1 --split-invariant 2 --progress never
     --workers 2 --train-transform resize:16x16 --test-transform resize:16x16)
"$dptrain" "${run[@]}" --dataset folder --data "$tmp/f" >"$tmp/folder.log" 2>&1 ||
  fail "folder: $(tail -3 "$tmp/folder.log")"
grep -q 'the last batch of each epoch holds 6 of the 22 training samples' "$tmp/folder.log" ||
  fail "the folder's short last batch (6 of 22) was not warned about: $(grep -i warn "$tmp/folder.log")"
"$dptrain" "${run[@]}" --dataset tar --data "$tmp/s" --verbose >"$tmp/tar.log" 2>&1 ||
  fail "tar: $(tail -3 "$tmp/tar.log")"
grep -q '22 samples in 6 shards, 2 lanes of 4 rows a batch: 2 batches an epoch, 6 samples left out' \
  "$tmp/tar.log" || fail "the tar run did not leave 6 samples out: $(grep 'tar:' "$tmp/tar.log")"
if grep -q 'last batch' "$tmp/tar.log"; then
  fail "the tar run warned about a last batch it does not have: $(grep 'last batch' "$tmp/tar.log")"
fi
if ((fails)); then exit 1; fi
echo "ok cli_tar_last_batch: the folder's short last batch warned about, the tar set's (whole batches) not"

#!/usr/bin/env bash
# A corrupt image met by one of 4 decoder threads ends `dptrain train` in
# seconds, never hanging: --bad-images stop exits non-zero with one error
# line naming the file (the folder's path; the tar shard and its member),
# --bad-images skip trains on and counts the images in each epoch's
# skipped_images. The same set as a folder and as tar shards (dptrain shards
# copies the bytes as they are). Each run has 30 s (timeout's 124 is a hang).
# Usage: cli_bad_images_run.sh path/to/dptrain
set -u
dptrain=$1
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# 2 classes of 11 training and 2 test 12 x 12 PNGs; c0/03.png cut to 60
# bytes, c1/05.png a text file.
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
cut = f"{root}/train/c0/03.png"
data = open(cut, "rb").read()
open(cut, "wb").write(data[:60])
open(f"{root}/train/c1/05.png", "w").write("not an image\n")
PYEOF
"$dptrain" shards "$tmp/f" "$tmp/s" --shard-size 4 >"$tmp/shards.log" 2>&1 ||
  fail "dptrain shards: $(tail -2 "$tmp/shards.log")"

run=(train --model lenet --batch-size 4 --epochs 2 --threads 1 --progress never --workers 4
     --prefetch 3 --train-transform resize:16x16 --test-transform resize:16x16 --no-shuffle)
# name, --dataset, --data, what the error line names, skipped images in each epoch
for set in "folder folder $tmp/f train/c[01]/0[35].png 2,2" \
           "tar tar $tmp/s train-00000[0-5].tar:.000000[0-9][0-9].png 2,2"; do
  read -r name dataset data names skips <<<"$set"
  SECONDS=0
  timeout 30 "$dptrain" "${run[@]}" --dataset "$dataset" --data "$data" >"$tmp/$name-stop.log" 2>&1
  rc=$? took=$SECONDS
  echo "$name, --bad-images stop: exit $rc after ${took}s: $(grep 'error:' "$tmp/$name-stop.log")"
  if ((rc == 124)); then
    fail "$name, stop: still running after 30 s (a hang)"
  elif ((rc == 0)); then
    fail "$name, stop: the run ended 0 past a corrupt image"
  fi
  [[ $(grep -c 'error:' "$tmp/$name-stop.log") == 1 ]] ||
    fail "$name, stop: not one error line: $(cat "$tmp/$name-stop.log")"
  grep 'error:' "$tmp/$name-stop.log" | grep -Eq "$names" ||
    fail "$name, stop: the error does not name the corrupt file ($names)"
  SECONDS=0
  timeout 30 "$dptrain" "${run[@]}" --dataset "$dataset" --data "$data" --bad-images skip \
    --metrics "$tmp/$name.jsonl" >"$tmp/$name-skip.log" 2>&1
  rc=$? took=$SECONDS
  got=$(grep -o '"skipped_images": [0-9]*' "$tmp/$name.jsonl" 2>/dev/null | grep -o '[0-9]*$' |
        paste -sd, -)
  echo "$name, --bad-images skip: exit $rc after ${took}s, skipped images by epoch: ${got:-none}"
  ((rc == 124)) && fail "$name, skip: still running after 30 s (a hang)"
  ((rc == 0)) || fail "$name, skip: exit $rc: $(tail -2 "$tmp/$name-skip.log")"
  [[ $got == "$skips" ]] || fail "$name, skip: skipped_images ${got:-none} by epoch, not $skips"
done
if ((fails)); then exit 1; fi
echo "ok cli_bad_images_run: corrupt images stop the run with their line or are counted, folder and tar, 4 workers, no hang"

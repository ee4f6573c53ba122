#!/usr/bin/env bash
# Training from tar shards end to end: `dptrain shards` of a 10-class
# folder, then --dataset tar reaches the folder's test accuracy within 0.01
# over the same epochs; two ranks under mpirun each open only their lanes'
# shards (half of them an epoch) and train the same weights as one process,
# bit for bit (--split-invariant: any difference is the data's); dptrain
# data dumps the same samples on 1 or 4 decoder threads.
# Usage: cli_tar_train.sh path/to/dptrain
set -u
dptrain=$1
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# 10 classes of 14 x 14 PNGs, one hue each with noise, written by zlib alone:
# 32 training and 10 test images a class.
"$PY" - "$tmp/f" <<'PYEOF'
import colorsys, os, random, struct, sys, zlib
root = sys.argv[1]
rng = random.Random(0)
def png(path, w, h, rgb):
    raw = b"".join(b"\0" + bytes(max(0, min(255, rgb[x % 3] + rng.randint(-12, 12)))
                                 for x in range(3 * w)) for y in range(h))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for split, n in (("train", 32), ("test", 10)):
    for c in range(10):
        rgb = [int(255 * v) for v in colorsys.hsv_to_rgb(c / 10, 0.9, 0.9)]
        os.makedirs(f"{root}/{split}/c{c}")
        for i in range(n):
            png(f"{root}/{split}/c{c}/{i:02d}.png", 14, 14, rgb)
PYEOF
"$dptrain" shards "$tmp/f" "$tmp/s" --shard-size 20 >"$tmp/shards.log" 2>&1 ||
  fail "dptrain shards: $(tail -2 "$tmp/shards.log")"

# 320 samples in 16 shards; a batch of 32: 8 lanes (the largest <= 8
# dividing 32 and 16) of 2 shards, 4 rows each: 10 batches, nothing left out.
run=(train --model lenet --batch-size 32 --epochs 8 --optimizer adam --lr 0.01 --threads 1
     --conv-algo direct --split-invariant 2 --progress never --workers 2)
acc() { tail -1 "$1" | grep -o '"test_acc": [0-9.]*' | grep -o '[0-9.]*$'; }
"$dptrain" "${run[@]}" --dataset folder --data "$tmp/f" --metrics "$tmp/folder.jsonl" \
  >"$tmp/folder.log" 2>&1 ||
  fail "folder: $(tail -3 "$tmp/folder.log")"
"$dptrain" "${run[@]}" --dataset tar --data "$tmp/s" --verbose --metrics "$tmp/tar.jsonl" \
  --checkpoint "$tmp/one.safetensors" >"$tmp/tar.log" 2>&1 || fail "tar: $(tail -3 "$tmp/tar.log")"
a=$(acc "$tmp/folder.jsonl") b=$(acc "$tmp/tar.jsonl")
echo "test accuracy after 8 epochs: folder ${a:-?}, tar shards ${b:-?}"
grep -q 'tar: 320 samples in 16 shards, 8 lanes of 4 rows a batch: 10 batches an epoch, 0 samples left out' \
  "$tmp/tar.log" || fail "the run did not print its lanes: $(grep 'tar:' "$tmp/tar.log")"
"$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 0.01 or a < 0.9)" \
  "${a:-0}" "${b:-1}" || fail "test accuracy: folder ${a:-?}, tar ${b:-?} (must be >= 0.9 and within 0.01)"

# dptrain data: the samples the step gets, the same bytes on 1 or 4 decoder
# threads (the lanes' order and each sample's own crop and flip).
data=(data --dataset tar --data "$tmp/s" --train-transform random-resized-crop:12,flip
      --test-transform center-crop:12 --batch-size 32 --count 40)
"$dptrain" "${data[@]}" --workers 1 --dump "$tmp/a.npy" >"$tmp/data.log" 2>&1 ||
  fail "data --dump: $(tail -2 "$tmp/data.log")"
"$dptrain" "${data[@]}" --workers 4 --dump "$tmp/b.npy" >/dev/null 2>&1 || fail "data --workers 4"
cmp -s "$tmp/a.npy" "$tmp/b.npy" && cmp -s "$tmp/a.labels.npy" "$tmp/b.labels.npy" ||
  fail "data --workers 4 dumped other samples than --workers 1"
[[ $(stat -c %s "$tmp/a.npy") -gt $((40 * 3 * 12 * 12 * 4)) ]] || fail "the dump is not 40 samples of 3x12x12"

if "$dptrain" --version | grep -q '^multi-process (MPI): off'; then
  echo "SKIP cli_tar_train (ranks): this build has no MPI"
  ((fails)) && exit 1
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "SKIP cli_tar_train (ranks): no mpirun on PATH (apt-get install openmpi-bin)"
  ((fails)) && exit 1
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under AddressSanitizer the ranks check every access but not leaks, as
# tests/util/mpiutil.c runs them: Open MPI's components keep memory after
# MPI_Finalize that no suppression can name.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun -np 2 "$dptrain" "${run[@]}" --dataset tar --data "$tmp/s" --verbose \
  --checkpoint "$tmp/ranks.safetensors" >"$tmp/ranks.log" 2>&1 ||
  fail "mpirun -np 2: $(tail -3 "$tmp/ranks.log")"
# Each rank reads lanes 4r..4r+3: 8 of the 16 shards an epoch, 64 in 8.
for r in 0 1; do
  n=$(grep -o "rank $r on [^:]*: training set: [0-9]* image files opened" "$tmp/ranks.log" |
      grep -o '[0-9]* image files' | grep -o '^[0-9]*')
  echo "rank $r opened ${n:-?} shards in 8 epochs"
  [[ ${n:-x} == 64 ]] || fail "rank $r opened ${n:-?} shards, not its 8 an epoch"
done
"$PY" - "$tmp/one.safetensors" "$tmp/ranks.safetensors" <<'PYEOF' || fail "2 ranks' weights differ from 1 process's"
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    data = b[8 + n:]
    return {k: data[v["data_offsets"][0]:v["data_offsets"][1]]
            for k, v in head.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
bad = [k for k in a if a[k] != b[k]]
assert not bad, bad
print(f"{len(a)} tensors identical")
PYEOF
if ((fails)); then exit 1; fi
echo "ok cli_tar_train: accuracy as the folder's, each rank opened its lanes' shards, the weights equal one process's"

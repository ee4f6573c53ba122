#!/usr/bin/env bash
# Two ranks under mpirun each decode only their share of a streamed image
# folder (torch.chunk's rows of every global batch: the files each opened,
# counted, add up to the epochs' samples and neither opened them all), and
# train the same weights as one process on one device, bit for bit
# (--split-invariant: any difference is the data's).
# Usage: cli_stream_ranks.sh path/to/dptrain
set -u
dptrain=$1
PY=/usr/bin/python3
if "$dptrain" --version | grep -q '^multi-process (MPI): off'; then
  echo "SKIP cli_stream_ranks: this build has no MPI (install libopenmpi-dev and rebuild)"
  exit 77
fi
if ! command -v mpirun >/dev/null; then
  echo "SKIP cli_stream_ranks: no mpirun on PATH (apt-get install openmpi-bin)"
  exit 77
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

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
sizes = [(40, 30), (23, 57), (64, 64), (31, 18), (50, 90), (33, 33), (70, 41), (19, 25)]
for split in ("train", "test"):
    for c in range(2):
        os.makedirs(f"{root}/{split}/c{c}")
        for i, (w, h) in enumerate(sizes):
            png(f"{root}/{split}/c{c}/{i}.png", w, h, c * 8 + i)
PYEOF

run=(train --dataset folder --data "$tmp/d" --train-transform random-resized-crop:28,flip
     --test-transform resize:32,center-crop:28 --batch-size 4 --epochs 2 --lr 0.05 --threads 1
     --split-invariant 2 --conv-algo direct --progress never --verbose)
"$dptrain" "${run[@]}" --devices 1 --checkpoint "$tmp/one.safetensors" >"$tmp/one.log" 2>&1 ||
  fail "one process: $(tail -3 "$tmp/one.log")"
# Under AddressSanitizer the ranks check every access but not leaks, as
# tests/util/mpiutil.c runs them: Open MPI's components keep memory after
# MPI_Finalize that no suppression can name.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun -np 2 "$dptrain" "${run[@]}" --devices 1 --checkpoint "$tmp/ranks.safetensors" \
  >"$tmp/ranks.log" 2>&1 || fail "mpirun -np 2: $(tail -3 "$tmp/ranks.log")"

# 16 images, 2 epochs: 32 reads in all; each rank half (2 rows of every
# batch of 4), each of its files opened once an epoch (the look at the
# first image is the first read of that file, or not counted where the
# rank does not read it). --conv-algo direct: auto's kernel choice reads
# rows of the set on rank 0 before the first step (src/train/precision.c).
total=0
for r in 0 1; do
  n=$(grep -o "rank $r on [^:]*: training set: [0-9]* image files opened" "$tmp/ranks.log" |
      grep -o '[0-9]* image files' | grep -o '^[0-9]*')
  if [[ -z $n ]]; then fail "rank $r did not say how many files it opened"; continue; fi
  echo "rank $r opened $n files"
  ((n == 16)) || fail "rank $r opened $n files, not its 16"
  total=$((total + n))
done
((total == 32)) || fail "the ranks read $total samples between them, not the 32 of 2 epochs"

# --conv-algo auto times the kernels on a batch of zeros before the first
# step (src/train/precision.c), so it reads no file: one process, one
# epoch, each of the 16 files opened once.
"$dptrain" "${run[@]/direct/auto}" --devices 1 --epochs 1 --conv-algo-cache off \
  >"$tmp/auto.log" 2>&1 || fail "--conv-algo auto: $(tail -3 "$tmp/auto.log")"
n=$(grep -o "training set: [0-9]* image files opened" "$tmp/auto.log" | grep -o '[0-9]*')
echo "--conv-algo auto: $n files opened"
[[ $n == 16 ]] || fail "--conv-algo auto opened ${n:-no count of} files, not 16 (its kernel choice read samples)"

"$PY" - "$tmp/one.safetensors" "$tmp/ranks.safetensors" <<'PYEOF' || fail "2 ranks' weights differ from 1 device's"
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
echo "ok cli_stream_ranks: each rank opened its half, the weights equal one device's"

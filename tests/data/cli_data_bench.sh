#!/usr/bin/env bash
# dptrain data --bench streams: it reads, transforms and counts --count
# samples keeping none of them, so 400 samples of 3 x 256 x 256 floats
# (768 KiB each, 300 MiB together) peak at the RSS of 40 (the loader's
# ring of batches of 8 and the decoders' buffers, about 25 MiB); --dump
# keeps what it writes.
# Usage: cli_data_bench.sh path/to/dptrain
set -u
dptrain=$1
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# 2 classes of 200 copies of a 24 x 18 PNG, written by zlib alone.
"$PY" - "$tmp/d" <<'PYEOF'
import os, shutil, struct, sys, zlib
root = sys.argv[1]
w, h = 24, 18
raw = b"".join(b"\0" + bytes((x * 7 + y * 3) % 256 for x in range(3 * w)) for y in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for split, n in (("train", 200), ("test", 2)):
    for c in ("a", "b"):
        os.makedirs(f"{root}/{split}/{c}")
        for i in range(n):
            open(f"{root}/{split}/{c}/{i}.png", "wb").write(png)
PYEOF

# Under AddressSanitizer a freed block waits in its quarantine (256 MiB by
# default) before it is used again, so a run that frees every batch would
# still grow by the quarantine: keep it small here, where memory is the
# point (the rest of the suite keeps the default).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"

# peak_mb ARGS...: runs dptrain data ARGS, prints its stdout's bench line
# to $tmp/line and its peak RSS in MiB (getrusage of the child).
peak_mb() {
  "$PY" - "$dptrain" "$@" <<'PYEOF'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if r.returncode != 0:
    sys.exit(f"exit {r.returncode}: {r.stdout.strip()}")
sys.stderr.write(r.stdout)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
PYEOF
}

flags=(data --dataset folder --data "$tmp/d" --train-transform random-resized-crop:256
       --test-transform resize:256,center-crop:256 --batch-size 8 --workers 2)
few=$(peak_mb "${flags[@]}" --count 40 --bench 2>"$tmp/few.log") || fail "--bench --count 40: $few"
many=$(peak_mb "${flags[@]}" --count 400 --bench 2>"$tmp/many.log") || fail "--bench --count 400: $many"
grep -q '^bench: 400 samples of 3x256x256 in ' "$tmp/many.log" ||
  fail "--bench --count 400 did not count its 400 samples: $(cat "$tmp/many.log")"
echo "--bench peak RSS: $few MiB for 40 samples, $many MiB for 400"
# Kept, the 360 more samples are 270 MiB more.
if [[ $few =~ ^[0-9]+$ && $many =~ ^[0-9]+$ ]]; then
  ((many <= few + 40)) || fail "--bench --count 400 peaked at $many MiB against $few MiB for 40: it keeps the samples"
fi
# --dump keeps them (and writes them): its peak is theirs.
dump=$(peak_mb "${flags[@]}" --count 400 --dump "$tmp/x.npy" 2>"$tmp/dump.log") ||
  fail "--dump --count 400: $dump"
echo "--dump peak RSS: $dump MiB for 400 samples"
if [[ $few =~ ^[0-9]+$ && $dump =~ ^[0-9]+$ ]]; then
  ((dump >= few + 250)) || fail "--dump --count 400 peaked at $dump MiB: the 300 MiB of samples not held?"
fi

if ((fails)); then exit 1; fi
echo "ok cli_data_bench: --bench counts 400 samples at the peak RSS of 40; --dump holds them"

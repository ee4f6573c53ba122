#!/usr/bin/env bash
# What --jpeg-scale auto saves (images/s of dp_transform_decode, one
# thread) and how far its pixels are from off's, for the ImageNet recipe's
# two lists, on N photograph-like JPEGs (smooth shapes, edges and noise,
# quality 90) of 300-500 px a side written by Pillow (Debian's python3-pil),
# and on the same at 1000-2000 px, where the DCT scales come into play.
# Usage: bench/jpeg_scale.sh [BUILD_DIR] [N]   (docs/transforms.md has its output)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
n=${2:-300}
cmake --build "$build" --target bench_jpeg_scale -j2 >/dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 - "$dir" "$n" <<'PY'
import sys, numpy as np
from PIL import Image
out, n = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(38)
for name, lo, hi in (("small", 300, 501), ("large", 1000, 2001)):
    for k in range(n if name == "small" else n // 6):
        r, c = (int(v) for v in rng.integers(lo, hi, 2))
        y, x = np.mgrid[0:r, 0:c].astype(np.float32) * (300.0 / lo)
        planes = []
        for ch in range(3):
            fy, fx = rng.uniform(0.01, 0.08, 2)
            v = 128 + 60 * np.sin(fy * y + ch) * np.cos(fx * x - ch)
            cy, cx, rad = rng.uniform(0, r), rng.uniform(0, c), rng.uniform(20, max(r, c) / 3)
            v += 70 * (((y * lo / 300 - cy) ** 2 + (x * lo / 300 - cx) ** 2) < rad * rad)
            v += rng.normal(0, 8, (r, c))
            planes.append(np.clip(v, 0, 255).astype(np.uint8))
        Image.fromarray(np.stack(planes, -1)).save("%s/%s_%04d.jpg" % (out, name, k), quality=90)
PY
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs; one decoding thread"
specs="random-resized-crop:224;resize:256,center-crop:224"
echo "$n JPEGs of 300-500 px:"
"$build/bench_jpeg_scale" "$specs" "$dir"/small_*.jpg
echo "$((n / 6)) JPEGs of 1000-2000 px:"
"$build/bench_jpeg_scale" "$specs" "$dir"/large_*.jpg

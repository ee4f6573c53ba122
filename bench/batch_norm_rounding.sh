#!/usr/bin/env bash
# How far two float32 runs of ResNet-18 that compute the same thing drift
# apart, next to how far 2 devices with --sync-bn drift from 1 device.
#
# usage: bench/batch_norm_rounding.sh [MODEL=resnet18] [STEPS=20]
#
# ResNet-18 on 28x28 images ends in batch norms over 1x1 maps, whose small
# variances magnify a rounding difference at every step. SyncBatchNorm on 2
# devices normalises each layer over the whole batch as 1 device does, but
# sums in another order, so after 20 steps it cannot be within 1e-5 of 1
# device -- no more than 1 device with another convolution algorithm is
# (same maths, other rounding). This prints, for lr 1e-4, 1e-3 and 1e-2 (SGD,
# momentum 0.9, batch 32, the first STEPS*32 Fashion-MNIST images, in order):
#   sync      1 device vs 2 devices --sync-bn (both direct convolutions)
#   rounding  1 device direct vs 1 device --conv-algo auto
#   no sync   1 device vs 2 devices normalising their own halves
# each as max |difference| / max |value| over the weights and over the
# running statistics. MODEL may be an ONNX file (torchvision's export).
#
# Environment: BUILD (default build), NO_BUILD=1. Exits 1 if a run fails.
set -euo pipefail
MODEL=${1:-resnet18}
STEPS=${2:-20}
BUILD=${BUILD:-build}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ ${NO_BUILD:-0} = 1 ]] || cmake --build "$root/$BUILD" -j 2 --target dptrain >/dev/null
bin=$root/$BUILD/dptrain
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
grep -m1 "model name" /proc/cpuinfo

run() { # NAME ARGS...: trains STEPS steps into $dir/NAME.safetensors
  local name=$1
  shift
  "$bin" train --model "$MODEL" --limit-train $((STEPS * 32)) --limit-test 32 --batch-size 32 \
    --epochs 1 --momentum 0.9 --progress never --checkpoint "$dir/$name.safetensors" "$@" \
    >"$dir/$name.log" 2>&1 || { cat "$dir/$name.log"; exit 1; }
}

compare() { # A B: max |A - B| / max |A| over weights, then running statistics
  python3 - "$dir/$1.safetensors" "$dir/$2.safetensors" <<'PY'
import json, struct, sys
from array import array
def load(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    head, data = json.loads(b[8:8 + n]), b[8 + n:]
    out = {}
    for k, v in head.items():
        if k != '__metadata__' and v['dtype'] == 'F32' and not k.startswith('_'):
            s, e = v['data_offsets']
            out[k] = array('f', data[s:e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
line = []
for group, running in (('weights', False), ('running statistics', True)):
    keys = [k for k in a if ('running' in k) == running]
    d = max(max(abs(x - y) for x, y in zip(a[k], b[k])) for k in keys)
    s = max(max(abs(x) for x in a[k]) for k in keys)
    line.append(f'{group} {d / s:.2e}')
print(', '.join(line))
PY
}

for lr in 0.0001 0.001 0.01; do
  run one --lr $lr --devices 1 --conv-algo direct
  run sync --lr $lr --devices 2 --sync-bn --conv-algo direct
  run auto --lr $lr --devices 1 --conv-algo auto
  run halves --lr $lr --devices 2 --conv-algo direct
  echo "lr $lr, $STEPS steps:"
  echo "  sync      $(compare one sync)"
  echo "  rounding  $(compare one auto)"
  echo "  no sync   $(compare one halves)"
done

#!/usr/bin/env bash
# How far two float32 runs of ResNet-18 that compute the same thing drift
# apart, next to how far 2 devices with --sync-bn drift from 1 device.
#
# usage: bench/batch_norm_rounding.sh [MODEL=resnet18] [STEPS=20]
#
# Batch norm's statistics and backward sums are taken in double
# (src/device/cpu/batch_norm_train.c), so 1 device and 2 devices with
# --sync-bn normalise with the same floats, and their first step's
# gradients differ only where the replicas' gradients are added in another
# order (~1e-8 of a weight). But a step is a discontinuous function of the
# weights: a value that a rounding difference moves across a ReLU's 0 or a
# max pool's tie moves its whole gradient. Such flips compound: the
# difference grows by orders of magnitude a step whatever the learning
# rate, so after 20 steps it is far above 1e-5 -- as it is between 1 device
# and 1 device with another convolution algorithm (same maths, other
# rounding). This prints (SGD, momentum 0.9, batch 32, the first STEPS*32
# Fashion-MNIST images, in order):
#   at lr 1e-4, after 1, 2, 3, 5 and STEPS steps: 1 device vs 2 devices
#     --sync-bn (the growth);
#   at lr 1e-4, 1e-3 and 1e-2 after STEPS steps:
#     sync      1 device vs 2 devices --sync-bn (both direct convolutions)
#     rounding  1 device direct vs 1 device --conv-algo auto
#     no sync   1 device vs 2 devices normalising their own halves
# each as max |difference| / max |value| over the weights and over the
# running statistics; then, where /usr/bin/python3 has torch and
# torchvision, PyTorch's own NCHW and channels_last runs of torchvision's
# ResNet-18 (bench/resnet_layout_rounding.py), which part the same way.
# MODEL may be an ONNX file (torchvision's export).
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

run() { # NAME ARGS...: trains $n steps (STEPS unless set) into $dir/NAME.safetensors
  local name=$1
  shift
  "$bin" train --model "$MODEL" --limit-train $((${n:-$STEPS} * 32)) --limit-test 32 --batch-size 32 \
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

echo "lr 0.0001, 1 device vs 2 devices --sync-bn:"
for n in 1 2 3 5 $STEPS; do
  run one --lr 0.0001 --devices 1 --conv-algo direct
  run sync --lr 0.0001 --devices 2 --sync-bn --conv-algo direct
  echo "  after $n step(s): $(compare one sync)"
done
unset n
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
if /usr/bin/python3 -c 'import torch, torchvision' >/dev/null 2>&1; then
  /usr/bin/python3 "$root/bench/resnet_layout_rounding.py" "$STEPS" 2>&1 | grep -v Warning
fi

#!/usr/bin/env bash
# PyTorch's "Single-Machine Model Parallel Best Practices" comparison on this
# machine: ResNet-18 (28x28 Fashion-MNIST, batch 256) on CPU devices of one
# core each (--threads 1), time per training step of
#   1 device          the whole model on one core
#   model parallel    --pipeline 2, one micro-batch: the tutorial's plain
#                     split, each device idle while the other works
#   pipelined         --pipeline 2 --micro-batches M for each M in MS; the
#                     best is reported
#   data parallel     --devices 2: each device the whole model, half the batch
#
# usage: bench/pipeline.sh [ROUNDS=3]
#
# Each round runs every configuration once, one after another (so they see
# the same machine), for 2 epochs of STEPS steps; the first epoch is warm-up
# and the step time is the second epoch's epoch_seconds / STEPS (from
# --metrics). Prints each configuration's median over the rounds, its ratio
# to 1 device, and the bubble fraction the pipelined runs measured.
#
# Environment: STEPS (default 2), MS (micro-batch counts, default "2 4 8"),
# BATCH (256), MODEL (resnet18), BUILD (build), NO_BUILD=1 (use the binary as
# it is). Exits 1 if the build or a run fails.
set -euo pipefail

ROUNDS=${1:-3}
STEPS=${STEPS:-2}
MS=${MS:-2 4 8}
BATCH=${BATCH:-256}
MODEL=${MODEL:-resnet18}
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
[[ -n ${NO_BUILD:-} ]] || make -s build >/dev/null
bin=$BUILD/dptrain
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

configs=("1-device|--devices 1" "model-parallel|--devices 2 --pipeline 2")
for m in $MS; do
    configs+=("pipelined-M$m|--devices 2 --pipeline 2 --micro-batches $m")
done
configs+=("data-parallel|--devices 2")

echo "$MODEL, batch $BATCH, CPU devices of one core, $STEPS steps timed per run, $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
    for c in "${configs[@]}"; do
        name=${c%%|*}
        args=${c#*|}
        # shellcheck disable=SC2086
        "$bin" train --model "$MODEL" $args --threads 1 --batch-size "$BATCH" --epochs 2 \
            --limit-train $((BATCH * STEPS)) --limit-test 256 --progress never \
            --metrics "$dir/$name.$r.jsonl" >/dev/null
        python3 - "$dir/$name.$r.jsonl" "$STEPS" "$name" <<'EOF'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1])][-1]
bubble = last.get("bubble_fraction")
print(f"  round: {sys.argv[3]:16s} {last['epoch_seconds'] / int(sys.argv[2]):7.2f} s/step"
      + (f", bubble {bubble:.3f}" if bubble is not None else ""))
EOF
    done
done

python3 - "$dir" "$STEPS" "${configs[@]}" <<'EOF'
import glob, json, statistics, sys
d, steps, configs = sys.argv[1], int(sys.argv[2]), [c.split("|")[0] for c in sys.argv[3:]]
rows = {}
for name in configs:
    runs = [[json.loads(l) for l in open(f)][-1] for f in sorted(glob.glob(f"{d}/{name}.*.jsonl"))]
    step = statistics.median(r["epoch_seconds"] / steps for r in runs)
    bubble = [r["bubble_fraction"] for r in runs if "bubble_fraction" in r]
    rows[name] = (step, statistics.median(bubble) if bubble else None)
one = rows["1-device"][0]
print(f"{'configuration':18s} {'s/step':>8s} {'vs 1 device':>12s} {'bubble':>7s}")
for name, (step, bubble) in rows.items():
    b = f"{bubble:7.3f}" if bubble is not None else f"{'':7s}"
    print(f"{name:18s} {step:8.2f} {one / step:11.2f}x {b}")
piped = {n: s for n, (s, _) in rows.items() if n.startswith("pipelined")}
best = min(piped, key=piped.get)
print(f"best pipelined: {best} ({one / piped[best]:.2f}x of 1 device); "
      f"model parallel {one / rows['model-parallel'][0]:.2f}x; "
      f"data parallel {one / rows['data-parallel'][0]:.2f}x")
EOF

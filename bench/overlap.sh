#!/usr/bin/env bash
# How much of the gradient communication across 2 MPI ranks the buckets hide
# behind the backward pass, on a throttled link.
#
# usage: bench/overlap.sh [RATE=200mbit]
#
# Two network namespaces joined by a veth pair (as tests/comm/test_mpi.c's
# two_network_namespaces), each end throttled with tc netem (RATE, plus
# DELAY one way, in both directions; tbf with RATE only where the kernel has
# no netem), one rank in each namespace (mpirun in
# the first, a launch agent standing in for ssh, Open MPI's TCP transport
# only). Per model and --grad-compress none|bf16, runs
#   --bucket-mb 0      one allreduce after the backward pass
#   --bucket-mb 25     the default buckets
#   --bucket-mb 0.05   (LeNet only: its 0.5 MB of gradients in 3 buckets)
# each rank --devices 1 --threads 1, EPOCHS epochs of STEPS steps, and reads
# the --metrics lines: the step time (epoch_seconds / steps), comm_ms (time
# per step inside the gradient collectives), exposed_comm_ms (time per step
# the update waited for the last bucket after the backward pass), each the
# median over the epochs after the first (warm-up). Prints per run
#   hidden     1 - exposed / comm, as measured in that run
#   hid vs 0   1 - exposed / (comm of the --bucket-mb 0 run, same compression)
#   speed-up   step of --bucket-mb 0 / step of this run
#   MB a>b/b>a bytes the veth carried each way during the run (tx_bytes)
# then one summary line per model, and last bench/mpi_paper.py with the
# ResNet-18 hidden fraction measured at the default buckets.
#
# RATE: tc rate syntax (200mbit, 1gbit, 100mbit). The default 200mbit makes
# ResNet-18's allreduce about as long as its compute at batch 64 per rank on
# one core of this machine (~3.7 s per step, measured unthrottled with 1
# rank): for 2 ranks Open MPI's MPI_Iallreduce (libnbc, in place) picks its
# binomial algorithm, a reduce to rank 0 and then a broadcast, so the 44.7 MB
# cross the link one way and then the other: ~3.6 s at 200mbit, ~7.2 s at
# 100mbit. (MPIRUN_ARGS="--mca coll_libnbc_iallreduce_algorithm 4", recursive
# doubling, sends both ways at once: half the time.) bf16 gathers 22 MB each
# way at once: ~0.9 s at 200mbit.
#
# Environment:
#   RATE          link rate each way (default 200mbit); DELAY one-way delay (1ms)
#   MODELS        models to run (default "lenet resnet18")
#   EPOCHS        epochs per run, the first dropped (default 4)
#   LENET_BATCH   global LeNet batch (default 256), LENET_STEPS steps/epoch (8)
#   RESNET_BATCH  global ResNet-18 batch (default 128 = 64 per rank),
#                 RESNET_STEPS steps/epoch (2)
#   BIND          mpirun --bind-to (default none: with one "host" per
#                 namespace, core would put both ranks on core 0)
#   BUILD         build folder (default build)
#   NO_BUILD=1    do not build; use build/dptrain as it is
#   DPTRAIN_ARGS  extra arguments for every `dptrain train` (split on spaces)
#   MPIRUN_ARGS   extra arguments for mpirun (split on spaces)
#
# Needs root (ip netns, tc), iproute2, mpirun, python3. Exits 2 on a bad
# argument, 1 if a tool is missing, the namespaces cannot be made, the build
# or a run fails. The namespaces are deleted on exit.
set -euo pipefail

RATE=${1:-${RATE:-200mbit}}
DELAY=${DELAY:-1ms}
MODELS=${MODELS:-lenet resnet18}
EPOCHS=${EPOCHS:-4}
LENET_BATCH=${LENET_BATCH:-256}
LENET_STEPS=${LENET_STEPS:-8}
RESNET_BATCH=${RESNET_BATCH:-128}
RESNET_STEPS=${RESNET_STEPS:-2}
BIND=${BIND:-none}
DPTRAIN_ARGS=${DPTRAIN_ARGS:-}
MPIRUN_ARGS=${MPIRUN_ARGS:-}
usage() {
    echo "usage: $0 [RATE=200mbit]   ($1)" >&2
    exit 2
}
[[ $RATE =~ ^[0-9]+(\.[0-9]+)?([kmg]?bit|[kmg]?bps)$ ]] ||
    usage "RATE a tc rate such as 100mbit or 1gbit, got '$RATE'"
[[ $DELAY =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] || usage "DELAY a tc time such as 1ms, got '$DELAY'"
for v in EPOCHS LENET_BATCH LENET_STEPS RESNET_BATCH RESNET_STEPS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || usage "$v a positive integer, got '${!v}'"
done
((EPOCHS >= 2)) || usage "EPOCHS at least 2 (the first is dropped), got $EPOCHS"
for m in $MODELS; do
    [[ $m == lenet || $m == resnet18 ]] || usage "MODELS from lenet resnet18, got '$m'"
done
[[ $BIND =~ ^(none|core|socket|hwthread)$ ]] || usage "BIND none|core|socket|hwthread, got '$BIND'"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DPTRAIN="$ROOT/$BUILD/dptrain"
PY=$(command -v python3 || true)
[[ -n $PY ]] || { echo "error: python3 is needed to read the metrics JSON" >&2; exit 1; }
MPIRUN=$(command -v mpirun || true)
[[ -n $MPIRUN ]] || { echo "error: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
command -v ip >/dev/null && command -v tc >/dev/null ||
    { echo "error: ip and tc are needed (apt-get install iproute2)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "error: root is needed for ip netns and tc" >&2; exit 1; }
if [[ ${NO_BUILD:-0} != 1 ]] && ! make build BUILD="$BUILD" >&2; then
    echo "error: the build failed" >&2
    exit 1
fi
[[ -x $DPTRAIN ]] || { echo "error: no $DPTRAIN (build first)" >&2; exit 1; }
# mpirun refuses root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

TMP=$(mktemp -d "${TMPDIR:-/tmp}/overlap.XXXXXX")
NSA="dpov-a$$" NSB="dpov-b$$" VA="dova$$" VB="dovb$$"
NET="10.232.$(($$ % 200 + 20))"
cleanup() {
    ip netns del "$NSA" 2>/dev/null || true
    ip netns del "$NSB" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! { ip netns add "$NSA" && ip netns add "$NSB" &&
    ip link add "$VA" type veth peer name "$VB" &&
    ip link set "$VA" netns "$NSA" && ip link set "$VB" netns "$NSB" &&
    ip -n "$NSA" addr add "$NET.1/24" dev "$VA" && ip -n "$NSB" addr add "$NET.2/24" dev "$VB" &&
    ip -n "$NSA" link set "$VA" up && ip -n "$NSB" link set "$VB" up &&
    ip -n "$NSA" link set lo up && ip -n "$NSB" link set lo up; } 2>"$TMP/ip.log"; then
    echo "error: cannot make two network namespaces joined by a veth pair:" >&2
    cat "$TMP/ip.log" >&2
    exit 1
fi
# The rate and delay on each end's egress: both directions. netem where
# the kernel has it; else tbf (rate only: no delay qdisc without netem).
SHAPE="netem rate $RATE + delay $DELAY"
for pair in "$NSA $VA" "$NSB $VB"; do
    read -r ns dev <<<"$pair"
    if ! tc -n "$ns" qdisc add dev "$dev" root netem delay "$DELAY" rate "$RATE" limit 100000 \
            2>/dev/null; then
        SHAPE="tbf rate $RATE, no delay (this kernel has no sch_netem)"
        tc -n "$ns" qdisc add dev "$dev" root tbf rate "$RATE" burst 128kb latency 200ms ||
            { echo "error: neither tc netem nor tbf works on $dev" >&2; exit 1; }
    fi
done

cat >"$TMP/rsh" <<EOF
#!/bin/sh
# ssh HOST COMMAND, where HOST is an address of a namespace
host=\$1; shift
case "\$host" in
  $NET.1) ns=$NSA ;;
  $NET.2) ns=$NSB ;;
  *) echo "netns-rsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
chmod 755 "$TMP/rsh"
printf '%s.1 slots=1\n%s.2 slots=1\n' "$NET" "$NET" >"$TMP/hosts"
# shellcheck disable=SC2206  # split on spaces on purpose
MPI=(ip netns exec "$NSA" "$MPIRUN" --hostfile "$TMP/hosts" --mca plm_rsh_agent "$TMP/rsh"
    --mca btl self,tcp --mca btl_tcp_if_include "$NET.0/24" --mca oob_tcp_if_include "$NET.0/24"
    --bind-to "$BIND" -np 2 $MPIRUN_ARGS)
if ! timeout 60 "${MPI[@]}" /bin/true >"$TMP/true.log" 2>&1; then
    echo "error: mpirun -np 2 /bin/true across the namespaces failed:" >&2
    cat "$TMP/true.log" >&2
    exit 1
fi

tx() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

# "step_ms comm_ms exposed_ms allreduce_ms" of a metrics file: medians over
# the epochs after the first.
metrics_read() {
    "$PY" - "$1" "$2" <<'PYEOF'
import json, statistics, sys
steps = int(sys.argv[2])
rows = [json.loads(l) for l in open(sys.argv[1]) if '"epoch_seconds"' in l]
rows = [r for r in rows if r["epoch"] > 1]
if not rows:
    sys.exit("no epoch after the first in " + sys.argv[1])
med = lambda k: statistics.median(r.get(k, 0.0) for r in rows)
print("%.1f %.1f %.1f %.1f" % (1e3 * statistics.median(r["epoch_seconds"] / steps for r in rows),
                               med("comm_ms"), med("exposed_comm_ms"), med("allreduce_ms")))
PYEOF
}

# run MODEL BATCH STEPS BUCKET_MB COMPRESS: prints "step comm exposed
# allreduce MB_ab MB_ba nbuckets".
run() {
    local model=$1 batch=$2 steps=$3 mb=$4 comp=$5
    local tag="$model.$mb.$comp" a0 b0 a1 b1
    local metrics="$TMP/$tag.jsonl" log="$TMP/$tag.log"
    rm -f "$metrics"
    a0=$(tx "$NSA" "$VA") b0=$(tx "$NSB" "$VB")
    # shellcheck disable=SC2086  # DPTRAIN_ARGS split on spaces on purpose
    if ! timeout 900 "${MPI[@]}" "$DPTRAIN" train --model "$model" --devices 1 --threads 1 \
            --batch-size "$batch" --epochs "$EPOCHS" --limit-train $((batch * steps)) \
            --limit-test 64 --progress never --verbose --bucket-mb "$mb" --grad-compress "$comp" \
            --metrics "$metrics" $DPTRAIN_ARGS >"$log" 2>&1; then
        echo "error: dptrain train --model $model --bucket-mb $mb --grad-compress $comp" \
            "failed across the namespaces; its output:" >&2
        cat "$log" >&2
        return 1
    fi
    a1=$(tx "$NSA" "$VA") b1=$(tx "$NSB" "$VB")
    local nb
    nb=$(grep -c -E "rank 0 .*bucket [0-9]+:" "$log" || true)
    read -r s c e r < <(metrics_read "$metrics" "$steps") || return 1
    echo "$s $c $e $r $(((a1 - a0) / 1000000)) $(((b1 - b0) / 1000000)) $nb"
}

echo "2 ranks in 2 network namespaces over a veth pair, each way $SHAPE,"
echo "each rank --devices 1 --threads 1, mpirun --bind-to $BIND; $EPOCHS epochs per run, first dropped;"
echo "on $(nproc) cores, $(uptime | sed 's/.*load/load/')"
declare -A HIDDEN SUMMARY
for model in $MODELS; do
    if [[ $model == lenet ]]; then
        batch=$LENET_BATCH steps=$LENET_STEPS sizes="0 25 0.05"
    else
        batch=$RESNET_BATCH steps=$RESNET_STEPS sizes="0 25"
    fi
    echo
    echo "$model, global batch $batch ($((batch / 2)) per rank), $steps steps per epoch"
    printf '%-5s %7s %6s %9s %9s %11s %7s %9s %9s %10s\n' compr bucketMB nbuck "step ms" "comm ms" \
        "exposed ms" hidden "hid vs 0" speed-up "MB a>b/b>a"
    for comp in none bf16; do
        base_step="" base_comm=""
        for mb in $sizes; do
            read -r s c e r ab ba nb < <(run "$model" "$batch" "$steps" "$mb" "$comp") || exit 1
            [[ -n ${nb:-} ]] || exit 1
            if [[ $mb == 0 ]]; then
                base_step=$s base_comm=$c
            fi
            read -r hid hid0 sp < <("$PY" -c '
import sys
s, c, e, s0, c0 = map(float, sys.argv[1:])
f = lambda x: "%.0f%%" % (100 * x)
print(f(1 - e / c) if c > 0 else "-", f(1 - e / c0) if c0 > 0 else "-", "%.2fx" % (s0 / s))
' "$s" "$c" "$e" "$base_step" "$base_comm")
            printf '%-5s %7s %6s %9.1f %9.1f %11.1f %7s %9s %9s %10s\n' "$comp" "$mb" "$nb" "$s" "$c" \
                "$e" "$hid" "$hid0" "$sp" "$ab/$ba"
            if [[ $mb == 25 ]]; then
                HIDDEN[$model.$comp]=$("$PY" -c 'import sys; c, e = map(float, sys.argv[1:]); print("%.3f" % max(0.0, 1 - e / c) if c > 0 else "0")' "$c" "$e")
            fi
            # The summary: the last (smallest for LeNet) bucket size.
            SUMMARY[$model.$comp]="$mb $s $c $e $base_step $base_comm"
        done
    done
    for comp in none bf16; do
        read -r mb s c e s0 c0 <<<"${SUMMARY[$model.$comp]}"
        "$PY" -c '
import sys
m, rate, comp, mb = sys.argv[1:5]
s, c, e, s0, c0 = map(float, sys.argv[5:])
print("%s @ %s%s: buckets (--bucket-mb %s) hide %.0f%% of comm; step %.2fx faster than "
      "--bucket-mb 0 (there: comm %.0f ms, comm/compute %.2f)"
      % (m, rate, "" if comp == "none" else " bf16", mb,
         100 * (1 - e / c) if c > 0 else 0, s0 / s, c0, c0 / max(s0 - c0, 1e-9)))
' "$model" "$RATE" "$comp" "$mb" "$s" "$c" "$e" "$s0" "$c0"
    done
done

if [[ -n ${HIDDEN[resnet18.none]:-} ]]; then
    echo
    cmd=(bench/mpi_paper.py --hidden "${HIDDEN[resnet18.none]}")
    echo "on paper, with the ResNet-18 hidden fraction measured here: ${cmd[*]}"
    "$PY" "${cmd[@]}"
fi

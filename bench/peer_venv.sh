# Sourced by bench/lenet_vs_peers.sh and bench/resnet_vs_peers.sh.
#
# peer_venv NAME MODULE PIP_ARGS...: a virtual environment at
# bench/.venv-NAME (git ignores bench/.venv*), made on first use with
# `pip install PIP_ARGS` from PyPI, in which `import MODULE` must work.
# Sets PEER_PY to its python, or to "" after printing one line saying why
# the peer is left out (no network, no wheel for this Python or CPU), so
# that the scripts go on with the other peers.
#
# Only IPEX is pinned: each IPEX release runs on one torch minor release
# (IPEX 2.8 on torch 2.8.*), which pip does not pick on its own. Its torch
# is PyPI's wheel, with its CUDA libraries (about 3 GB that a CPU peer never
# loads; PyTorch's CPU wheel index, which IPEX's guide names, is not always
# reachable where PyPI is).

PEER_IPEX_VERSION=2.8.0
PEER_IPEX_TORCH="torch==2.8.*"

peer_venv() {
    local name=$1 module=$2 root venv log
    shift 2
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    venv="$root/bench/.venv-$name"
    PEER_PY=""
    if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c "import $module" >/dev/null 2>&1; then
        PEER_PY="$venv/bin/python"
        return 0
    fi
    echo "== installing $name ($*) into bench/.venv-$name" >&2
    log="$venv.log"
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet "$@"; } >"$log" 2>&1; then
        echo "peer $name: left out: pip could not install $* (log: bench/.venv-$name.log:" \
             "$(tail -n 1 "$log" 2>/dev/null))"
        return 0
    fi
    if ! "$venv/bin/python" -c "import $module" >>"$log" 2>&1; then
        echo "peer $name: left out: installed, but 'import $module' fails on this CPU" \
             "($(tail -n 1 "$log"))"
        return 0
    fi
    PEER_PY="$venv/bin/python"
}

# peer_venv_for PEER: peer_venv with the packages of tf, ipex or jax.
peer_venv_for() {
    case $1 in
    tf) peer_venv tf tensorflow tensorflow-cpu numpy ;;
    ipex) peer_venv ipex intel_extension_for_pytorch "$PEER_IPEX_TORCH" "intel-extension-for-pytorch==$PEER_IPEX_VERSION" numpy psutil ;;
    jax) peer_venv jax jax jax numpy ;;
    *) echo "error: no venv for peer '$1'" >&2; exit 2 ;;
    esac
}

# peer_configs MODEL ARGS TORCH_ARGS: appends to the array `configs`
# (bench/vs_peers.py --config) the configurations of every peer named in
# PEERS, in that order: torch (bench/pytorch_venv.sh's pytorch_configs with
# TORCH_ARGS, after pytorch_anchor_check), and bench/peer_*.py --model MODEL
# ARGS, installing each peer's venv on first use; a peer that cannot be
# installed is reported in one line and left out.
#   tf:   fp32 and mixed_bfloat16, each with and without jit_compile=True;
#   ipex: ipex.optimize bf16 (autocast) and fp32, channels_last for ResNet;
#   jax:  jit, fp32 and bf16.
peer_configs() {
    local model=$1 args=$2 torch_args=$3 p v cl=""
    [[ $model == resnet18 ]] && cl=" --channels-last"
    for p in $PEERS; do
        if [[ $p == torch ]]; then
            pytorch_anchor_check /usr/bin/python3
            pytorch_venv
            pytorch_configs "$torch_args"
            continue
        fi
        peer_venv_for "$p"
        [[ -n $PEER_PY ]] || continue
        local run="$PEER_PY bench/peer_$p.py --model $model $args"
        case $p in
        tf)
            v=$("$PEER_PY" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))')
            configs+=(--config "tf $v fp32=peer:$run"
                --config "tf $v mixed_bfloat16=peer:$run --bf16"
                --config "tf $v fp32 jit_compile=peer:$run --jit"
                --config "tf $v mixed_bfloat16 jit_compile=peer:$run --bf16 --jit")
            ;;
        ipex)
            v=$("$PEER_PY" -c 'import importlib.metadata as m; print(m.version("intel-extension-for-pytorch"))')
            configs+=(--config "ipex $v bf16${cl:+ channels_last}=peer:$run --bf16$cl"
                --config "ipex $v fp32${cl:+ channels_last}=peer:$run$cl")
            ;;
        jax)
            v=$("$PEER_PY" -c 'import importlib.metadata as m; print(m.version("jax"))')
            configs+=(--config "jax $v fp32=peer:$run" --config "jax $v bf16=peer:$run --bf16")
            ;;
        esac
    done
}

# peers_check: PEERS (default "torch tf ipex jax") names only known peers,
# each once.
peers_check() {
    PEERS=${PEERS-torch tf ipex jax}
    local p seen=" "
    for p in $PEERS; do
        [[ $seen == *" $p "* ]] && { echo "error: PEERS='$PEERS': '$p' twice" >&2; exit 2; }
        seen+="$p "
        case $p in
        torch | tf | ipex | jax) ;;
        *) echo "error: PEERS='$PEERS': '$p' is not one of torch tf ipex jax" >&2; exit 2 ;;
        esac
    done
    if [[ ${IMITATE:-} == avx2 ]]; then  # oneDNN (TF, IPEX) and ATen read bench_imitation's
        export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_cpu_max_isa=AVX2"
    fi
}

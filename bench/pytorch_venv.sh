# Sourced by the bench scripts that compare with PyTorch on the CPU.
#
# pytorch_venv: the current PyTorch release from PyPI, in a virtual
# environment at bench/.venv that git ignores, installed on first use (pip
# pulls its CUDA wheels too: about 5 GB). Sets PYTORCH_VENV_PY to its
# python; where PyPI cannot be reached it says so and sets it to "", and
# the scripts go on with Debian's python3-torch 1.13 alone.
#
# pytorch_configs (below): the PyTorch configurations both scripts compare.
#
# bench_imitation: IMITATE=avx2 makes this CPU imitate an AVX2-only one for
# both sides (oneDNN's DNNL_MAX_CPU_ISA and PyTorch's ATEN_CPU_CAPABILITY;
# a newer CPU can imitate an older one, never the other way round). Sets
# BENCH_ISA to what the run has: amx, avx512_bf16, avx512 or avx2.

pytorch_venv() {
    local root venv
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    venv="$root/bench/.venv"
    PYTORCH_VENV_PY=""
    if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
        PYTORCH_VENV_PY="$venv/bin/python"
        return 0
    fi
    echo "== installing the current PyTorch from PyPI into bench/.venv (about 5 GB)" >&2
    if ! { python3 -m venv "$venv" && "$venv/bin/pip" install --quiet torch numpy; } >&2; then
        echo "warning: the current PyTorch could not be installed from PyPI (no network, or" \
             "no python3-venv); going on with Debian's python3-torch 1.13 alone" >&2
        return 0
    fi
    PYTORCH_VENV_PY="$venv/bin/python"
}

bench_imitation() {
    local flags
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
    case ${IMITATE:-} in
    "") ;;
    avx2)
        export DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
        BENCH_ISA=avx2
        return 0
        ;;
    *)
        echo "error: IMITATE=$IMITATE: only avx2 can be imitated" >&2
        exit 2
        ;;
    esac
    if grep -qw amx_bf16 <<<"$flags"; then BENCH_ISA=amx
    elif grep -qw avx512_bf16 <<<"$flags"; then BENCH_ISA=avx512_bf16
    elif grep -qw avx512f <<<"$flags"; then BENCH_ISA=avx512
    else BENCH_ISA=avx2
    fi
}

# pytorch_configs SCRIPT_ARGS: appends to the array `configs` the PyTorch
# configurations of bench/vs_peers.py for bench/SCRIPT ARGS: the current
# release (when pytorch_venv found it) in fp32 and bf16 autocast, each NCHW
# and channels_last, then Debian's python3-torch in fp32.
pytorch_configs() {
    local args=$1 v
    if [[ -n $PYTORCH_VENV_PY ]]; then
        v=$("$PYTORCH_VENV_PY" -c 'import torch; print(torch.__version__.split("+")[0])')
        configs+=(--config "torch $v fp32=pytorch:$PYTORCH_VENV_PY $args"
            --config "torch $v fp32 channels_last=pytorch:$PYTORCH_VENV_PY $args --channels-last"
            --config "torch $v bf16=pytorch:$PYTORCH_VENV_PY $args --bf16"
            --config "torch $v bf16 channels_last=pytorch:$PYTORCH_VENV_PY $args --bf16 --channels-last")
    fi
    v=$(/usr/bin/python3 -c 'import torch; print(torch.__version__.split("a")[0])')
    configs+=(--config "torch $v (Debian) fp32=pytorch:/usr/bin/python3 $args")
}

# Sourced by the bench scripts that compare with PyTorch on the CPU.
#
# pytorch_anchor_check PY: makes sure PyTorch runs at its best here before
# any ratio is reported. Debian's python3-torch links the reference BLAS
# (about 5 GFLOP/s) unless libopenblas0-pthread is installed, which would
# make every ratio against it meaningless; so this installs python3-torch
# and libopenblas0-pthread where missing (scripts/install-deps.sh), sets
# the OpenBLAS environment (pytorch_openblas_env), times a 1024x1024 float32
# matmul with 2 torch threads, prints it, and exits 3 when it is under
# 50 GFLOP/s: then the anchor is broken, and no ratio is printed.

# One OpenBLAS thread under torch's own two (the 2 cores are not
# oversubscribed), and on a CPU with AVX-512 OPENBLAS_CORETYPE=SkylakeX:
# OpenBLAS 0.3.21 does not recognise recent AVX-512 EPYCs and falls back to
# a slower kernel. Where the CPU has no AVX-512 that core type would stop
# on an illegal instruction, so its own detection stays.
pytorch_openblas_env() {
    export OPENBLAS_NUM_THREADS=1
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
        export OPENBLAS_CORETYPE=SkylakeX
    fi
}

pytorch_anchor_check() {
    local py=$1 root gflops
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
    if [[ $py == /usr/bin/python3 ]]; then
        "$root/scripts/install-deps.sh" python3-torch libopenblas0-pthread >&2 || {
            echo "error: could not install python3-torch and libopenblas0-pthread" >&2; exit 3; }
    fi
    if ! "$py" -c 'import torch' >/dev/null 2>&1; then
        echo "error: $py cannot import torch" >&2
        exit 3
    fi
    pytorch_openblas_env
    gflops=$("$py" - <<'PY'
import time, torch
torch.set_num_threads(2)
a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
for _ in range(3):
    a @ b
best = float("inf")
for _ in range(5):
    t = time.perf_counter()
    for _ in range(5):
        a @ b
    best = min(best, (time.perf_counter() - t) / 5)
print(f"{2 * 1024**3 / best / 1e9:.1f}")
PY
)
    echo "PyTorch anchor: $py, torch $("$py" -c 'import torch; print(torch.__version__)'), matmul" \
         "${gflops:-(failed)} GFLOP/s (2 threads, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-auto})"
    if ! awk -v g="${gflops:-0}" 'BEGIN { exit !(g >= 50) }'; then
        echo "error: PyTorch's matmul runs at $gflops GFLOP/s (< 50): the anchor is broken" \
             "(reference BLAS? apt-get install libopenblas0-pthread); no ratio reported" >&2
        exit 3
    fi
}

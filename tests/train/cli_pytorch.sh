#!/usr/bin/env bash
# dptrain's safetensors checkpoints and PyTorch agree, both ways, for LeNet
# and ResNet-18 (tests/util/pytorch_compat.py holds the seeds' PyTorch models):
#   1. `dptrain train --checkpoint F` writes F; `dptrain eval` and PyTorch
#      (load_state_dict, eval mode) give the same test accuracy (+-0.005);
#   2. PyTorch writes a state dict F (pytorch_compat.py --save-init: the
#      seed's init, a few SGD steps, then --fit-head so that the model is far
#      from chance); `dptrain eval` of F and PyTorch agree, and are far from
#      chance (a misloaded tensor would not be);
#   3. `dptrain train --init F --checkpoint G` (a few small steps from that
#      model); G evaluated by both agrees and is still far from chance.
# Without torch in /usr/bin/python3 it exits 77, which CTest reports as
# skipped; `make test-interop` installs torch and sets DP_REQUIRE_TORCH=1,
# which turns a missing torch into a failure.
#
# And for model files (examples/models/d2l_lenet.txt, d2l's LeNet as an
# nn.Sequential body): a short `dptrain train --model FILE` run's checkpoint
# loads strictly into nn.Sequential(*[eval("nn." + line) for line in lines]),
# which gives the test accuracy `dptrain eval` prints (all 4 decimals) and
# counts 61,706 parameters. With PyTorch's default init a short run leaves
# that sigmoid LeNet at chance (in PyTorch too), so the same file with ReLU
# for Sigmoid is checked as well, and must reach 0.5: a misloaded tensor
# would show there.
#
# Usage: cli_pytorch.sh path/to/dptrain
# Environment: CLI_PYTORCH_MODELS (default "lenet resnet18 d2l_lenet").
set -u
bin=$1
PY=/usr/bin/python3
compat=$(cd "$(dirname "${BASH_SOURCE[0]}")/../util" && pwd)/pytorch_compat.py
compare_py=$(dirname "$compat")/compare.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0

if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  if [[ ${DP_REQUIRE_TORCH:-0} == 1 ]]; then
    echo "FAIL: $PY cannot import torch, and DP_REQUIRE_TORCH=1 (make test-interop) needs it"
    exit 1
  fi
  echo "SKIP cli_pytorch: python3-torch is not installed (make test-interop installs it)"
  exit 77
fi
# One OpenBLAS thread under PyTorch's own, SkylakeX kernels where the CPU
# has AVX-512 (bench/pytorch_anchor.sh).
source "$(dirname "${BASH_SOURCE[0]}")/../../bench/pytorch_anchor.sh"
pytorch_openblas_env

ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { # fail NAME [LOG...]: prints the logs indented
  local name=$1; shift
  fails=$((fails + 1)); echo "FAIL $name"
  [[ $# -gt 0 ]] && sed 's/^/     /' "$@"
}

# acc_of LOG: the number after the first "test acc: " in LOG (empty if none).
acc_of() { sed -n 's/^test acc: \([0-9.]*\).*/\1/p' "$1" | head -n 1; }

# run LOG -- command...: runs it with stdout+stderr to LOG, echoing the time.
run() {
  local log=$1; shift 2
  local t0=$SECONDS rc
  "$@" >"$log" 2>&1
  rc=$?
  echo "     ($((SECONDS - t0)) s, exit $rc) $*"
  return $rc
}

# compare NAME FILE MODEL LIMIT MIN: `dptrain eval` and PyTorch on FILE,
# first LIMIT test images; they must agree within 0.005 and, if MIN is not
# empty, both be >= MIN.
compare() {
  local name=$1 file=$2 model=$3 limit=$4 min=$5 d p
  if ! run "$dir/d.log" -- "$bin" eval --model "$model" --checkpoint "$file" --limit-test "$limit"; then
    fail "$name: dptrain eval failed" "$dir/d.log"; return
  fi
  if ! run "$dir/p.log" -- "$PY" "$compat" --model "$model" --checkpoint "$file" --limit-test "$limit"; then
    fail "$name: pytorch_compat.py failed" "$dir/p.log"; return
  fi
  d=$(acc_of "$dir/d.log"); p=$(acc_of "$dir/p.log")
  if [[ -z $d || -z $p ]]; then
    fail "$name: no 'test acc:' line (dptrain '$d', pytorch '$p')" "$dir/d.log" "$dir/p.log"; return
  fi
  if python3 "$compare_py" close "$d" "$p" 0 0.005000001 &&
     { [[ -z $min ]] || { python3 "$compare_py" at-least "$d" "$min" &&
                          python3 "$compare_py" at-least "$p" "$min"; }; }; then
    ok "$name: dptrain $d, pytorch $p"
  else
    fail "$name: dptrain $d, pytorch $p (need |diff| <= 0.005${min:+, both >= $min})" \
      "$dir/d.log" "$dir/p.log"
  fi
}

# Sanitizer builds (Debug, instrumented) are far slower: smaller ResNet runs.
slow=0
if [[ -n ${DP_BUILD_DIR:-} && -f $DP_BUILD_DIR/CMakeCache.txt ]] &&
   grep -Eq '^DP_SANITIZE:STRING=.+' "$DP_BUILD_DIR/CMakeCache.txt"; then
  slow=1
fi

# sequential_file NAME FILE PARAMS LR MIN: trains FILE briefly, then
# `dptrain eval` and PyTorch's nn.Sequential of FILE's modules on its
# checkpoint must print the same accuracy, at least MIN, and PyTorch must
# count PARAMS parameters.
sequential_file() {
  local name=$1 file=$2 params=$3 lr=$4 min=$5 ckpt=$dir/$1.safetensors d p n
  if ! run "$dir/train.log" -- "$bin" train --model "$file" --epochs 1 --lr "$lr" \
       --limit-train 12800 --batch-size 64 --limit-test 1000 --checkpoint "$ckpt" \
       --progress never "${@:6}" || [[ ! -s $ckpt ]]; then
    fail "$name: train --model $file --checkpoint" "$dir/train.log"; return
  fi
  if ! run "$dir/d.log" -- "$bin" eval --model "$file" --checkpoint "$ckpt" --limit-test 1000; then
    fail "$name: dptrain eval failed" "$dir/d.log"; return
  fi
  if ! run "$dir/p.log" -- "$PY" "$compat" --model "$file" --checkpoint "$ckpt" --limit-test 1000; then
    fail "$name: nn.Sequential(...).load_state_dict(strict=True)" "$dir/p.log"; return
  fi
  d=$(acc_of "$dir/d.log"); p=$(acc_of "$dir/p.log")
  n=$(sed -n 's/^params: \([0-9]*\)$/\1/p' "$dir/p.log")
  if [[ -n $d && $d == "$p" ]] && python3 "$compare_py" at-least "$d" "$min"; then
    ok "$name: strict load into nn.Sequential; dptrain eval $d, pytorch $p"
  else
    fail "$name: dptrain eval '$d', pytorch '$p' (need the same 4 decimals, >= $min)" \
      "$dir/d.log" "$dir/p.log"
  fi
  if [[ $n == "$params" ]]; then
    ok "$name: pytorch counts $n parameters"
  else
    fail "$name: pytorch counts '$n' parameters, expected $params" "$dir/p.log"
  fi
}

examples=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../examples/models" && pwd)
for model in ${CLI_PYTORCH_MODELS:-lenet resnet18 d2l_lenet}; do
  case $model in
    d2l_lenet)
      echo "== $model"
      sequential_file "$model" "$examples/d2l_lenet.txt" 61706 0.9 0
      sed 's/Sigmoid()/ReLU()/' "$examples/d2l_lenet.txt" >"$dir/relu_lenet.txt"
      sequential_file "$model with ReLU" "$dir/relu_lenet.txt" 61706 0.1 0.5
      # ReLU6, Hardswish, Hardsigmoid, GELU, SiLU, ELU and SELU: PyTorch's
      # modules, computing what dptrain computes on the same weights.
      sequential_file "$model with newer activations" "$examples/lenet_activations.txt" 69762 \
        0.003 0.5 --optimizer adam
      # PReLU's slopes as nn.PReLU's "N.weight", LogSoftmax at the end.
      sequential_file "$model with PReLU" "$examples/lenet_prelu.txt" 61834 0.1 0.5
      # MaxPool2d and AvgPool2d with ceil_mode=True, count_include_pad=False.
      sequential_file "$model with ceil_mode pools" "$examples/lenet_ceil.txt" 82826 0.1 0.5
      continue ;;
    lenet)
      train_args=(--limit-train 2560 --batch-size 64 --limit-test 1000)
      limit=1000 init_args=(--steps 5 --fit-head 1000) min=0.4
      tune_args=(--limit-train 640 --batch-size 64 --lr 0.003) ;;
    resnet18)
      # ~2.7 GFLOP per sample per training step: keep it small on a CPU.
      if [[ $slow == 1 ]]; then
        train_args=(--limit-train 32 --batch-size 32 --limit-test 256)
        limit=256 init_args=(--steps 1 --fit-head 256) min=0.3
        tune_args=(--limit-train 32 --batch-size 32 --lr 0.001)
      else
        train_args=(--limit-train 64 --batch-size 32 --limit-test 256)
        limit=256 init_args=(--steps 1 --fit-head 256) min=0.3
        tune_args=(--limit-train 64 --batch-size 32 --lr 0.001)
      fi ;;
    *) echo "unknown model '$model' in CLI_PYTORCH_MODELS"; exit 2 ;;
  esac
  echo "== $model"

  # 1. dptrain -> PyTorch: a tiny training run's checkpoint.
  ckpt=$dir/$model.safetensors
  if run "$dir/train.log" -- "$bin" train --model "$model" --epochs 1 --lr 0.1 "${train_args[@]}" \
        --checkpoint "$ckpt" --progress never && [[ -s $ckpt ]]; then
    ok "$model: train --checkpoint writes $(stat -c %s "$ckpt") bytes"
    compare "$model: trained checkpoint, dptrain eval = pytorch" "$ckpt" "$model" "$limit" ""
  else
    fail "$model: train --checkpoint" "$dir/train.log"
  fi

  # 2. PyTorch -> dptrain: the seed's init, a few steps, head fitted.
  init=$dir/$model.init.safetensors
  if run "$dir/init.log" -- "$PY" "$compat" --model "$model" --save-init "$init" "${init_args[@]}" &&
     [[ -s $init ]]; then
    ok "$model: pytorch_compat.py --save-init ${init_args[*]}"
    compare "$model: PyTorch state dict, dptrain eval = pytorch" "$init" "$model" "$limit" "$min"
  else
    fail "$model: pytorch_compat.py --save-init" "$dir/init.log"
    continue
  fi

  # 3. PyTorch -> dptrain -> PyTorch: train --init, a few small steps.
  tuned=$dir/$model.tuned.safetensors
  if run "$dir/tune.log" -- "$bin" train --model "$model" --init "$init" --epochs 1 "${tune_args[@]}" \
        --limit-test "$limit" --checkpoint "$tuned" --progress never && [[ -s $tuned ]]; then
    ok "$model: train --init (PyTorch's file) --checkpoint"
    compare "$model: --init then checkpoint, dptrain eval = pytorch" "$tuned" "$model" "$limit" "$min"
  else
    fail "$model: train --init --checkpoint" "$dir/tune.log"
  fi
done

# The reader rejects a state dict that lacks a tensor (here: LeNet's b4).
# The file's name holds no "b4", so only a message that names the missing
# tensor itself matches.
if [[ -s $dir/lenet.init.safetensors ]]; then
  partial=$dir/lenet.partial.safetensors
  if ! "$PY" - "$compat" "$dir/lenet.init.safetensors" "$partial" >"$dir/out" 2>"$dir/err" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("pc", sys.argv[1])
pc = importlib.util.module_from_spec(spec); spec.loader.exec_module(pc)
state, _ = pc.read_safetensors(sys.argv[2])
del state["b4"]
pc.write_safetensors(sys.argv[3], state)
EOF
  then
    fail "writing a LeNet state dict without b4" "$dir/out" "$dir/err"
  elif [[ ! -s $partial ]]; then
    fail "writing a LeNet state dict without b4: no $partial"
  else
    "$PY" "$compat" --model lenet --checkpoint "$partial" --limit-test 10 \
      >"$dir/out" 2>"$dir/err"
    rc=$?
    if [[ $rc -eq 1 ]] && grep -qF 'Missing key(s): b4' "$dir/err"; then
      ok "pytorch_compat.py rejects a missing tensor: $(cat "$dir/err")"
    else
      fail "pytorch_compat.py on a missing tensor: exit $rc, no 'Missing key(s): b4'" \
        "$dir/out" "$dir/err"
    fi
    "$bin" eval --model lenet --checkpoint "$partial" --limit-test 10 >"$dir/out" 2>"$dir/err"
    rc=$?
    if [[ $rc -eq 0 ]]; then
      fail "dptrain eval accepts a checkpoint without b4" "$dir/out" "$dir/err"
    elif grep -qF "$partial: no tensor 'b4'" "$dir/err"; then
      ok "dptrain eval rejects a missing tensor (exit $rc): $(head -n 1 "$dir/err")"
    else
      fail "dptrain eval on a missing tensor: exit $rc, no \"no tensor 'b4'\"" "$dir/out" "$dir/err"
    fi
  fi
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

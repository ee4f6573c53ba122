#!/usr/bin/env bash
# Bad input gives one line on stderr naming the problem and a non-zero exit.
# Usage: cli_errors.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0

# expect_error NAME PATTERN -- command...: exit status non-zero, exactly one
# line on stderr, matching PATTERN, nothing on stdout.
expect_error() {
  local name=$1 pattern=$2; shift 3
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$? lines
  lines=$(wc -l <"$dir/err")
  if [[ $rc -ne 0 && $lines -eq 1 && ! -s "$dir/out" ]] && grep -Eq -- "$pattern" "$dir/err"; then
    passes=$((passes + 1)); echo "ok   $name: exit $rc: $(cat "$dir/err")"
  else
    fails=$((fails + 1)); echo "FAIL $name: exit $rc, $lines stderr lines, expected /$pattern/"
    sed 's/^/     /' "$dir/err" "$dir/out"
  fi
}

# A small valid data set: 8 training and 4 test images of 28x28.
source "$(dirname "${BASH_SOURCE[0]}")/tiny_idx_set.sh"
good=$dir/good
tiny_idx_set "$good"
gzip -k "$good"/*-ubyte

# The valid set trains (a sanity check that the failures below are the files' fault).
if "$bin" train --data "$good" --epochs 1 --batch-size 4 --progress never >"$dir/ok" 2>&1 &&
   grep -q '^test acc: ' "$dir/ok"; then
  passes=$((passes + 1)); echo "ok   valid tiny data set trains: $(cat "$dir/ok")"
else
  fails=$((fails + 1)); echo "FAIL valid tiny data set: $(cat "$dir/ok")"
fi

trunc=$dir/trunc; mkdir -p "$trunc"; cp "$good"/*.gz "$trunc/"
size=$(stat -c %s "$trunc/train-images-idx3-ubyte.gz")
head -c $((size / 2)) "$good/train-images-idx3-ubyte.gz" >"$trunc/train-images-idx3-ubyte.gz"
expect_error "truncated .gz" "train-images-idx3-ubyte.gz.*(truncated|expected)" -- \
  "$bin" train --data "$trunc" --epochs 1

plain=$dir/plain; mkdir -p "$plain"; cp "$good"/*-ubyte "$plain/"
head -c 1000 "$good/train-images-idx3-ubyte" >"$plain/train-images-idx3-ubyte"
expect_error "truncated plain file" "train-images-idx3-ubyte.*expected" -- \
  "$bin" train --data "$plain" --epochs 1

magic=$dir/magic; mkdir -p "$magic"; cp "$good"/*-ubyte "$magic/"
printf '\x01\x02\x08\x01' | dd of="$magic/train-labels-idx1-ubyte" conv=notrunc status=none
expect_error "wrong magic" "train-labels-idx1-ubyte.*magic" -- \
  "$bin" train --data "$magic" --epochs 1

expect_error "missing directory" "$dir/nowhere.*(no such|not found|missing)" -- \
  "$bin" train --data "$dir/nowhere" --epochs 1
expect_error "batch size 0" "--batch-size 0" -- "$bin" train --batch-size 0
expect_error "negative lr" "--lr -1" -- "$bin" train --lr -1
expect_error "lr not a number" "--lr abc" -- "$bin" train --lr abc
expect_error "unknown model" "--model nope.*unknown model" -- "$bin" train --model nope
expect_error "unknown flag" "unknown option '--bogus'" -- "$bin" train --bogus
expect_error "missing value" "--epochs needs a value" -- "$bin" train --epochs
expect_error "negative bucket size" "--bucket-mb -1" -- "$bin" train --bucket-mb -1
expect_error "bucket size not a number" "--bucket-mb big" -- "$bin" train --bucket-mb big
expect_error "unknown compression" "--grad-compress fp8.*none or bf16" -- "$bin" train --grad-compress fp8
expect_error "epochs 0" "--epochs 0" -- "$bin" train --epochs 0
expect_error "bad plot name" "--plot x.jpg" -- "$bin" train --plot x.jpg
expect_error "unknown command" "unknown command 'fly'" -- "$bin" fly
expect_error "bad device" "unknown device 'gpu:0'" -- "$bin" train --data "$good" --devices gpu:0
# The library names options by the option list's names (`devices`); the
# CLI shows the flag that set them.
expect_error "device list with a trailing comma" "^dptrain: error: --devices cpu:0,: trailing comma$" -- \
  "$bin" train --data "$good" --devices cpu:0,
expect_error "device named twice" "^dptrain: error: --devices cpu:0,cpu:0: cpu:0 is named twice$" -- \
  "$bin" devices --devices cpu:0,cpu:0
expect_error "one device by two names" \
  "^dptrain: error: --devices cpu:0,cpu: cpu:0 and cpu are the same device, cpu:0$" -- \
  "$bin" devices --devices cpu:0,cpu
expect_error "device count out of range" "^dptrain: error: --devices 0: expected a count from 1" -- \
  "$bin" train --data "$good" --devices 0
expect_error "batch smaller than the devices" \
  "^dptrain: error: --batch-size 1 is smaller than the 2 devices: each device needs" -- \
  "$bin" train --data "$good" --batch-size 1 --devices 2 --epochs 1
expect_error "too many epochs" "^dptrain: error: --epochs 100000: expected an integer from 1 to 1000$" -- \
  "$bin" train --data "$good" --batch-size 4 --epochs 100000
expect_error "unwritable metrics" "$dir/no/such/m.jsonl" -- \
  "$bin" train --data "$good" --batch-size 4 --epochs 1 --metrics "$dir/no/such/m.jsonl"

# A build without MPI runs as one process, so under mpirun every rank would
# train alone: it refuses, recognising mpirun by the environment mpirun
# gives its ranks (what dp_dist_launched reads; test_mpi_claims checks that).
if "$bin" --version | grep -q '^multi-process (MPI): off'; then
  for var in OMPI_COMM_WORLD_SIZE=2 PMIX_RANK=0; do
    expect_error "under mpirun ($var) without MPI" "started by mpirun, but this dptrain was built without MPI" -- \
      env "$var" "$bin" train --data "$good" --batch-size 4 --epochs 1
  done
fi

# Checkpoints: truncated, corrupt, or of another model.
ck=$dir/ck.safetensors
# (Every check below is about the checkpoint this run makes: it must succeed.)
if "$bin" train --data "$good" --batch-size 4 --epochs 1 --checkpoint "$ck" --progress never \
     >"$dir/ok" 2>&1 && [[ -s $ck ]]; then
  passes=$((passes + 1)); echo "ok   the run that writes the checkpoint: $(tail -n 1 "$dir/ok")"
else
  fails=$((fails + 1)); echo "FAIL the run that writes the checkpoint:"; sed 's/^/     /' "$dir/ok"
fi
size=$(stat -c %s "$ck")
head -c $((size - 100)) "$ck" >"$dir/cut.safetensors"
expect_error "truncated checkpoint" "cut.safetensors.*(truncated|ends|expected)" -- \
  "$bin" eval --data "$good" --checkpoint "$dir/cut.safetensors"
printf 'not a safetensors file at all' >"$dir/junk.safetensors"
expect_error "corrupt checkpoint" "junk.safetensors" -- \
  "$bin" eval --data "$good" --checkpoint "$dir/junk.safetensors"
expect_error "checkpoint of another model" "a checkpoint of 'lenet', not resnet18" -- \
  "$bin" eval --data "$good" --model resnet18 --checkpoint "$ck"
expect_error "resume into another model" "a checkpoint of 'lenet', not resnet18" -- \
  "$bin" train --data "$good" --model resnet18 --batch-size 4 --epochs 2 --resume "$ck"
expect_error "missing checkpoint" "$dir/none.safetensors" -- \
  "$bin" eval --data "$good" --checkpoint "$dir/none.safetensors"
expect_error "checkpoint into a missing directory" "$dir/no/dir/ck.safetensors" -- \
  "$bin" train --data "$good" --batch-size 4 --epochs 1 --checkpoint "$dir/no/dir/ck.safetensors"
expect_error "eval without a checkpoint" "eval needs --checkpoint" -- "$bin" eval
expect_error "bad --on-checkpoint-error" "--on-checkpoint-error retry.*expected stop or continue" -- \
  "$bin" train --on-checkpoint-error retry
expect_error "empty --on-checkpoint-error" "--on-checkpoint-error.*expected stop or continue" -- \
  "$bin" train --on-checkpoint-error ""
expect_error "--on-checkpoint-error without a value" "--on-checkpoint-error needs a value" -- \
  "$bin" train --on-checkpoint-error

# --dataset: a bad name, and each dataset's missing or broken files, named.
expect_error "--split-invariant of a batch that is not blocks times a power of two" \
  "--split-invariant in blocks of 8 samples: --batch-size 48 is not 8 times a power of two" -- \
  "$bin" train --split-invariant 8 --batch-size 48
expect_error "--split-invariant with more parts than blocks" \
  "--split-invariant in blocks of 8 samples: the batch of 16 cut into 4 parts" -- \
  "$bin" train --split-invariant 8 --batch-size 16 --devices 4
expect_error "--split-invariant 0" "--split-invariant 0: expected an integer from 1" -- \
  "$bin" train --split-invariant 0
expect_error "unknown dataset" "^dptrain: error: --dataset cifar-10: unknown dataset" -- \
  "$bin" train --dataset cifar-10
expect_error "eval: unknown dataset" "^dptrain: error: --dataset svhn: unknown dataset" -- \
  "$bin" eval --checkpoint x.safetensors --dataset svhn
expect_error "mnist without --data" "MNIST: --data is required.*yann.lecun.com/exdb/mnist" -- \
  "$bin" train --dataset mnist
expect_error "mnist files missing" "$dir/nofiles/train-images-idx3-ubyte.gz: no such file.*ossci-datasets" -- \
  bash -c "mkdir -p $dir/nofiles && exec $bin train --dataset mnist --data $dir/nofiles"
expect_error "cifar10 files missing" "$dir/nofiles/data_batch_1.bin: no such file.*cifar-10-binary.tar.gz" -- \
  "$bin" train --dataset cifar10 --data "$dir/nofiles"
mkdir -p "$dir/cifar" && head -c 3072 /dev/zero >"$dir/cifar/data_batch_1.bin"
expect_error "cifar10 short record" "$dir/cifar/data_batch_1.bin: truncated record" -- \
  "$bin" train --dataset cifar10 --data "$dir/cifar"

# --augment and --normalize: their syntax, and a normalisation for another
# number of channels than the data's, named by its flag.
expect_error "bad --augment" "^dptrain: error: --augment crop:0,flip: expected crop:PAD" -- \
  "$bin" train --augment crop:0,flip
expect_error "bad --normalize" "^dptrain: error: --normalize 0.5,0: expected one mean per channel" -- \
  "$bin" train --normalize 0.5,0
expect_error "--normalize for 3 channels on 1" \
  "^dptrain: error: --normalize: 3 means and standard deviations for samples of 1 channel" -- \
  "$bin" train --data "$good" --batch-size 4 --epochs 1 --normalize 0.5,0.5,0.5,0.2,0.2,0.2

# --help lists every flag with its default: each flag as a whole word at
# the start of its entry (--init is not --init-normal), the entry's last
# [...] the default below, and no entry that this list lacks.
help=$("$bin" train --help)
declare -A defaults=(
  [--model]="lenet" [--devices]="1" [--allreduce]="nccl across GPUs, else ring; naive for 3 or more devices with --split-invariant"
  [--threads]="0" [--batch-size]="256" [--lr]="0.2" [--momentum]="0" [--weight-decay]="0; adamw: 0.01"
  [--epochs]="10" [--seed]="0" [--init-normal]="each module's own: PyTorch's default for files"
  [--init-xavier]="off" [--dataset]="fashion-mnist"
  [--data]="fashion-mnist: /usr/share/datasets/fashion-mnist; the others: required"
  [--metrics]="none" [--log-steps]="off" [--log-every]="1" [--plot]="none" [--no-shuffle]="shuffle"
  [--limit-train]="0" [--limit-test]="0" [--sync-bn]="off" [--bucket-mb]="25"
  [--grad-compress]="none" [--pipeline]="off" [--stages]="balanced by FLOPs"
  [--micro-batches]="1" [--schedule]="1f1b" [--verbose]="off"
  [--checkpoint]="none; a stopped run writes dptrain-interrupted.safetensors"
  [--resume]="none" [--init]="the seed's init" [--on-checkpoint-error]="stop"
  [--skip-nonfinite]="stop" [--deterministic]="off" [--split-invariant]="off" [--progress]="auto" [--precision]="fp32"
  [--conv-algo]="auto; direct with --deterministic; the environment's DPTRAIN_CONV_ALGO where set"
  [--conv-algo-cache]="DPTRAIN_CONV_ALGO_CACHE, else \$XDG_CACHE_HOME/dptrain/conv-algos.txt"
  [--no-tf32]="TF32 allowed"
  [--optimizer]="sgd" [--nesterov]="off" [--betas]="0.9,0.999" [--eps]="1e-8"
  [--clip-grad-norm]="off" [--label-smoothing]="0" [--lr-schedule]="constant" [--lr-step]="1"
  [--lr-milestones]="none" [--lr-gamma]="0.1" [--lr-min]="0" [--warmup-steps]="0"
  [--warmup-epochs]="0" [--warmup-start-factor]="0.333333" [--max-lr]="--lr"
  [--pct-start]="0.3" [--save-best]="none" [--early-stop]="off"
  [--tensorboard]="none" [--channels]="the first image's" [--augment]="none"
  [--normalize]="none" [--max-memory]="what this machine has available: MemAvailable and the cgroup's limit"
  [--train-transform]="none; --transform's" [--test-transform]="none; --transform's"
  [--transform]="none" [--jpeg-scale]="auto" [--cache]="streamed from disk" [--workers]="0"
  [--prefetch]="2" [--bad-images]="stop" [--shuffle-buffer]="1000"
  [--shard-lanes]="0: the largest L <= 8 dividing batch_size and the shard count that keeps 9/10 of an epoch, else 1")
# entry FLAG: FLAG's lines of the help, from "  FLAG" to the next option
# or group heading, joined with single spaces.
entry() {
  awk -v f="$1" '/^[^ ]/ { on = 0 } /^  -/ { on = ($1 == f) } on' <<<"$help" | tr -s ' \n' '  ' |
    sed 's/ $//'
}
for flag in "${!defaults[@]}"; do
  text=$(entry "$flag")
  got=$(grep -o '\[[^][]*\]$' <<<"$text")
  if [[ -n $text && $got == "[${defaults[$flag]}]" ]]; then passes=$((passes + 1)); else
    fails=$((fails + 1))
    echo "FAIL train --help: $flag: expected an entry ending [${defaults[$flag]}], got: ${text:-nothing}"
  fi
done
for flag in $(grep -Eo '^  --[a-z0-9-]+' <<<"$help"); do
  if [[ $flag != --help && -z ${defaults[$flag]+x} ]]; then
    fails=$((fails + 1)); echo "FAIL train --help lists $flag, which this test does not check"
  fi
done

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

#!/usr/bin/env bash
# The op list and the module list hold the code to them at build time
# (docs/architecture.md, "How to add an op"): each break below is made in a
# scratch copy of one file and rebuilt with the build's own flags, and must
# fail, where the same step on the untouched file succeeds.
#   1. A module whose line leaves the module list (Dropout): its bind and
#      forward functions in nn/sequential/sequential_modules.c are no longer
#      used, and with warnings as errors that file does not compile.
#   2. An op that leaves the op list (leaky_relu): src/ops/leaky_relu.c
#      names DP__OP_leaky_relu and does not compile.
#   3. A backend that the op list gives an op (its backends column ALL, or
#      ONLY naming it) but that lacks one of the op's functions (the CPU's
#      dp__cpu_leaky_relu_backward, its entries written without it): the
#      library does not link
#      (-Wl,--no-undefined, as the tool's link would fail).
#   4. A backends column naming a backend that is not in the backend list
#      (src/device/backend_list.h): the backends' tables do not compile.
#   5. An op of the op list without its ONNX export rule (leaky_relu's
#      export_leaky_relu in onnx/onnx_export_ops.c): the table of rules,
#      made from the op list, names it and the file does not compile.
# The option list (include/dp/train_option_list.h) the same way:
#   6. An option that leaves the list (bucket_mb) while the code still
#      reads it: src/train/net.c does not compile (no such field).
#   7. A list entry whose kind of value has no parser (VALUE(betas) made
#      VALUE(adam_betas)): src/train/options.c does not compile.
#   8. A message that names an option the list lacks (`bucket_size`):
#      tests/tree/option_names.sh refuses the tree.
# Usage: lists_break.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
src=${DP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
passes=0
ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; [[ -n "${2:-}" ]] && sed 's/^/     /' <<<"$2" | head -20; }

flags_file=$build/CMakeFiles/dp_objects.dir/flags.make
if [[ ! -f $flags_file ]]; then
  echo "FAIL: $flags_file is missing: build first"
  exit 1
fi
flag() { sed -n "s/^$1 = //p" "$flags_file"; }
read -r -a cflags <<<"$(flag C_DEFINES) $(flag C_INCLUDES) $(flag C_FLAGS)"
cc=$(sed -n 's|^# compile C with ||p' "$flags_file")

# compile NAME FILE [INCLUDE_FIRST]: compiles FILE to $tmp/NAME.o.
compile() {
  local extra=()
  [[ -n ${3:-} ]] && extra=(-I"$3")
  "$cc" "${extra[@]}" "${cflags[@]}" -c "$2" -o "$tmp/$1.o" 2>&1
}
# expect_break WHAT CONTROL_OUTPUT CONTROL_STATUS BROKEN_OUTPUT BROKEN_STATUS PATTERN
expect_break() {
  if [[ $3 -ne 0 ]]; then
    fail "$1: the untouched file fails too" "$2"
  elif [[ $5 -eq 0 ]]; then
    fail "$1: the broken copy built"
  elif ! grep -q -- "$6" <<<"$4"; then
    fail "$1: failed, but not naming $6" "$4"
  else
    ok "$1: $(grep -m1 -- "$6" <<<"$4" | sed 's|^.*/||')"
  fi
}

# 1. Dropout's line out of the module list.
mkdir -p "$tmp/inc/nn/sequential"
grep -v '^    X(Dropout,' "$src/src/nn/sequential/module_list.h" >"$tmp/inc/nn/sequential/module_list.h"
if cmp -s "$src/src/nn/sequential/module_list.h" "$tmp/inc/nn/sequential/module_list.h"; then
  fail "module list: no Dropout line to remove"
else
  c_out=$(compile ctl1 "$src/src/nn/sequential/sequential_modules.c"); c_rc=$?
  b_out=$(compile brk1 "$src/src/nn/sequential/sequential_modules.c" "$tmp/inc"); b_rc=$?
  expect_break "a module missing from the module list does not compile" "$c_out" $c_rc "$b_out" \
    $b_rc "forward_dropout"
fi

# 2. leaky_relu's line out of the op list.
mkdir -p "$tmp/inc2/device"
grep -v '^    X(leaky_relu,' "$src/src/device/op_list.h" >"$tmp/inc2/device/op_list.h"
c_out=$(compile ctl2 "$src/src/ops/leaky_relu.c"); c_rc=$?
b_out=$(compile brk2 "$src/src/ops/leaky_relu.c" "$tmp/inc2"); b_rc=$?
expect_break "an op missing from the op list does not compile" "$c_out" $c_rc "$b_out" $b_rc \
  "DP__OP_leaky_relu"

# 3. The CPU's leaky_relu backward gone from its kernel file: its entries
#    (DP__CPU_PASSES, cpu/cpu.h) written out with the forward one alone.
sed 's/^DP__CPU_PASSES(leaky_relu, \(.*\), run)$/static int run_forward(void *p, void *ctx)\
{\
    return run(p, ctx, 0);\
}\
DP__CPU_ENTRY(leaky_relu_forward, \1, run_forward)/' \
  "$src/src/device/cpu/leaky_relu.c" >"$tmp/leaky_relu.c"
link_file=$build/CMakeFiles/dp.dir/link.txt
obj=CMakeFiles/dp_objects.dir/src/device/cpu/leaky_relu.c.o
if cmp -s "$src/src/device/cpu/leaky_relu.c" "$tmp/leaky_relu.c"; then
  fail "leaky_relu.c: no DP__CPU_PASSES(leaky_relu, ...) line to write out"
elif ! grep -q "$obj" "$link_file"; then
  fail "the library's link line has no $obj"
else
  b_obj=$(compile brk3 "$tmp/leaky_relu.c"); b_rc=$?
  if [[ $b_rc -ne 0 ]]; then
    fail "the renamed kernel file does not compile" "$b_obj"
  else
    # The library's own link command, with --no-undefined, into $tmp.
    # The link line is shell words (CMake quotes some paths): let bash split it.
    eval "cmd=($(sed "s|-o [^ ]*|-o $tmp/lib.so|" "$link_file") -Wl,--no-undefined)"
    c_out=$(cd "$build" && "${cmd[@]}" 2>&1); c_rc=$?
    for i in "${!cmd[@]}"; do [[ ${cmd[$i]} == "$obj" ]] && cmd[$i]=$tmp/brk3.o; done
    b_out=$(cd "$build" && "${cmd[@]}" 2>&1); b_rc=$?
    expect_break "a backend lacking an op's kernel does not link" "$c_out" $c_rc "$b_out" $b_rc \
      "undefined reference to .dp__cpu_leaky_relu_backward"
  fi
fi

# 4. The cast line, CPU-only, naming a backend the list lacks as well.
mkdir -p "$tmp/inc4/device"
sed 's/^\(    X(cast, .*\)ONLY(cpu)/\1ONLY(cpu, nosuch)/' "$src/src/device/op_list.h" \
  >"$tmp/inc4/device/op_list.h"
if cmp -s "$src/src/device/op_list.h" "$tmp/inc4/device/op_list.h"; then
  fail "op list: no cast line with ONLY(cpu) to change"
else
  c_out=$(compile ctl4 "$src/src/device/cpu/cpu_device.c"); c_rc=$?
  b_out=$(compile brk4 "$src/src/device/cpu/cpu_device.c" "$tmp/inc4"); b_rc=$?
  expect_break "a backends column naming no backend of the list does not compile" "$c_out" $c_rc \
    "$b_out" $b_rc "DP__BACKEND_nosuch"
fi

# 5. leaky_relu's export rule gone from the exporter's rules.
sed 's/\bexport_leaky_relu\b/export_leaky_relu_gone/' "$src/src/onnx/onnx_export_ops.c" \
  >"$tmp/onnx_export_ops.c"
c_out=$(compile ctl5 "$src/src/onnx/onnx_export_ops.c"); c_rc=$?
b_out=$(compile brk5 "$tmp/onnx_export_ops.c"); b_rc=$?
expect_break "an op without an export rule does not compile" "$c_out" $c_rc "$b_out" $b_rc \
  "export_leaky_relu"

list=$src/include/dp/train_option_list.h
mkdir -p "$tmp/inc6/dp" "$tmp/inc7/dp"

# 6. bucket_mb's entry (its X(...) line and the lines continuing it) out.
awk '/^    X\(parallel, bucket_mb,/ { skip = 1; next } skip && /^      / { next } { skip = 0; print }' \
  "$list" >"$tmp/inc6/dp/train_option_list.h"
if cmp -s "$list" "$tmp/inc6/dp/train_option_list.h"; then
  fail "option list: no bucket_mb entry to remove"
else
  c_out=$(compile ctl6 "$src/src/train/net.c"); c_rc=$?
  b_out=$(compile brk6 "$src/src/train/net.c" "$tmp/inc6"); b_rc=$?
  expect_break "an option the code reads but the list lacks does not compile" "$c_out" $c_rc \
    "$b_out" $b_rc "bucket_mb"
fi

# 7. betas read by a parser that does not exist.
sed 's/VALUE(betas)/VALUE(adam_betas)/' "$list" >"$tmp/inc7/dp/train_option_list.h"
if cmp -s "$list" "$tmp/inc7/dp/train_option_list.h"; then
  fail "option list: no VALUE(betas) to change"
else
  c_out=$(compile ctl7 "$src/src/train/options.c"); c_rc=$?
  b_out=$(compile brk7 "$src/src/train/options.c" "$tmp/inc7"); b_rc=$?
  expect_break "an entry whose value has no parser does not compile" "$c_out" $c_rc "$b_out" \
    $b_rc "dp__option_parse_adam_betas"
fi

# 8. A message naming `bucket_size`, in a scratch tree of the sources.
mkdir -p "$tmp/tree/include" "$tmp/tree/src"
cp -r "$src/include/dp" "$tmp/tree/include/"
cp -r "$src/src/." "$tmp/tree/src/"
c_out=$(bash "$src/tests/tree/option_names.sh" "$tmp/tree" 2>&1); c_rc=$?
sed -i 's/`batch_size` %lld is smaller than the %d devices/`bucket_size` %lld is smaller than the %d devices/' \
  "$tmp/tree/src/train/trainer.c"
b_out=$(bash "$src/tests/tree/option_names.sh" "$tmp/tree" 2>&1); b_rc=$?
expect_break "a message naming an option the list lacks is refused" "$c_out" $c_rc "$b_out" \
  $b_rc "bucket_size"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

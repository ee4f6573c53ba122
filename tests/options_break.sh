#!/usr/bin/env bash
# The option list (include/dp/train_option_list.h) holds the code to it at
# build time, as the op and module lists do (tests/lists_break.sh): each
# break below is made in a scratch copy and rebuilt with the build's own
# flags, and must fail where the untouched file builds.
#   1. An option that leaves the list (bucket_mb) while the code still
#      reads it: src/train/net.c does not compile (no such field).
#   2. A list entry whose kind of value has no parser (VALUE(betas) made
#      VALUE(adam_betas)): src/train/options.c does not compile.
#   3. A message that names an option the list lacks (`bucket_size`):
#      tests/option_names.sh refuses the tree.
# Usage: options_break.sh BUILD_DIR
set -u
build=$(cd "$1" && pwd)
src=${DP_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
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
list=$src/include/dp/train_option_list.h
mkdir -p "$tmp/inc1/dp" "$tmp/inc2/dp"

# 1. bucket_mb's entry (its X(...) line and the lines continuing it) out.
awk '/^    X\(parallel, bucket_mb,/ { skip = 1; next } skip && /^      / { next } { skip = 0; print }' \
  "$list" >"$tmp/inc1/dp/train_option_list.h"
if cmp -s "$list" "$tmp/inc1/dp/train_option_list.h"; then
  fail "option list: no bucket_mb entry to remove"
else
  c_out=$(compile ctl1 "$src/src/train/net.c"); c_rc=$?
  b_out=$(compile brk1 "$src/src/train/net.c" "$tmp/inc1"); b_rc=$?
  expect_break "an option the code reads but the list lacks does not compile" "$c_out" $c_rc \
    "$b_out" $b_rc "bucket_mb"
fi

# 2. betas read by a parser that does not exist.
sed 's/VALUE(betas)/VALUE(adam_betas)/' "$list" >"$tmp/inc2/dp/train_option_list.h"
if cmp -s "$list" "$tmp/inc2/dp/train_option_list.h"; then
  fail "option list: no VALUE(betas) to change"
else
  c_out=$(compile ctl2 "$src/src/train/options.c"); c_rc=$?
  b_out=$(compile brk2 "$src/src/train/options.c" "$tmp/inc2"); b_rc=$?
  expect_break "an entry whose value has no parser does not compile" "$c_out" $c_rc "$b_out" \
    $b_rc "dp__option_parse_adam_betas"
fi

# 3. A message naming `bucket_size`, in a scratch tree of the sources.
mkdir -p "$tmp/tree/include" "$tmp/tree/src"
cp -r "$src/include/dp" "$tmp/tree/include/"
cp -r "$src/src/." "$tmp/tree/src/"
c_out=$(bash "$src/tests/option_names.sh" "$tmp/tree" 2>&1); c_rc=$?
sed -i 's/`batch_size` %lld is smaller than the %d devices/`bucket_size` %lld is smaller than the %d devices/' \
  "$tmp/tree/src/train/trainer.c"
b_out=$(bash "$src/tests/option_names.sh" "$tmp/tree" 2>&1); b_rc=$?
expect_break "a message naming an option the list lacks is refused" "$c_out" $c_rc "$b_out" \
  $b_rc "bucket_size"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

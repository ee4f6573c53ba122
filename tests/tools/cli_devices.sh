#!/usr/bin/env bash
# `dptrain devices` lists the devices, measures them with --bench, and
# rejects bad flags with one line on stderr.
# Usage: cli_devices.sh path/to/dptrain
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; passes=0

ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { # fail NAME: prints the last command's stdout and stderr
  fails=$((fails + 1)); echo "FAIL $1"
  sed 's/^/     /' "$dir/out" "$dir/err"
}

# The device lines of the listing: "cpu:K  T kernel thread(s)".
device_lines() { grep -E '^cpu:[0-9]+ +[0-9]+ kernel threads?$' "$dir/out"; }

# Plain listing: the CPU, no GPUs, and the devices of --devices auto.
if "$bin" devices >"$dir/out" 2>"$dir/err" && [[ ! -s $dir/err ]] &&
   grep -Eq '^CPU: .+, [0-9]+ cores?' "$dir/out" && grep -q '^GPUs: ' "$dir/out" &&
   device_lines | grep -q '^cpu:0 '; then
  ok "devices lists the CPU and cpu:0"
else
  fail "devices lists the CPU and cpu:0"
fi

if "$bin" devices --devices 3 --threads 1 >"$dir/out" 2>"$dir/err" &&
   [[ $(device_lines | cut -d' ' -f1 | tr '\n' ' ') == "cpu:0 cpu:1 cpu:2 " ]] &&
   [[ $(device_lines | grep -c ' 1 kernel thread$') -eq 3 ]]; then
  ok "devices --devices 3 --threads 1 lists cpu:0..cpu:2, 1 thread each"
else
  fail "devices --devices 3 --threads 1 lists cpu:0..cpu:2, 1 thread each"
fi

if "$bin" devices --devices cpu:1 >"$dir/out" 2>"$dir/err" &&
   [[ $(device_lines | cut -d' ' -f1) == "cpu:1" ]]; then
  ok "devices --devices cpu:1 lists cpu:1 alone"
else
  fail "devices --devices cpu:1 lists cpu:1 alone"
fi

# --bench on two devices: a GFLOP/s row per device and one for both at once,
# a GB/s row per device and one each way between them, all positive.
# positive_rows UNIT: how many rows end in "NUMBER UNIT" with NUMBER > 0.
positive_rows() {
  awk -v unit="$1" '$NF == unit && $(NF - 1) + 0 > 0 { n++ } END { print n + 0 }' "$dir/out"
}
if "$bin" devices --devices 2 --threads 1 --bench --seconds 1 >"$dir/out" 2>"$dir/err"; then
  gflops=$(positive_rows GFLOP/s) gbs=$(positive_rows GB/s)
  if [[ $gflops -eq 3 ]] && grep -Eq '^ +all 2 at once .* GFLOP/s$' "$dir/out"; then
    ok "devices --bench: 3 positive GFLOP/s rows"
  else
    fail "devices --bench: expected 3 positive GFLOP/s rows, found $gflops"
  fi
  if [[ $gbs -eq 4 ]] && grep -Eq '^ +cpu:0 -> cpu:1 .* GB/s$' "$dir/out"; then
    ok "devices --bench: 4 positive GB/s rows"
  else
    fail "devices --bench: expected 4 positive GB/s rows, found $gbs"
  fi
  cat "$dir/out"
else
  fail "devices --bench --seconds 1 exits 0"
fi

# expect_error NAME PATTERN -- command...: exit status 2, exactly one line on
# stderr, matching PATTERN, nothing on stdout.
expect_error() {
  local name=$1 pattern=$2; shift 3
  "$@" >"$dir/out" 2>"$dir/err"
  local rc=$? lines
  lines=$(wc -l <"$dir/err")
  if [[ $rc -eq 2 && $lines -eq 1 && ! -s "$dir/out" ]] && grep -Eq -- "$pattern" "$dir/err"; then
    passes=$((passes + 1)); echo "ok   $name: exit $rc: $(cat "$dir/err")"
  else
    fails=$((fails + 1)); echo "FAIL $name: exit $rc, $lines stderr lines, expected /$pattern/"
    sed 's/^/     /' "$dir/err" "$dir/out"
  fi
}
expect_error "unknown flag" \
  "^dptrain: error: unknown option '--bogus' for devices \(see dptrain devices --help\)$" -- \
  "$bin" devices --bogus
expect_error "missing value" "--threads needs a value" -- "$bin" devices --threads
expect_error "bad threads" "--threads -1: expected an integer" -- "$bin" devices --threads -1
expect_error "bad seconds" "--seconds 0: expected a number > 0" -- \
  "$bin" devices --bench --seconds 0
expect_error "seconds without bench" "--seconds needs --bench" -- "$bin" devices --seconds 1

# An unknown device is a failed library call: one line, exit 1.
"$bin" devices --devices gpu:0 >"$dir/out" 2>"$dir/err"
rc=$?
if [[ $rc -eq 1 && $(wc -l <"$dir/err") -eq 1 && ! -s $dir/out ]] &&
   grep -q "unknown device 'gpu:0'" "$dir/err"; then
  ok "unknown device: exit 1: $(cat "$dir/err")"
else
  fail "unknown device: exit $rc, expected 1 and one line naming gpu:0"
fi

# --help lists every flag with its default.
help=$("$bin" devices --help)
for flag in --devices --threads --bench --seconds --help; do
  if grep -q -- "$flag" <<<"$help"; then passes=$((passes + 1)); else
    fails=$((fails + 1)); echo "FAIL devices --help does not list $flag"; fi
done
for default in '[auto]' '[0]' '[off]' '[8]'; do
  if grep -qF -- "$default" <<<"$help"; then passes=$((passes + 1)); else
    fails=$((fails + 1)); echo "FAIL devices --help does not show the default $default"; fi
done

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

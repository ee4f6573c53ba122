#!/usr/bin/env bash
# A user's program against the installed library: `cmake --install` into a
# staging prefix, then examples/custom_model.c built both ways a user would:
# with nothing but pkg-config's flags, once against libdptrain.so and once
# against libdptrain.a (pkg-config --static); and with CMake's
# find_package(dptrain CONFIG) (examples/cmake/: dptrain::dptrain and
# dptrain::dptrain_static). Each program runs: two epoch lines and the line
# saying that the resumed run matched an unbroken one.
# Usage: install_example.sh BUILD_DIR   (skips, 77, without pkg-config)
set -u
build=$1
src=${DP_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if ! command -v pkg-config >/dev/null; then
  echo "SKIP: pkg-config is not installed (make deps installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/stage
fails=0; passes=0
ok() { passes=$((passes + 1)); echo "ok   $1"; }
fail() { fails=$((fails + 1)); echo "FAIL $1"; [[ -n "${2:-}" ]] && sed 's/^/     /' <<<"$2"; }
# loads WHAT PROGRAM [LIB]: ldd finds every library PROGRAM needs, and its
# libdptrain.so is LIB (a path), or, without LIB, it needs none.
loads() {
  local what=$1 prog=$2 lib=${3:-} out
  [[ -e $prog ]] || return 0
  out=$(ldd "$prog" 2>&1)
  if grep -q 'not found' <<<"$out"; then fail "$what: a library is not found" "$out"
  elif [[ -n $lib ]] && ! grep -q "$lib" <<<"$out"; then fail "$what: libdptrain.so is not $lib" "$out"
  elif [[ -z $lib ]] && grep -q libdptrain <<<"$out"; then fail "$what: needs libdptrain.so" "$out"
  else ok "$what: every library found, ${lib:-no libdptrain.so needed}"; fi
}

if out=$(cmake --install "$build" --prefix "$stage" 2>&1); then ok "cmake --install"; else
  fail "cmake --install" "$out"; exit 1; fi
for f in lib/libdptrain.a lib/libdptrain.so lib/pkgconfig/dptrain.pc include/dp/dp.h bin/dptrain \
         lib/cmake/dptrain/dptrainConfig.cmake lib/cmake/dptrain/dptrainConfigVersion.cmake; do
  [[ -e "$stage/$f" ]] && ok "installed $f" || fail "installed $f"
done
loads "ldd bin/dptrain" "$stage/bin/dptrain" "$stage/bin/../lib/libdptrain.so"
# The CUDA backend's module, where the build has one: beside the library,
# which it finds there, with CUDA's libraries.
if [[ -e "$build/libdptrain-cuda.so" ]]; then
  [[ -e "$stage/lib/libdptrain-cuda.so" ]] && ok "installed lib/libdptrain-cuda.so" ||
    fail "installed lib/libdptrain-cuda.so"
  loads "ldd lib/libdptrain-cuda.so" "$stage/lib/libdptrain-cuda.so" "$stage/lib/libdptrain.so"
fi

export PKG_CONFIG_PATH=$stage/lib/pkgconfig
cc=${CC:-cc}
# Shared: the staged lib/ as the program's run path.
shared_flags=$(pkg-config --cflags --libs dptrain)
if out=$($cc -std=c11 -Wall -Wextra -Werror -o "$tmp/custom_shared" "$src/examples/custom_model.c" \
           $shared_flags -Wl,-rpath,"$stage/lib" 2>&1); then
  ok "cc custom_model.c $shared_flags"
else fail "cc against libdptrain.so" "$out"; fi
# Static: pkg-config --static adds the dependencies (Libs.private), but the
# linker would still take libdptrain.so over libdptrain.a: name the archive.
# The dependencies stay shared; their -L folders become run paths.
static_flags=$(pkg-config --static --cflags --libs dptrain | sed 's/-ldptrain\b/-l:libdptrain.a/')
rpaths=""
for d in $(pkg-config --static --libs-only-L dptrain); do rpaths+=" -Wl,-rpath,${d#-L}"; done
if out=$($cc -std=c11 -Wall -Wextra -Werror -o "$tmp/custom_static" "$src/examples/custom_model.c" \
           $static_flags $rpaths 2>&1); then
  ok "cc custom_model.c $static_flags"
else fail "cc against libdptrain.a" "$out"; fi
loads "static" "$tmp/custom_static"

# CMake: examples/cmake/CMakeLists.txt finds the staged package (moved
# to another prefix first: the package finds its prefix from its own place)
# and builds custom_model.c against each target, warnings as errors.
moved=$tmp/moved
cp -a "$stage" "$moved"
cmake_dir=$tmp/cmake-build
if out=$(cmake -S "$src/examples/cmake" -B "$cmake_dir" -DCMAKE_PREFIX_PATH="$moved" \
           -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" 2>&1) &&
   out=$(cmake --build "$cmake_dir" 2>&1); then
  ok "cmake find_package(dptrain CONFIG) in the moved prefix: custom_model (dptrain::dptrain) and custom_model_static (dptrain::dptrain_static) built"
  cp "$cmake_dir/custom_model" "$tmp/custom_cmake_shared"
  cp "$cmake_dir/custom_model_static" "$tmp/custom_cmake_static"
else fail "cmake find_package(dptrain CONFIG)" "$out"; fi
loads "cmake, shared" "$tmp/custom_cmake_shared" "$moved/lib/libdptrain.so"
loads "cmake, static" "$tmp/custom_cmake_static"
# A version the package is not: refused.
mkdir -p "$tmp/v2"
printf 'cmake_minimum_required(VERSION 3.20)\nproject(v LANGUAGES C)\nfind_package(dptrain 2 CONFIG REQUIRED)\n' \
  >"$tmp/v2/CMakeLists.txt"
if ! out=$(cmake -S "$tmp/v2" -B "$tmp/v2/build" -DCMAKE_PREFIX_PATH="$moved" 2>&1) &&
   grep -q 'version: 0.1.0' <<<"$out"; then
  ok "find_package(dptrain 2) refuses version 0.1.0"
else fail "find_package(dptrain 2)" "$out"; fi

# The pkg-config shared build on the in-memory dataset, the others on
# Fashion-MNIST where Debian's package is installed.
fmnist=/usr/share/datasets/fashion-mnist
[[ -e $fmnist/train-images-idx3-ubyte.gz ]] || fmnist=""
for kind in shared static cmake_shared cmake_static; do
  [[ -x "$tmp/custom_$kind" ]] || continue
  data=""; [[ $kind != shared ]] && data=$fmnist
  if out=$(cd "$tmp" && "./custom_$kind" $data 2>&1) &&
     [[ $(grep -c '^epoch [12]\( (resumed)\)\?: loss ' <<<"$out") == 2 ]] &&
     [[ $(tail -n1 <<<"$out") == "resume matched: "* ]]; then
    ok "custom_model ($kind${data:+, $data}): $(tail -n1 <<<"$out")"
  else fail "custom_model ($kind${data:+, $data})" "$out"; fi
done

echo "install_example: $passes passed, $fails failed"
[[ $fails -eq 0 ]]

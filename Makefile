# Thin wrapper over CMake. `make train` and `make test` work on a fresh
# Debian 12 machine: each installs the missing Debian packages first.
BUILD ?= build
JOBS ?= $(shell nproc)
EPOCHS ?= 10
DEVICES ?= auto
PREFIX ?= /usr/local
# The Python tests' venv (PyPI's numpy, pytest, matplotlib), made by `make test`
PY_VENV = $(BUILD)/py-venv

.PHONY: all deps build install train test test-python test-asan test-tsan test-interop test-mutants \
  clean fuzz

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DDP_WERROR=ON

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# libdptrain.so.0, libdptrain.a, the headers (include/dp/), the dptrain tool,
# lib/pkgconfig/dptrain.pc and the CMake package lib/cmake/dptrain/ under
# PREFIX (docs/c-library.md).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# LeNet on Fashion-MNIST, 10 epochs, every local device.
train: build
	$(BUILD)/dptrain train --model lenet --devices $(DEVICES) --batch-size 256 --lr 0.2 \
	  --epochs $(EPOCHS) --metrics lenet.jsonl --plot lenet.png

# The whole suite (the C tests and tests/python's, in the venv PY_VENV),
# then again under AddressSanitizer + UndefinedBehaviorSanitizer with the
# Python API fuzzed there, then the threaded tests under ThreadSanitizer.
# `build` has warnings as errors, the CUDA backend included where nvcc is installed; the sanitizer builds are
# CPU-only (nvcc's code is not instrumented). A test that cannot run here
# (no GPU, not root) exits 77 and CTest reports it as skipped; the last line
# names each skipped test with its reason. scripts/check-layers.sh first
# checks that the folders of src/ include each other only as DESIGN.md's
# layers allow, and scripts/check-train-parts.sh that each part of a run in
# src/train/ is the only file that reaches its fields.
test: build $(PY_VENV)/.ready
	scripts/check-layers.sh && echo "check-layers: the folders of src/ include each other as DESIGN.md allows, and python/ only the public API"
	scripts/check-train-parts.sh && echo "check-train-parts: each part of a run in src/train/ owns its fields"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-tsan
	@scripts/skipped-tests.sh $(BUILD) build-asan build-tsan

# The Python front end's tests: each tests/python/test_*.py is a CTest test
# (label python, tests/python/CMakeLists.txt) that runs pytest against the
# extension the build made (<build>/python/_dptrain.abi3.so) and the
# package in the tree (python/dptrain), in PY_VENV, a venv under the build
# folder with PyPI's numpy, pytest and matplotlib (d2l's Animator draws
# with it), which `make test` makes before ctest runs (without it those
# tests skip, naming why). A test that needs PyTorch finds Debian's
# python3-torch (a Python of its own, which make test-interop installs) and
# is skipped, visibly, without it; DP_REQUIRE_TORCH=1 (test-interop) makes
# that a failure. `make test-python` runs only these.
$(PY_VENV)/.ready: | deps
	@scripts/install-deps.sh python3-venv python3-dev
	rm -rf $(PY_VENV) && python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install -q numpy pytest matplotlib
	touch $@

test-python: build $(PY_VENV)/.ready
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L python

# make test-interop runs the Python tests that import torch themselves
# (label torch: PyTorch's optimizers, schedules, modules, printing) in
# PY_TORCH_VENV: Debian's Python with its python3-torch and numpy (system
# site packages; PyPI's numpy 2 would not load Debian's torch, and Debian's
# numpy 1.24 reads DLPack memory read-only, so the others stay in PY_VENV),
# pytest, matplotlib and safetensors (torch.load's reader of dptrain.save's
# files) from PyPI, with Debian's numpy kept (torch 1.13 is
# built against numpy 1: matplotlib's newest would bring numpy 2).
PY_TORCH_VENV = $(BUILD)/py-torch-venv
$(PY_TORCH_VENV)/.ready: | deps
	@scripts/install-deps.sh python3-venv python3-torch python3-numpy
	rm -rf $(PY_TORCH_VENV) && /usr/bin/python3 -m venv --system-site-packages $(PY_TORCH_VENV)
	$(PY_TORCH_VENV)/bin/pip install -q pytest matplotlib safetensors \
	  "numpy==$$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')"
	touch $@

# Interoperability with real PyTorch: installs Debian's python3-torch,
# python3-torchvision (before the Python tests: test_transforms_torchvision
# compares against it) and libopenblas0-pthread (without it torch runs the
# reference BLAS); reruns cli_data and cli_imagenet_recipe, which `make
# test` skips on a machine whose /usr/bin/python3 lacks numpy, torch and
# torchvision (a new one), with those now required, and cli_onnx_export's
# onnx.checker part once python3-onnx is in; then runs
# tests/train/cli_pytorch.sh (checkpoints both ways) and
# tests/optim/cli_pytorch_recipe.sh (optimizers, schedules, clipping, label
# smoothing step by step), where a missing torch is a failure, not a skip;
# and tests/train/cli_tensorboard.sh, which reads --tensorboard's files with
# TensorBoard's EventAccumulator (PyPI's tensorboard, in a venv it makes
# under the build folder); tests/onnx/cli_onnx_torchvision.sh, torchvision's
# networks exported by torch.onnx.export and trained by dptrain as by
# PyTorch, and dptrain's ONNX exports in ONNX Runtime (PyPI's onnxruntime,
# in a venv it makes under the build folder); tests/onnx/test_onnx_torch.c,
# torch's own exports of torchvision's models against PyTorch's outputs;
# then every pytorch-converted and pytorch-operator case of Debian's
# libonnx-testdata through the ONNX loader (tests/onnx/test_onnx_conformance.c).
test-interop: build
	@scripts/install-deps.sh python3-torch python3-torchvision libopenblas0-pthread
	DP_BUILD_DIR=$(CURDIR)/$(BUILD) DP_REQUIRE_TORCH=1 bash tests/train/cli_pytorch.sh $(BUILD)/dptrain
	DP_REQUIRE_TORCH=1 bash tests/optim/cli_pytorch_recipe.sh $(BUILD)/dptrain
	DP_REQUIRE_TORCH=1 bash tests/device/cpu/cli_bn_float64.sh $(BUILD)/dptrain
	$(MAKE) $(PY_VENV)/.ready $(PY_TORCH_VENV)/.ready
	cd $(BUILD) && DP_REQUIRE_TORCH=1 ctest --output-on-failure -j $(JOBS) -L python -LE torch
	cd $(BUILD) && DP_REQUIRE_TORCH=1 DP_PY_VENV=py-torch-venv ctest --output-on-failure -j $(JOBS) -L torch
	cd $(BUILD) && DP_REQUIRE_TORCH=1 ctest --output-on-failure -R '^(cli_data|cli_imagenet_recipe)$$'
	@scripts/install-deps.sh python3-venv
	DP_BUILD_DIR=$(CURDIR)/$(BUILD) DP_REQUIRE_TORCH=1 bash tests/train/cli_tensorboard.sh $(BUILD)/dptrain
	DP_REQUIRE_TORCH=1 bash tests/data/cli_augment_torchvision.sh $(BUILD)/dptrain
	@scripts/install-deps.sh python3-onnx
	DP_SOURCE_DIR=$(CURDIR) DP_REQUIRE_TORCH=1 $(BUILD)/tests/test_onnx_torch
	cd $(BUILD) && DP_REQUIRE_TORCH=1 ctest --output-on-failure -R '^cli_onnx_export$$'
	DP_BUILD_DIR=$(CURDIR)/$(BUILD) DP_REQUIRE_TORCH=1 bash tests/onnx/cli_onnx_torchvision.sh $(BUILD)/dptrain
	@scripts/install-deps.sh libonnx-testdata
	DP_REQUIRE_ONNX_TESTDATA=1 $(BUILD)/tests/test_onnx_conformance
	python3 tests/python/run_notebooks.py --build $(BUILD)

# The standing list of breaks, tests/mutants.txt: scripts/test-mutants.py
# makes each one-line break in a scratch copy of the tree (build-mutants/,
# a Release build without CUDA, configured once), rebuilds the library and
# the test the line names, runs that test alone and puts the file back;
# every test must fail on its break. Prints each break's outcome, then "N
# caught, M missed" naming the missed ones and any stale line (a pattern
# not found exactly once, an unknown test), and fails unless all were
# caught. Some breaks are caught by the PyTorch and TensorBoard tests: run
# it after test-interop, whose venvs under $(BUILD) it uses.
test-mutants: deps
	python3 scripts/test-mutants.py --jobs $(JOBS) --interop-build $(BUILD)

# build-asan builds the extension too (libdptrain linked in statically):
# tests/python/fuzz_api_asan.sh loads it into PY_VENV's Python with libasan
# preloaded and calls the API at random for PY_FUZZ_SECONDS. (tests/python's
# pytest files are not CTest tests there: they run in the plain build.)
PY_FUZZ_SECONDS ?= 60
test-asan: deps $(PY_VENV)/.ready
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDP_SANITIZE='address;undefined' -DDP_WERROR=ON \
	  -DDP_CUDA=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)
	PYTHON=$(CURDIR)/$(PY_VENV)/bin/python tests/python/fuzz_api_asan.sh $(PY_FUZZ_SECONDS) build-asan

# Devices are threads: the engine, the loader and every multi-device test run
# under ThreadSanitizer. Each device gets one kernel thread there, so no
# OpenMP team (libgomp is not instrumented) starts.
TSAN_TESTS = ^(test_engine|test_stream_wake|test_executor|test_engine.first_kernels_at_once|test_data_(idx|loader)|test_parallel_(collectives|models|batch_norm)|test_buckets|test_pipeline_(equals|schedule)|test_split_invariant|test_train|test_resume|cli_demo|test_image_stream|test_shards_(lane|train))$$
test-tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDP_SANITIZE=thread -DDP_WERROR=ON -DDP_CUDA=OFF \
	  -DDP_PYTHON=OFF
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

# Fuzzing (tests/fuzz/): libFuzzer targets for the IDX reader (plain and
# gzip) and the IDX set loader over its two files, the CIFAR-10 reader and
# its five-file train split, the safetensors reader, the checkpoint loader,
# model files (parsed, and built as dptrain model builds them), the
# command-line parsers (train, eval, demo, model's options, device lists,
# stage lists), built with clang under ASan+UBSan in build-fuzz. Each runs
# FUZZ_SECONDS on a scratch copy of its seeds and regression inputs (what it
# finds never lands in the tree) and prints libFuzzer's "Done N runs" line;
# an input that crashes a target, hangs it (30 s) or makes it allocate over
# 256 MB at once is kept in build-fuzz/crashes/ and fails the run.
# tests/fuzz/test_fuzz_regress.c replays the seeds and regression inputs in
# `make test`.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = idx safetensors checkpoint cli cifar10 model \
  idx_dataset cifar10_train model_cli devices stages model_build npy image onnx shards transform
fuzz:
	@scripts/install-deps.sh clang libclang-rt-14-dev
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DDP_SANITIZE='address;undefined' -DCMAKE_C_FLAGS='-fsanitize=fuzzer-no-link -Wno-pass-failed' \
	  -DDP_CUDA=OFF -DDP_MPI=OFF -DBUILD_TESTING=OFF \
	  -DCMAKE_PROJECT_INCLUDE=$(CURDIR)/tests/fuzz/project.cmake
	cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@mkdir -p build-fuzz/crashes; failed=""; \
	for t in $(FUZZ_TARGETS); do \
	  corpus=$$(mktemp -d); cp tests/fuzz/corpus/$$t/* $$corpus/; \
	  for f in tests/fuzz/regress/$$t/*; do [ -f "$$f" ] && cp "$$f" "$$corpus/regress-$${f##*/}"; done; \
	  log=build-fuzz/fuzz_$$t.log; \
	  if build-fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=30 -malloc_limit_mb=256 \
	       -close_fd_mask=3 -artifact_prefix=build-fuzz/crashes/$$t- $$corpus > $$log 2>&1; then \
	    echo "fuzz_$$t: $$(grep '^Done' $$log)"; \
	  else \
	    echo "fuzz_$$t: CRASHED (log: $$log)"; grep -A30 -m1 '^==[0-9]*==\|^fuzz \|deadly signal' $$log; \
	    failed="$$failed $$t"; \
	  fi; \
	  rm -rf $$corpus; \
	done; \
	if [ -n "$$failed" ]; then \
	  echo "fuzz: crashed:$$failed; the inputs are in build-fuzz/crashes/ (replay one: build-fuzz/fuzz/fuzz_TARGET FILE)"; \
	  exit 1; \
	fi

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz build-mutants

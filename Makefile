# Thin wrapper over CMake. `make train` and `make test` work on a fresh
# Debian 12 machine: each installs the missing Debian packages first.
BUILD ?= build
JOBS ?= $(shell nproc)
EPOCHS ?= 10
DEVICES ?= auto

.PHONY: all deps build train test test-asan test-tsan clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# LeNet on Fashion-MNIST, 10 epochs, every local device.
train: build
	$(BUILD)/dptrain train --model lenet --devices $(DEVICES) --batch-size 256 --lr 0.2 \
	  --epochs $(EPOCHS) --metrics lenet.jsonl --plot lenet.png

# The whole suite, then again under AddressSanitizer + UndefinedBehaviorSanitizer,
# then the threaded tests under ThreadSanitizer.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-tsan

test-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDP_SANITIZE='address;undefined' -DDP_WERROR=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# Devices are threads: the engine, the loader and every multi-device test run
# under ThreadSanitizer. Each device gets one kernel thread there, so no
# OpenMP team (libgomp is not instrumented) starts.
TSAN_TESTS = ^(test_engine|test_data|test_parallel|test_train|test_resume|cli_demo)$$
test-tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DDP_SANITIZE=thread -DDP_WERROR=ON
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'

clean:
	rm -rf $(BUILD) build-asan build-tsan

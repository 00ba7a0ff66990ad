# Thin wrapper over CMake: every target installs missing Debian packages, configures and builds.
#   make serve   serve the default model (made by rlxd-synth) on 127.0.0.1:8080
#   make test    release build + ctest, then the ASan/UBSan build + ctest
#   make bench   engine and server benchmarks (bench/RESULTS.md)
#   make fuzz    the libFuzzer targets, FUZZ_SECONDS (300) each (clang; `make test` runs them 15 s, two at once)
#   make soak    256 concurrent mixed streams with disconnects for SOAK_SECONDS (600); not in CI
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# The Vulkan backend is built (and its tests run on Mesa's lavapipe) when glslc and the Vulkan
# headers are present, which `make deps` installs. Evaluated by the recipe's shell (after deps
# ran), not when make reads this file, so a fresh machine gets it on the first run.
VULKAN_FLAG = $$(command -v glslc >/dev/null 2>&1 && [ -f /usr/include/vulkan/vulkan.h ] && echo -DRLX_VULKAN=ON)
DEFAULT_MODEL = $(BUILD)/models/default.gguf
# Compiles go through ccache when it is installed (`make deps` installs it), with paths under
# the source tree hashed relative to it: a second tree of the same sources (the image build
# check's context, tests/integration/test_image_build.sh) then reuses the release build's
# objects instead of compiling everything again.
LAUNCHER = $$(command -v ccache >/dev/null 2>&1 && echo -DCMAKE_C_COMPILER_LAUNCHER=ccache)
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

.PHONY: all deps build asan serve test test-release test-asan fuzz-build test-fuzz fuzz soak bench clean default-model

all: build

deps:
	@bash tools/install-deps.sh
	@if [ -f tests/integration/package.json ] && [ ! -d tests/integration/node_modules ]; then \
	  (cd tests/integration && npm ci --no-audit --no-fund --loglevel=error); fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(VULKAN_FLAG) $(LAUNCHER) $(CMAKE_FLAGS) > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DRLX_SANITIZE=ON -DRLX_WERROR=ON $(VULKAN_FLAG) $(LAUNCHER) $(CMAKE_FLAGS) > /dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

$(DEFAULT_MODEL): build
	@mkdir -p $(dir $@)
	$(BUILD)/rlxd-synth --arch llama --preset tiny --type q8_0 --seed 1 -o $@

default-model: $(DEFAULT_MODEL)

serve: build $(DEFAULT_MODEL)
	$(BUILD)/rlxd serve -m $(DEFAULT_MODEL):default --host 127.0.0.1 --port 8080

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j 2

test-asan: asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:max_malloc_fill_size=1048576 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j 2

# libFuzzer targets (tests/fuzz/fuzz_*.c) in their own clang build; skipped without clang.
fuzz-build: deps
	@if command -v clang >/dev/null; then \
	  CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DRLX_FUZZ=ON $(LAUNCHER) > /dev/null && \
	  cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers; \
	else echo "clang not installed: no fuzz build"; fi

test-fuzz: fuzz-build
	@if [ -d $(FUZZ_BUILD) ]; then cd $(FUZZ_BUILD) && FUZZ_SECONDS=15 ctest -L libfuzzer --output-on-failure -j 2; fi

fuzz: fuzz-build
	cd $(FUZZ_BUILD) && FUZZ_SECONDS=$(FUZZ_SECONDS) ctest -L libfuzzer --output-on-failure

soak: build
	bash bench/soak.sh

# The sanitizer run comes last so the output ends with its ctest summary.
test: test-release test-fuzz test-asan

bench: build
	bash bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

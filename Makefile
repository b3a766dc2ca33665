# The front door. Each target installs missing Debian packages, configures and
# builds incrementally in build/, then does its job.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_ASAN_BUILD ?= build-asan-fuzz
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
FUZZ_ITERATIONS ?= 1000000
FUZZ_SEED  ?= 1

.PHONY: all deps hooks configure build demo test test-quick bench bench-spec test-asan fuzz fuzz-asan clean \
        install-python

all: build

deps:
	@tools/install-deps

$(BUILD)/CMakeCache.txt: | deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS) >/dev/null

configure: deps $(BUILD)/CMakeCache.txt

# The commit-msg hook (docs/contributing.md) into this clone's hooks; nothing
# outside a git clone. A hooks folder that cannot be written is said, not
# fatal: the build goes on.
hooks:
	@tools/install-hooks || echo "make: the commit-msg hook was not installed" >&2

build: configure hooks
	@cmake --build $(BUILD) -j $(JOBS)

# `import twinserve` for the system's Python (docs/python.md): the module and
# the package into PREFIX's dist-packages (default /usr/local).
PREFIX ?= /usr/local
install-python: build
	@cmake --install $(BUILD) --component python --prefix $(PREFIX)

demo: build
	@tools/demo $(BUILD)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The tests labelled quick (docs/contributing.md): under a minute (29 s on
# two busy cores).
test-quick: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L quick

bench: build
	@tools/run-bench $(BUILD)

# Speculative decoding on the CPU engine vs the simulator's prediction
# (docs/speculative.md); timing, so never part of `make test`.
bench-spec: build
	@tools/bench/speculative/run.sh $(BUILD) draft
	@tools/bench/speculative/run.sh $(BUILD) ngram

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTWIN_SANITIZE=ON -DTWIN_CUDA=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

# 10^6 mutated inputs per reader (docs/fuzz.md), readers in parallel; a
# crashing input is saved in $(BUILD)/fuzz-crashes. Long: tens of minutes.
# make fuzz BUILD=build-asan runs it under the sanitizers (configure that
# folder first, e.g. with make test-asan).
fuzz: configure
	@cmake --build $(BUILD) --target twin_fuzz -j $(JOBS)
	@mkdir -p $(BUILD)/fuzz-crashes
	@$(BUILD)/tools/twin_fuzz --list | cut -d' ' -f1 | \
	  xargs -P $(JOBS) -I{} $(BUILD)/tools/twin_fuzz --reader {} --iterations $(FUZZ_ITERATIONS) \
	    --seed $(FUZZ_SEED) --strict --crash-dir $(BUILD)/fuzz-crashes

# The same 10^6 inputs per reader under ASan + UBSan, optimised (-O2 -g;
# the trace readers ran 3.6x the Debug sanitizer build's rate), in
# $(FUZZ_ASAN_BUILD) (docs/fuzz.md).
fuzz-asan: deps
	@cmake -S . -B $(FUZZ_ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTWIN_SANITIZE=ON -DTWIN_CUDA=OFF $(CMAKE_ARGS) >/dev/null
	@cmake --build $(FUZZ_ASAN_BUILD) --target twin_fuzz -j $(JOBS)
	@mkdir -p $(FUZZ_ASAN_BUILD)/fuzz-crashes
	@$(FUZZ_ASAN_BUILD)/tools/twin_fuzz --list | cut -d' ' -f1 | \
	  xargs -P $(JOBS) -I{} $(FUZZ_ASAN_BUILD)/tools/twin_fuzz --reader {} --iterations $(FUZZ_ITERATIONS) \
	    --seed $(FUZZ_SEED) --strict --crash-dir $(FUZZ_ASAN_BUILD)/fuzz-crashes

clean:
	@rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_ASAN_BUILD)

# Thin front for the CMake presets. `make test` and `make demo` install what they need.
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
TOKENS ?= 524288

.PHONY: deps corpora build python debug asan test test-release test-asan bench fuzz demo clean

deps:
	@bash scripts/install-deps.sh
	@bash scripts/get-gpt2-files.sh && bash scripts/get-reference-tokenizer.sh

# The builds run `deps` once, and again when one of its scripts changes (or after `make
# clean`), not on every build; `make deps` always runs it.
DEPS_DONE = build/.deps-done
$(DEPS_DONE): $(addprefix scripts/,install-deps.sh get-gpt2-files.sh get-reference-tokenizer.sh npm-package.sh)
	@$(MAKE) --no-print-directory deps
	@mkdir -p build && touch $@

# The local real corpora (docs/data.md); the tokenizer tests compare with GPT-2 on `edu`.
corpora: $(DEPS_DONE)
	@bash scripts/get-corpora.sh

# The release build: everything, or only the binary for the commands that need nothing else.
# CPU=native tunes it for this machine (AVX-512 where there is some); CPU=portable (the
# default) runs on every x86-64 CPU with AVX2. The choice stays until changed.
BUILD_TARGETS ?= all
build: $(DEPS_DONE)
	@cmake --preset release $(if $(CPU),-DSPS_CPU=$(CPU)) >/dev/null
	@cmake --build --preset release -j $(JOBS) --target $(BUILD_TARGETS)

debug: $(DEPS_DONE)
	@cmake --preset debug >/dev/null
	@cmake --build --preset debug -j $(JOBS)

asan: $(DEPS_DONE)
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)

test-release: build corpora
	@cd build/release && ctest --output-on-failure -j $(JOBS)

# The unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer, with the kernels
# of an AVX-512 build (64-byte vectors; GCC splits each op in two where the machine has only
# AVX2), so that each width runs the unit tests: the release build's and 64 bytes. Whole-
# program checks (tests/*/test_cli.cpp and tests/cli/test_gpu_check.cpp, which run the binary
# in child processes, and tests named *Slow*, e.g. multi-process MPI runs) are integration
# tests: they run in the release suite only, and the asan preset builds neither them nor the
# binary. It compiles the areas and the emulated CUDA kernels' tests at -O1 and the other test
# code at -O0, with line tables only, each target as unity translation units: a third of the
# build time of -O2 -g file by file. Each test binary runs as 4 shards (SPS_TEST_SHARDS), not a
# process per case: a sanitized process takes 0.3 s to start.
test-asan: asan
	@cd build/asan && ASAN_OPTIONS=detect_leaks=1 OMP_WAIT_POLICY=passive GTEST_FILTER='-*Slow*' ctest --output-on-failure -j $(JOBS)

test: test-release test-asan

# The Python module in place (python/sps/_sps*.so): PYTHONPATH=python imports it
# (docs/python.md; `pip install --no-build-isolation .` installs it).
python: BUILD_TARGETS = sps_python
python: build
	@cp build/release/python/sps/_sps*.so python/sps/

bench: BUILD_TARGETS = sps
bench: build
	@./build/release/sps bench gemm
	@./build/release/sps bench step --config configs/models/tiny.yaml
	@./build/release/sps bench step --config configs/models/tiny.yaml model.family=sps model.window_size=64

# Every fuzz target fuzz/fuzz_NAME.cpp (CMake builds each), with its dictionary fuzz/NAME.dict
# and seeds fuzz/corpus_NAME.
FUZZ_TARGETS = $(patsubst fuzz/fuzz_%.cpp,%,$(wildcard fuzz/fuzz_*.cpp))

fuzz: $(DEPS_DONE)
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do mkdir -p build/fuzz/corpus_$$t && \
	  ./build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -dict=fuzz/$$t.dict \
	    build/fuzz/corpus_$$t fuzz/corpus_$$t || exit 1; done

# The main job: corpora, tokenizer, token files, tiny standard vs tiny sps, table and plot.
demo: BUILD_TARGETS = sps
demo: build
	@TOKENS=$(TOKENS) bash scripts/demo.sh

clean:
	rm -rf build

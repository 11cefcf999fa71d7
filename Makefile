# aicc: `make demo` sets everything up and compiles, runs and validates the example model;
# `make test` runs the test suite. Both work from a fresh clone: this file installs what
# they need (a venv with the Python packages from PyPI; a C compiler from Debian if missing).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.aicc-installed
JOBS   ?= 2
DEMO_MODEL  := examples/kws_dscnn.onnx
DEMO_OUT    := build/demo
DEMO_TARGET := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && echo x86-avx2 || echo generic)
STRICT := -O2 -std=c99 -Wall -Wextra -pedantic -Wshadow -Werror

.PHONY: setup demo test clean toolchain golden conformance fuzz sanitize

setup: $(STAMP) toolchain

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# gcc, make and clang (the generated C is checked with both); installed from Debian when missing
toolchain:
	@command -v cc >/dev/null && command -v clang >/dev/null || { \
	  echo "installing C toolchain (gcc, clang) from Debian packages"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq gcc make clang >/dev/null; }

demo: setup
	$(BIN)/aicc inspect $(DEMO_MODEL)
	$(BIN)/aicc build $(DEMO_MODEL) -t $(DEMO_TARGET) -o $(DEMO_OUT)
	$(MAKE) -C $(DEMO_OUT) CFLAGS="$(STRICT)"
	$(BIN)/aicc inspect $(DEMO_OUT)
	$(BIN)/aicc validate $(DEMO_MODEL) $(DEMO_OUT)
	$(BIN)/python examples/make_input.py $(DEMO_MODEL) build/demo_input.npz
	$(BIN)/aicc run $(DEMO_OUT) -i build/demo_input.npz -o build/demo_output.npz
	$(MAKE) -C examples/c_app BUNDLE=../../$(DEMO_OUT) run
	$(BIN)/aicc golden record $(DEMO_MODEL) $(DEMO_OUT) build/demo_golden
	$(BIN)/aicc golden check $(DEMO_OUT) build/demo_golden

test: setup
	$(BIN)/python -m pytest -q -n $(JOBS) tests

# regenerate tests/golden/*/ from the model builders (expected outputs come from onnxruntime)
golden: setup
	$(BIN)/python -m tests.golden.regenerate

# the ONNX backend node cases and light models; writes docs/CONFORMANCE.md and the allowlist
# tests/conformance_passing.txt that `make test` replays
conformance: setup
	$(BIN)/python -m tools.conformance -j $(JOBS)

# the op suite with every bundle built under AddressSanitizer + UndefinedBehaviorSanitizer
# (python runs with libasan preloaded; any report fails the test). Slow: not part of `make test`.
sanitize: setup
	AICC_SANITIZE=1 ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD=$$($(CC) -print-file-name=libasan.so) \
	  $(BIN)/python -m pytest -q -n $(JOBS) tests/ops

# fuzz the compiler for FUZZ_SECONDS; crashes land in tests/fuzz_corpus/ (replayed by make test)
FUZZ_SECONDS ?= 60
fuzz: setup
	$(BIN)/python -m tools.fuzz --seconds $(FUZZ_SECONDS)

clean:
	rm -rf build

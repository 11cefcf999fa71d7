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

.PHONY: setup demo test clean toolchain golden conformance fuzz zoo sanitize checked cross-toolchain embedded-check qemu-plugin

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

# ARM cross compilers, newlib, QEMU (user mode for AArch64, system mode for the Cortex-M4 board)
# and CMake, for the arm-neon and cortex-m4 targets (docs/EMBEDDED.md), and OpenSSH (the ssh
# runner's client, and the server its test starts on 127.0.0.1); installed from Debian when
# missing. About 170 MB of packages; `apt-get install` took 15 s on the reference machine.
CROSS_PKGS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user gcc-arm-none-eabi \
              libnewlib-arm-none-eabi qemu-system-arm cmake openssh-client openssh-server
cross-toolchain:
	@ok=1; for p in aarch64-linux-gnu-gcc qemu-aarch64 arm-none-eabi-gcc qemu-system-arm cmake \
	  ssh /usr/sbin/sshd; do command -v $$p >/dev/null || ok=; done; \
	[ -n "$$ok" ] && [ -f /usr/aarch64-linux-gnu/include/stdio.h ] && \
	  [ -f "$$(arm-none-eabi-gcc -print-file-name=libc_nano.a)" ] || { \
	  echo "installing ARM cross toolchains and QEMU from Debian packages: $(CROSS_PKGS)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends $(CROSS_PKGS) >/dev/null; }

# aicc's QEMU TCG plugin that counts executed instructions (aicc bench on emulated targets:
# aicc/runner/count.py), built against the plugin header of the installed QEMU, which comes
# from Debian's qemu source package (tools/qemu_plugin_header.sh; a 23 MB download)
QEMU_PLUGIN := build/qemu-plugin/libaicc_insns.so
qemu-plugin: $(QEMU_PLUGIN)
$(QEMU_PLUGIN): runtime_c/qemu/insn_count.c | cross-toolchain toolchain
	[ -f build/qemu-plugin/include/qemu-plugin.h ] || tools/qemu_plugin_header.sh build/qemu-plugin/include
	cc -O2 -std=gnu99 -Wall -Wextra -Werror -shared -fPIC -Ibuild/qemu-plugin/include $< -o $@

# examples/embedded on the host, AArch64 (qemu-aarch64) and Cortex-M4 (qemu-system-arm), with
# Make and with CMake; sizes per target; then tests/test_embedded.py. From a fresh clone.
EMB := examples/embedded
embedded-check: setup cross-toolchain
	$(MAKE) -C $(EMB) clean
	for p in host arm-neon cortex-m4; do \
	  $(MAKE) --no-print-directory -C $(EMB) PLATFORM=$$p run && \
	  $(MAKE) --no-print-directory -C $(EMB) PLATFORM=$$p cmake || exit 1; done
	for p in cortex-m7 cortex-m55; do \
	  $(MAKE) --no-print-directory -C $(EMB) PLATFORM=$$p run || exit 1; done
	$(BIN)/aicc inspect $(EMB)/build/arm-neon/bundle --size
	$(BIN)/aicc inspect $(EMB)/build/cortex-m4/bundle --size
	$(BIN)/python $(EMB)/size_table.py
	$(BIN)/python -m pytest -q tests/test_embedded.py

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

test: setup cross-toolchain qemu-plugin
	$(BIN)/python -m pytest -q -n $(JOBS) --durations=25 tests

# regenerate tests/golden/*/ from the model builders (expected outputs come from onnxruntime;
# the generated C: model.c generic, model.<target>.c for regenerate.py's SIMD_TARGETS)
golden: setup
	$(BIN)/python -m tests.golden.regenerate

# the ONNX backend node cases and light models; writes docs/CONFORMANCE.md and the allowlist
# tests/conformance_passing.txt that `make test` replays
conformance: setup
	$(BIN)/python -m tools.conformance -j $(JOBS)

# the op suite with every bundle built under AddressSanitizer + UndefinedBehaviorSanitizer
# (python runs with libasan preloaded, and libstdc++ with it so that onnxruntime's C++
# exceptions pass ASan's interceptor; any report fails the test). Slow: not part of `make test`.
sanitize: setup
	AICC_SANITIZE=1 ASAN_OPTIONS=detect_leaks=0 \
	  LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libstdc++.so.6)" \
	  $(BIN)/python -m pytest -q -n $(JOBS) tests/ops

# the op suite with every bundle in checked mode (redzones + per-step sums of what a step must
# not write; a stray write fails naming the step). Slow: not part of `make test`.
checked: setup
	AICC_CHECKED=1 $(BIN)/python -m pytest -q -n $(JOBS) tests/ops

# fuzz the compiler for FUZZ_SECONDS (atheris: coverage-guided, structure-aware mutations);
# findings land in tests/fuzz_corpus/ (replayed by make test). docs/ARCHITECTURE.md, Fuzzing.
FUZZ_SECONDS ?= 60
fuzz: setup
	@$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/pip install -q -e '.[fuzz]'
	$(BIN)/python -m tools.fuzz --seconds $(FUZZ_SECONDS)

# the model zoo (benchmarks/zoo.py): exports public architectures, builds and measures each
# against onnxruntime (speed) and a float64 PyTorch run (accuracy); resumes where it stopped;
# ZOO_TARGET, ZOO_ARGS (e.g. "-k resnet" or "--write": the table in docs/PERFORMANCE.md)
ZOO_TARGET ?= x86-avx2
zoo: setup
	@$(BIN)/python -c "import torch, torchvision, timm, transformers" 2>/dev/null || $(BIN)/pip install -q -e '.[zoo]'
	$(BIN)/python -m benchmarks.zoo -t $(ZOO_TARGET) $(ZOO_ARGS)

clean:
	rm -rf build

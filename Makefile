# upscale-demo -- build, run and test.
#
#   make setup      install/check system packages, Rust, ONNX Runtime (.deps/)
#   make run        run the game (ARGS="..." passes arguments through; ORT=gpu: with the GPU
#                   build of ONNX Runtime, for the CUDA paths on an NVIDIA GPU)
#   make headless   render 60 frames headless into out/headless
#   make test       fmt check, clippy, rustdoc links, cargo test (unit, GPU with validation, window under Xvfb),
#                   then a no-op rebuild that must compile nothing
#   make soak       10,000 headless frames switching pattern and model, validation required
#                   (SOAK_ARGS="..." adds or overrides headless options; 2-3 min here)
#   make clean      cargo clean

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

CARGO ?= cargo
ARGS ?=
# cpu: ONNX Runtime's CPU build (.deps/onnxruntime); gpu: its GPU build (.deps/onnxruntime-gpu).
ORT ?= cpu
export ORT
ifeq ($(ORT),gpu)
export ORT_DYLIB_PATH := $(CURDIR)/.deps/onnxruntime-gpu/libonnxruntime.so.1.31.1
export LD_LIBRARY_PATH := $(CURDIR)/.deps/onnxruntime-gpu$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
endif
SOAK_ARGS ?=

# Start time for the elapsed-seconds report of `make test`.
MAKE_START := $(shell date +%s)

# vulkaninfo (and some Vulkan layers) want a private runtime dir.
ifeq ($(strip $(XDG_RUNTIME_DIR)),)
XDG_RUNTIME_DIR := /tmp/xdg-runtime-$(shell id -u)
$(shell mkdir -p '$(XDG_RUNTIME_DIR)' && chmod 0700 '$(XDG_RUNTIME_DIR)')
endif
export XDG_RUNTIME_DIR

elapsed = $$(( $$(date +%s) - $(MAKE_START) ))

.PHONY: setup run headless test soak clean

setup:
	bash scripts/setup.sh

run: setup
	$(CARGO) run --release -- $(ARGS)

headless: setup
	$(CARGO) run --release -- headless --frames 60 --out out/headless

test: setup
	@echo "==== [test 1/4] cargo fmt --check (t+$(elapsed)s)"
	$(CARGO) fmt --all -- --check
	@echo "==== [test 2/4] cargo clippy, cargo doc (broken intra-doc links fail) (t+$(elapsed)s)"
	$(CARGO) clippy --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps --quiet
	@echo "==== [test 3/4] cargo test: unit, GPU (lavapipe, validation required), window under Xvfb (t+$(elapsed)s)"
	UPSCALE_VALIDATION=1 $(CARGO) test
	@echo "==== [test 4/4] a rebuild with nothing changed compiles nothing (t+$(elapsed)s)"
	@# Cargo re-runs a build script that watches a missing path, and then recompiles the crate
	@# (a minute on 2 cores at every `make run`).
	@out=$$($(CARGO) test --no-run 2>&1); \
	if grep -q 'Compiling upscale-demo' <<<"$$out"; then \
		echo "$$out"; \
		echo "a no-op rebuild recompiled upscale-demo: does build.rs watch a path that is missing?"; \
		exit 1; \
	fi
	@echo "==== make test: all passed in $(elapsed)s"

# The test profile (dev, optimised deps): the soak shares the build `make test` made, and its
# time goes to the validation layer and lavapipe, which the profile does not change.
soak: setup
	UPSCALE_VALIDATION=1 RUST_LOG=$${RUST_LOG:-warn,upscale_demo::app::soak=info} $(CARGO) run -- headless --soak \
		--frames 10000 --switch-every 30 --model-every 500 --output-size 128x72 \
		--out out/soak $(SOAK_ARGS)

clean:
	$(CARGO) clean

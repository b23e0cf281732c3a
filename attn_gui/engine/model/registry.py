"""Pretrained models as sources of layer inputs and weights.

``MODELS`` holds the bundled models' specs, plain data; ``model_spec(name)`` gives a bundled
model's, or reads a folder's config.json (``hf.spec_for``) or a .gguf file's header
(``gguf_file.spec_for``), once. A model runs in the module its spec names: every decoder in
``decoder.py`` (its files read by ``spec.reader``), every BERT-family encoder in
``encoder.py``; a model object in memory is registered by ``memory.register``. This module imports
nothing heavy: a source's module is imported when
``source(name)`` first asks for it.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..base.errors import ConfigError
from ..specs.families import FAMILIES, MAX_TOKENS, decoder_spec
from ..specs.spec import ModelSpec

if TYPE_CHECKING:
    from .source import ModelSource
    from .decoder.source import Source as DecoderSource



MODELS: Mapping[str, ModelSpec] = MappingProxyType({  # the bundled models, by name
    spec.name: spec
    for spec in (
        ModelSpec("minilm-l6", "MiniLM-L6 (all-MiniLM-L6-v2)", module="minilm", layers=6, heads=12,
                  d_model=384, d_k=32, d_v=32, max_tokens=MAX_TOKENS, has_bias=True,
                  special_tokens=("[CLS]", "[SEP]"), norm="layer", block="post_ln"),
        decoder_spec("smollm2-135m", "SmolLM2-135M (decoder)", "smollm2", FAMILIES["llama"],
                     weights="the weights are 4-bit (Q4_1) approximations of the published SmolLM2-135M-Instruct",
                     layers=30, heads=9, kv_heads=3, d_model=576, d_k=64, d_v=64, max_tokens=8192, has_bias=False,
                     rope_base=100000.0, special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>")),
    )
})


REGISTERED: dict[str, ModelSpec] = {}  # model objects in memory, by the name ``memory.register`` gave them


def model_spec(name: str) -> ModelSpec:
    """The spec of model ``name``: a bundled model's, else the folder's or the .gguf file's (read once);
    ``ConfigError`` in one line saying why not."""
    if not isinstance(name, str) or name in ("", "none"):
        raise ConfigError(f"model must be one of {', '.join(MODELS)}, a model folder, a .gguf file or none; "
                          f"got {name!r:.40}")
    if name in MODELS:
        return MODELS[name]
    if name in REGISTERED:
        return REGISTERED[name]
    if name.lower().endswith(".gguf"):
        from ..readers.gguf.spec import spec_for
    else:
        from ..readers.hf.spec import spec_for
    return spec_for(name)


MODULES = {  # ``ModelSpec.module``: the module whose ``Source`` runs the model, relative to this package
    "decoder": ".decoder.source",
    "encoder": ".encoder.source",
    "minilm": ".encoder.minilm",
    "via_transformers": ".interop.via_transformers",
}


@functools.cache
def source(name: str) -> ModelSource:
    """The (cached) source of model ``name``; importing its module costs nothing else."""
    s = model_spec(name)
    module = importlib.import_module(MODULES[s.module], __package__)
    return module.Source(s)


def decoder_of(name: str) -> DecoderSource:
    """``source(name)`` for a decoder, typed for what only a decoder has (forward, top_tokens, token_text, ...);
    ``ConfigError`` for an encoder."""
    from .decoder.source import Source as DecoderSource  # a decoder's source() has imported it already

    src = source(name)
    if not isinstance(src, DecoderSource):
        raise ConfigError(f"{src.spec.label} is an encoder: it has no next token (choose a decoder model)")
    return src


def is_available(name: str) -> bool:
    """Whether model ``name`` can be loaded here (its packages are installed)."""
    return source(name).available()


def install_hint(name: str) -> str:
    """The command that makes model ``name`` available."""
    return source(name).install_hint


__all__ = ["MODELS", "REGISTERED", "ModelSpec", "install_hint", "is_available", "model_spec", "source"]

"""Pretrained models as sources of layer inputs and weights, looked up by name.

A model runs in the module its spec names (``MODULES``): every decoder in ``decoder/source.py`` (its files read by
``spec.reader``), every BERT-family encoder in ``encoder/source.py``, a causal model transformers runs in
``interop/via_transformers.py``; a model object in memory is registered by ``interop.memory.register``. The spec
itself comes from ``readers.catalog.model_spec``. This module imports nothing heavy: a source's module is imported
when ``source(name)`` first asks for it.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

from ..base.errors import ConfigError
from ..readers.catalog import model_spec, on_change

if TYPE_CHECKING:
    from .source import ModelSource
    from .decoder.source import Source as DecoderSource


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


@on_change
def _changed(name: str) -> None:
    """The files of the model at path ``name`` changed: drop its source and its loaded copy (read again)."""
    from .loaded import LOADED

    source.cache_clear()
    LOADED.forget(name)


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


__all__ = ["decoder_of", "install_hint", "is_available", "source"]

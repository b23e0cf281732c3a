"""Pretrained models as sources of layer inputs and weights.

A model is one file here defining ``Source`` (a ``base.ModelSource``) plus one
``ModelSpec`` line in ``MODELS``. This module imports nothing heavy: a source's
module is imported when ``source(name)`` first asks for it.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .spec import ModelSpec

if TYPE_CHECKING:
    from .base import ModelSource



class _Models(dict):
    """The bundled models by name; a path looks up the spec of the folder (``hf.spec_for``) or of the
    .gguf file (``gguf_file.spec_for``), read once."""

    def __missing__(self, key):
        if isinstance(key, str) and key not in ("", "none"):
            if key.lower().endswith(".gguf"):
                from .gguf_file import spec_for
            else:
                from .hf import spec_for

            return spec_for(key)
        raise KeyError(key)

    def __contains__(self, key) -> bool:
        try:
            self[key]
        except (KeyError, ConfigError):
            return False
        return True

    def get(self, key, default=None):
        return self[key] if key in self else default  # noqa: SIM401 (a missing key reads the disk; get() must not raise)


MODELS: dict[str, ModelSpec] = _Models({
    spec.name: spec
    for spec in (
        ModelSpec("minilm-l6", "MiniLM-L6 (all-MiniLM-L6-v2)", module="minilm", layers=6, heads=12,
                  d_model=384, d_k=32, d_v=32, max_tokens=512, has_bias=True,
                  special_tokens=("[CLS]", "[SEP]")),
        ModelSpec("smollm2-135m", "SmolLM2-135M (decoder)", module="gguf_file", layers=30, heads=9, kv_heads=3,
                  d_model=576, d_k=64, d_v=64, max_tokens=512, has_bias=False, causal=True, rope_base=100000.0,
                  special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
                  x_is="RMSNorm of the residual stream entering the layer",
                  about=("output is the attention block's output, before the residual",
                         "the weights are 4-bit (Q4_1) approximations of the published SmolLM2-135M-Instruct",
                         "the model is causal by construction: the causal mask is always on")),
    )
})


def spec(name: str) -> ModelSpec:
    """The static spec of model ``name``; ``ConfigError`` naming the choices otherwise."""
    if not isinstance(name, str):
        raise ConfigError(f"model must be one of {', '.join(MODELS)}, a folder, a .gguf file or none; "
                          f"got {name!r:.40}")
    return MODELS[name]


@functools.cache
def source(name: str) -> ModelSource:
    """The (cached) source of model ``name``; importing its module costs nothing else."""
    s = spec(name)
    module = importlib.import_module(f"{__name__}.{s.module}")
    return module.Source(s)


def is_available(name: str) -> bool:
    """Whether model ``name`` can be loaded here (its packages are installed)."""
    return source(name).available()


def install_hint(name: str) -> str:
    """The command that makes model ``name`` available."""
    return source(name).install_hint


__all__ = ["MODELS", "ModelSpec", "install_hint", "is_available", "source", "spec"]

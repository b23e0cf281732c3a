"""A model's spec by name: a bundled or registered model's, else read from a folder's config.json or a .gguf
file's header (spec only, never weights: what the open dialog and the CLI's ``--layer`` check need)."""

from __future__ import annotations

from ..base.errors import ConfigError
from ..specs.catalog import MODELS, REGISTERED
from ..specs.spec import ModelSpec


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
        from .gguf.spec import spec_for
    else:
        from .hf.spec import spec_for
    return spec_for(name)

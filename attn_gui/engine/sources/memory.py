"""A model object in memory (``attn_gui.register``): a transformers decoder, never saved, read like a folder.

``register(model, tokenizer, name)`` takes a transformers ``PreTrainedModel`` of a decoder
family of ``families.FAMILIES`` (Llama, Mistral, Qwen2, Qwen3, GPT-2): its spec comes from
``model.config.to_dict()`` through the folder reader's own ``hf.config_spec``, its weights
from ``model.state_dict()`` (the tensors themselves, detached: no copy; the CPU forward
converts each as a layer reads it, ``stored.Upcast``), and the rest runs as for a folder
(``hf.decoder_model``, ``decoder.Source``). After it, ``AttentionConfig(model=name)`` and every
engine function take the name as they take a path.

The tokenizer is a transformers tokenizer (its ``backend_tokenizer``) or a
``tokenizers.Tokenizer``. Each refusal is one ``ConfigError`` naming what is wrong: an object
of another class, weights on the meta device or split across devices, a tokenizer with ids
past the model's embedding rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from . import MODELS, REGISTERED, source
from .families import FAMILIES
from .spec import ModelSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEFAULT_NAME = "in-memory"
_MODELS: dict[str, tuple[dict, dict, object, object]] = {}  # name: (config dict, weights, tokenizer, the model)


def _class_names(obj: object) -> set[str]:
    return {cls.__name__ for cls in type(obj).__mro__}


def _tokenizer(tokenizer) -> Tokenizer:
    """``tokenizer`` as a ``tokenizers.Tokenizer``."""
    names = _class_names(tokenizer)
    if "Tokenizer" in names and type(tokenizer).__module__.startswith("tokenizers"):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # a transformers fast tokenizer
        return backend
    if "PreTrainedTokenizerBase" in names or "PreTrainedTokenizer" in names:
        raise ConfigError(f"the tokenizer {type(tokenizer).__name__} is a slow (Python) tokenizer: load the fast "
                          f"one (AutoTokenizer.from_pretrained(..., use_fast=True)) or pass a tokenizers.Tokenizer")
    raise ConfigError(f"the tokenizer must be a transformers tokenizer or a tokenizers.Tokenizer; "
                      f"got {type(tokenizer).__name__}")


def _weights(model, name: str) -> dict:
    """The model's tensors under transformers' causal-LM names, detached (sharing their memory)."""
    state = model.state_dict()
    devices = sorted({str(t.device) for t in state.values()})
    if "meta" in devices:
        raise ConfigError(f"{name}: the model's weights are on the meta device (not loaded); load it with "
                          f"its weights (no device_map='meta', no init_empty_weights) before registering it")
    if len(devices) > 1:
        raise ConfigError(f"{name}: the model is split across devices ({', '.join(devices)}); move it to one "
                          f"(model.to('cpu')) before registering it")
    weights = {key: t.detach() for key, t in state.items()}
    if not any(key.startswith(("model.", "transformer.")) for key in weights):  # a bare Qwen2Model, LlamaModel
        prefix = "transformer." if "wte.weight" in weights else "model."
        weights = {prefix + key: t for key, t in weights.items()}
    return weights


def register(model, tokenizer, name: str | None = None) -> str:
    """Make the transformers model object ``model`` a model of the engine, named ``name``; returns the name.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder of a family the engine reads (Llama, Mistral, Qwen2, Qwen3, GPT-2), with or
        without its LM head, on one device, in any floating dtype.
    tokenizer : transformers tokenizer (fast) or tokenizers.Tokenizer
        Its ids must index the model's embedding.
    name : str, optional
        What ``AttentionConfig(model=...)`` calls it (default "in-memory"); registering a name
        again replaces the model it names.

    Raises
    ------
    ConfigError
        In one line: an unsupported object or family, weights on the meta device or split
        across devices, a tokenizer that does not fit the model, or a name taken by a bundled model.
    """
    name = DEFAULT_NAME if name is None else name
    if not isinstance(name, str) or not name.strip() or "/" in name or "\\" in name or name.endswith(".gguf"):
        raise ConfigError(f"a registered model's name is a word, no path; got {name!r:.40}")
    if name in MODELS or name in ("none",):
        raise ConfigError(f"{name!r} is a bundled model's name; choose another")
    classes = _class_names(model)
    if "HookedTransformer" in classes:
        raise ConfigError("a TransformerLens HookedTransformer is not read yet; register the transformers model "
                          "it was made from (from_pretrained's hf_model)")
    config = getattr(model, "config", None)
    if "PreTrainedModel" not in classes or config is None or not hasattr(config, "to_dict"):
        raise ConfigError(f"register() takes a transformers PreTrainedModel; got {type(model).__name__}")
    cfg = config.to_dict()
    kind = cfg.get("model_type")
    family = FAMILIES.get(kind)
    decoders = ", ".join(f.label for f in FAMILIES.values() if f.path == "decoder")
    if family is None or family.path != "decoder":
        raise ConfigError(f"{type(model).__name__} is a {kind!r} model; register() reads the decoders {decoders}")
    where = Path(name)  # messages name it as they name a folder
    from .hf import config_spec, decoder_model

    spec = config_spec(cfg, name, where, f"{name}, {type(model).__name__} in memory", reader="memory")
    weights = _weights(model, name)
    backend = _tokenizer(tokenizer)
    built = decoder_model(spec, cfg, weights, backend, where)  # checks the weights against the config
    rows = built.weights["model.embed_tokens.weight"].shape[0]
    top = max(backend.get_vocab(with_added_tokens=True).values())
    if top >= rows:
        raise ConfigError(f"{name}: the tokenizer's ids go up to {top:,}, past the model's {rows:,} embedding rows: "
                          f"it is not this model's tokenizer")
    _forget(name)
    REGISTERED[name] = spec
    _MODELS[name] = (cfg, weights, backend, model)
    return name


def version(spec: ModelSpec) -> tuple:
    """What changes when the registered model's weights change: each tensor's version counter (an in-place edit,
    ``q_proj.weight.mul_(3)``, bumps it) and storage (a parameter replaced). Results kept for the model are keyed
    on it (``decoder.version``), so a changed model is run again; a replaced tensor is read anew."""
    entry = _MODELS.get(spec.name)
    if entry is None:
        return ()
    cfg, weights, tokenizer, model = entry
    current = _weights(model, spec.name)
    if current.keys() != weights.keys() or any(t.data_ptr() != weights[k].data_ptr() for k, t in current.items()):
        from .loaded import LOADED

        _MODELS[spec.name] = (cfg, current, tokenizer, model)  # a parameter replaced: read the new tensors
        LOADED.forget(spec.name)
    return tuple((t._version, t.data_ptr()) for t in current.values())


def _forget(name: str) -> None:
    """Drop what the engine keeps of an earlier model of this name (its source, its loaded copy, its tokens)."""
    from .decoder import tokenize_with
    from .loaded import LOADED

    if name in REGISTERED:
        LOADED.forget(name)
        tokenize_with.cache_clear()
        source.cache_clear()


def read(spec: ModelSpec, progress=None):
    """The registered model as a ``decoder.DecoderModel`` (nothing is converted: ``progress`` is never called)."""
    from .hf import decoder_model

    if spec.name not in _MODELS:
        raise ConfigError(f"no model is registered as {spec.name!r}: call attn_gui.register(model, tokenizer, "
                          f"name={spec.name!r}) in this session first")
    cfg, weights, tokenizer, _ = _MODELS[spec.name]
    return decoder_model(spec, cfg, weights, tokenizer, Path(spec.name))


def available(spec: ModelSpec) -> bool:
    return spec.name in _MODELS


def install_hint(spec: ModelSpec) -> str:
    return f"attn_gui.register(model, tokenizer, name={spec.name!r})"

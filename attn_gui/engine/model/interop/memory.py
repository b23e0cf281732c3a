"""A model object in memory (``attn_gui.register``): a transformers decoder, never saved, read like a folder.

``register(model, tokenizer, name)`` takes a transformers ``PreTrainedModel`` of a decoder
family of ``families.FAMILIES`` (Llama, Mistral, Qwen2, Qwen3, GPT-2), or a TransformerLens 4
``TransformerBridge`` around one (``bridge.py``: its tokenizer by default, the tensors it runs,
compatibility mode's processed weights honoured, hooks refused): its spec comes from
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

import torch

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ...base.errors import ConfigError
from ...specs.catalog import MODELS, REGISTERED
from ..registry import source
from . import bridge as bridge_io
from .bridge import class_names
from ...specs.families import FAMILIES
from ...specs.spec import ModelSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEFAULT_NAME = "in-memory"
Ends = tuple[int | None, int | None] | None  # a bridge's tokens around a text (bridge.to_tokens'), else None
# name: (config dict, weights, tokenizer, a function reading the weights that run now, a bridge's ends)
_MODELS: dict[str, tuple[dict, dict, object, Callable[[], dict], Ends]] = {}


def _tokenizer(tokenizer) -> Tokenizer:
    """``tokenizer`` as a ``tokenizers.Tokenizer``."""
    names = class_names(tokenizer)
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


def _one_device(state: dict, name: str) -> None:
    """Refuse weights on the meta device or split across devices, in one line."""
    devices = sorted({str(t.device) for t in state.values()})
    if "meta" in devices:
        raise ConfigError(f"{name}: the model's weights are on the meta device (not loaded); load it with "
                          f"its weights (no device_map='meta', no init_empty_weights) before registering it")
    if len(devices) > 1:
        raise ConfigError(f"{name}: the model is split across devices ({', '.join(devices)}); move it to one "
                          f"(model.to('cpu')) before registering it")


def _weights(state: dict, name: str) -> dict:
    """The model's tensors ``state`` under transformers' causal-LM names, detached (sharing their memory)."""
    _one_device(state, name)
    weights = {key: t.detach() for key, t in state.items()}
    if not any(key.startswith(("model.", "transformer.", "gpt_neox.")) for key in weights):  # a bare LlamaModel
        prefix = "transformer." if "wte.weight" in weights else "model."
        if "embed_in.weight" in weights:  # a bare GPTNeoXModel
            prefix = "gpt_neox."
        weights = {prefix + key: t for key, t in weights.items()}
    if "gpt_neox.embed_in.weight" in weights and "lm_head.weight" in weights:  # transformers 5's name; saved: embed_out
        weights["embed_out.weight"] = weights.pop("lm_head.weight")
    return weights


def register(model, tokenizer=None, name: str | None = None) -> str:
    """Make the transformers model object, or TransformerLens bridge, ``model`` a model of the engine, named
    ``name``; returns the name.

    Parameters
    ----------
    model : transformers.PreTrainedModel or transformer_lens.model_bridge.TransformerBridge
        A decoder of a family the engine reads (Llama, Mistral, Qwen2, Qwen3, GPT-2, ...), with or
        without its LM head, on one device, in any floating dtype; or a TransformerLens 4 bridge
        around one, plain or in compatibility mode (``bridge.py``: its folded and centred weights
        are read as they are; hooks on it are refused).
    tokenizer : transformers tokenizer (fast) or tokenizers.Tokenizer, optional
        Its ids must index the model's embedding. Needed with a transformers model; a bridge's
        own (``bridge.tokenizer``) by default, and then a text is read as ``bridge.to_tokens``
        reads it (its ``cfg.default_prepend_bos``: no BOS for Qwen2, Qwen3, GPT-NeoX).
    name : str, optional
        What ``AttentionConfig(model=...)`` calls it (default "in-memory"); registering a name
        again replaces the model it names.

    Raises
    ------
    ConfigError
        In one line: an unsupported object or family, weights on the meta device or split
        across devices, a tokenizer that does not fit the model, or a name taken by a bundled
        model; logits that differ from the engine's on a few tokens (a step the engine does not
        compute, a config edited after the model was built); a bridge's hooks (``_checked``).
    """
    name = _checked_name(name)
    classes = class_names(model)
    if "HookedTransformer" in classes:
        raise ConfigError("a TransformerLens 3 HookedTransformer is not read: register a TransformerLens 4 "
                          "TransformerBridge, or the transformers model it was made from")
    bridge = model if bridge_io.is_bridge(model) else None
    own = tokenizer is None  # a bridge's own tokenizer: a text is read as bridge.to_tokens reads it
    if bridge is not None:
        model, tokenizer = bridge_io.unwrap(bridge, tokenizer, name)
        classes = class_names(model)
    elif tokenizer is None:
        raise ConfigError("register() needs the model's tokenizer with a transformers model: "
                          "register(model, tokenizer, name=...)")
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
    from ...readers.hf.spec import config_spec
    from ...readers.hf.weights import decoder_model

    about = bridge_io.label(bridge, model) if bridge is not None else type(model).__name__
    spec = config_spec(cfg, name, where, f"{name}, {about} in memory", reader="memory")

    def reread() -> dict:  # the tensors that run now (``version`` reads them again to see a change)
        if bridge is None:
            return _weights(model.state_dict(), name)
        if name in _MODELS:  # registered: a hook added since is refused as one at registration is
            bridge_io.refuse_hooks(bridge, name, after=True)
        tensors = bridge_io.hf_tensors(model)  # transformers' own, GPT-2's Q/K/V and TransformerLens' b_U settled
        _one_device(tensors, name)
        tensors = bridge_io.fused_qkv(bridge, tensors, str(kind), name)
        return _weights(bridge_io.carry_unembedding_bias(bridge, tensors, family.norm, name), name)

    weights = reread()
    backend = _tokenizer(tokenizer)
    built = decoder_model(spec, cfg, weights, backend, where)  # checks the weights against the config
    rows = built.weights["model.embed_tokens.weight"].shape[0]
    top = max(backend.get_vocab(with_added_tokens=True).values())
    if top >= rows:
        raise ConfigError(f"{name}: the tokenizer's ids go up to {top:,}, past the model's {rows:,} embedding rows: "
                          f"it is not this model's tokenizer")
    ends = _checked(bridge, model, built, own, name)
    _forget(name)
    REGISTERED[name] = spec
    _MODELS[name] = (cfg, weights, backend, reread, ends)
    return name


def _checked_name(name: str | None) -> str:
    """``name`` (None: the default) where it can name a registered model; ``ConfigError`` in one line otherwise."""
    name = DEFAULT_NAME if name is None else name
    if not isinstance(name, str) or not name.strip() or "/" in name or "\\" in name or name.endswith(".gguf"):
        raise ConfigError(f"a registered model's name is a word, no path; got {name!r:.40}")
    if name in MODELS or name in ("none",):
        raise ConfigError(f"{name!r} is a bundled model's name; choose another")
    return name


def _checked(bridge, model, built, own: bool, name: str) -> Ends:
    """Refuse (one line) a model the engine does not read as it runs: a bridge's logits from a text (with its own
    tokenizer, read as ``bridge.to_tokens`` reads it: the tokens returned) or from ids, a transformers model's
    against its own forward."""
    if bridge is None:
        bridge_io.same_as_model(model, built, name)
        return None
    ends = bridge_io.bridge_ends(bridge, built, name) if own else None
    bridge_io.same_logits(bridge, _ended(built, ends), name, from_text=own)
    return ends


def version(spec: ModelSpec) -> tuple:
    """What changes when the registered model's weights change: each tensor's version counter (an in-place edit,
    ``q_proj.weight.mul_(3)``, bumps it) and storage (a parameter replaced, or a bridge's
    ``enable_compatibility_mode()``, which writes new tensors). Results kept for the model are keyed on it
    (``decoder.version``), so a changed model is run again; replaced tensors are read anew."""
    entry = _MODELS.get(spec.name)
    if entry is None:
        return ()
    cfg, weights, tokenizer, reread, ends = entry
    current = reread()
    if current.keys() != weights.keys() or any(t.data_ptr() != weights[k].data_ptr() for k, t in current.items()):
        from ..loaded import LOADED

        _MODELS[spec.name] = (cfg, current, tokenizer, reread, ends)  # a tensor replaced: read the new ones
        LOADED.forget(spec.name)
    return (*((t._version, t.data_ptr()) for t in current.values()), _checksum(current))


SAMPLE = 4096  # elements of each weight summed by ``_checksum``


def _checksum(tensors: dict) -> tuple[float, ...]:
    """A sum of a strided sample of each tensor (about ``SAMPLE`` elements, its first among them): an
    edit through ``.data`` (``param.data.mul_(3)``) bumps no version counter, so the weights themselves are looked
    at. One copy to the host for all of them; an edit of a few elements between the samples is not seen."""
    with torch.no_grad():
        sums = [_sample(t).sum(dtype=torch.float32) for t in tensors.values() if t.numel()]
        return tuple(torch.stack(sums).cpu().tolist()) if sums else ()


def _sample(t: torch.Tensor) -> torch.Tensor:
    """About ``SAMPLE`` elements of ``t`` as a view (no copy): strided over the whole of a contiguous tensor, over
    the rows of another (a transposed or split weight, which ``reshape`` would copy whole)."""
    if t.is_contiguous():
        return t.view(-1)[::max(1, t.numel() // SAMPLE)]
    return t[::max(1, min(t.shape[0], t.numel() // SAMPLE))] if t.dim() else t


def registered(name: str) -> tuple[dict, dict, object]:
    """What ``register`` keeps of the model ``name``: its config dict, its weights (transformers' names) and
    its ``tokenizers.Tokenizer``."""
    if name not in _MODELS:
        raise ConfigError(f"no model is registered as {name!r}: call attn_gui.register(model, tokenizer, "
                          f"name={name!r}) in this session first")
    return _MODELS[name][:3]


def _forget(name: str) -> None:
    """Drop what the engine keeps of an earlier model of this name (its source, its loaded copy, its tokens)."""
    from ..decoder.source import tokenize_with
    from ..loaded import LOADED

    if name in REGISTERED:
        LOADED.forget(name)
        tokenize_with.cache_clear()
        source.cache_clear()


def read(spec: ModelSpec, progress=None):
    """The registered model as a ``decoder.DecoderModel`` (nothing is converted: ``progress`` is never called)."""
    from ...readers.hf.weights import decoder_model

    cfg, weights, tokenizer = registered(spec.name)
    return _ended(decoder_model(spec, cfg, weights, tokenizer, Path(spec.name)), _MODELS[spec.name][4])


def _ended(built, ends: Ends):
    """``built`` (``decoder.DecoderModel``) adding ``ends`` around a text (a bridge's), or as its tokenizer adds."""
    return built if ends is None else replace(built, add_bos=ends[0], add_eos=ends[1])


def available(spec: ModelSpec) -> bool:
    return spec.name in _MODELS


def install_hint(spec: ModelSpec) -> str:
    return f"attn_gui.register(model, tokenizer, name={spec.name!r})"

"""A model in a local Hugging Face folder (``--model PATH``): its spec, read from config.json.

The folder holds config.json, the weights as safetensors (one file, or shards listed in
model.safetensors.index.json) and tokenizer.json. Its spec is read from config.json (and
the special tokens from tokenizer.json) only when a config first needs the model's sizes
(``spec_for``, cached); the weights are read by ``weights``. Nothing is downloaded and
transformers is never imported.

Families are declared, not coded: the one table ``families.FAMILIES`` (shared with GGUF
files) says which path runs a ``model_type`` (the one decoder of ``decoder.py`` and ``llama.py``,
or the one encoder of ``encoder.py``) and how its config.json names its sizes. Decoders: Llama,
Mistral (its sliding window as the engine's window mask), Qwen2 (Q/K/V biases, found in the
weights), Qwen3 (each head's q and k RMS-normed before RoPE, ``Family.qk_norm``), Gemma 2 (local
and global layers alternating, query_pre_attn_scalar, attention and final soft-caps, sandwich
norms, √d embedding scale, GeGLU), Gemma 3, OLMo 2 (q/k norms over all heads, norms after each
block), Phi-3 (fused qkv and gate_up, split in ``weights``), GPT-2 (LayerNorm, learned positions,
GELU; its weights renamed in ``weights``) and GPT-NeoX (partial rotary, parallel residual, fused
per-head query_key_value split in ``weights``). Encoders: BERT, RoBERTa (positions counted after
the padding id), DistilBERT (its own weight names), read by ``encoder.py``.
"""

from __future__ import annotations

import functools
import json
from typing import Any
from pathlib import Path

from ...base.disk import json_object
from ...base.errors import ConfigError
from .. import checks
from ...specs.defaults import completed
from ...specs.families import FAMILIES, LOADING_REFUSES, MAX_TOKENS, Family, decoder_spec, regular
from ...specs.spec import ModelSpec
from ...text.tokenizer_json import special_tokens


GENERIC = {"model", "models", "weights", "checkpoint", "hf", "final"}  # labelled with their parent folder's name


# BERT's and Llama's names for the sizes; a family's ``names`` replace some
KEYS = {"heads": "num_attention_heads", "d_model": "hidden_size", "layers": "num_hidden_layers",
        "positions": "max_position_embeddings", "eps": "layer_norm_eps", "act": "hidden_act"}
# transformers' ACT2FN names -> llama.act's: erf GELU, tanh GELU, ReLU, SiLU
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu",
               "silu": "silu", "swish": "silu"}


def family_of(cfg: dict, folder: Path) -> Family:
    """The declared family of a config.json; ``ConfigError`` naming the supported ones otherwise."""
    kind = cfg.get("model_type")
    if kind not in FAMILIES:
        from ..transformers_spec import refusal

        raise refusal(kind, folder)
    return FAMILIES[kind]


def size(cfg: dict, family: Family, key: str, default=None):
    """The config's value for ``key`` (heads, d_model, layers, positions, eps, act) under the family's own name."""
    return cfg.get(dict(family.names).get(key, KEYS[key]), default)


def activation(cfg: dict, family: Family, folder: Path) -> str:
    """The feed-forward's activation as ``encoder`` / ``llama`` name it (gelu, gelu_tanh, relu, silu);
    ``ConfigError`` naming the field for another."""
    act = size(cfg, family, "act") or family.act
    if act not in ACTIVATIONS:
        raise ConfigError(f"{folder.name}: {dict(family.names).get('act', KEYS['act'])} {act!r} is not supported; "
                          f"supported: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[act]


def check_fields(cfg: dict, family: Family, folder: Path) -> None:
    """Refuse, in one line naming it, a config.json field that transformers' own modeling code for the family reads
    and attn-gui does not compute (``Family.refuses``; DeBERTa's and ModernBERT's in ``encoder_config.FIELDS``)
    unless null or false, or one of its ``fixed`` fields at another value. Every other field is inert: the
    honoured ones are computed, and one transformers never reads (``tie_weights_``, ``reference_compile``) changes
    no number, as it changes none of transformers'."""
    from ...specs.encoder_config import FIELDS as DECLARED

    fixed, refused = dict(family.fixed), set(family.refuses)
    if cfg.get("model_type") in DECLARED:  # DeBERTa-v2, ModernBERT: encoder_config refuses theirs by value
        refused = set()
    refused |= set(LOADING_REFUSES)
    for key, value in cfg.items():
        if key in fixed:
            if value != fixed[key] and not (fixed[key] is False and value is None):  # null: off
                raise ConfigError(f"{folder.name}: config.json has {key} = {json.dumps(value):.40}; attn-gui runs "
                                  f"{family.label} only with {key} = {json.dumps(fixed[key])}")
        elif key in refused and value not in (None, False):
            reader = "loading" if key in LOADING_REFUSES else family.label
            raise ConfigError(f"{folder.name}: config.json field {key} = {json.dumps(value):.40} is read by "
                              f"transformers' {reader} and not computed by attn-gui (it changes the numbers)")


def sliding_window(cfg: dict, family: Family, folder: Path) -> int | None:
    """The window of keys every layer applies, or None; ``ConfigError`` when only some layers slide.

    Mistral's ``sliding_window`` holds in every layer (null: none). Qwen's holds only with
    ``use_sliding_window``, in the layers ``layer_types`` names "sliding_attention" (without
    them: from layer ``max_window_layers`` on), as transformers reads it.
    """
    window = cfg.get("sliding_window")
    if window is None or family.window in ("", "types"):
        return None
    if family.window == "every":
        return int(window)
    if not cfg.get("use_sliding_window"):
        return None
    layers = int(size(cfg, family, "layers"))
    first = int(cfg.get("max_window_layers", 28))
    kinds = cfg.get("layer_types") or ["sliding_attention" if i >= first else "full_attention" for i in range(layers)]
    sliding = [i + 1 for i, kind in enumerate(kinds) if kind == "sliding_attention"]
    if not sliding:
        return None
    if len(sliding) < len(kinds):
        raise ConfigError(f"{folder.name} slides a window of {window} keys in {len(sliding)} of its {len(kinds)} "
                          f"layers (from layer {sliding[0]}); attn-gui applies one window to every layer, "
                          "per-layer windows not yet")
    return int(window)


# the keys each scaled RoPE needs (transformers' modeling_rope_utils), and those it may have
SCALINGS = {"linear": ("factor",), "dynamic": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor"),
            "yarn": (), "longrope": ("short_factor", "long_factor")}
SCALING_KEYS = {"rope_type", "type", "rope_theta", "factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
                "mscale_all_dim", "truncate", "short_factor", "long_factor", "partial_rotary_factor"}


def layer_windows(cfg: dict, family: Family) -> tuple[int | None, ...]:
    """Each layer's window where layer_types alone says which layers slide (Gemma 2; without it: the even
    layers counted from 0, as transformers' Gemma2Config); () for any other family."""
    if family.window != "types":
        return ()
    window = cfg.get("sliding_window")
    return tuple(int(window) if kind == "sliding_attention" and window is not None else None
                 for kind in layer_types(cfg, family))


def layer_types(cfg: dict, family: Family) -> list[str]:
    """Each layer's kind, "sliding_attention" or "full_attention": config.json's layer_types, else every
    pattern-th layer global (Gemma 2: 2, Gemma 3: sliding_window_pattern, 6), as transformers' configs."""
    pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or family.window_pattern)
    return cfg.get("layer_types") or ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                      for i in range(int(size(cfg, family, "layers")))]


def layer_ropes(cfg: dict, family: Family, folder: Path) -> tuple[tuple[tuple[float, tuple], ...], tuple]:
    """Gemma 3's RoPE per layer, as Gemma3TextConfig reads it: ``rope_parameters`` by layer type (else
    rope_theta, rope_scaling for the global layers and rope_local_base_freq for the local ones; bases 1e6
    and 1e4 by default); ((), ()) for any other family. Returns (each layer's (base, scaling), the global one)."""
    if not family.layer_rope:
        return (), ()
    given = cfg.get("rope_parameters") or {}
    by_type = {t: dict(given.get(t) or {"rope_type": "default"}) for t in ("sliding_attention", "full_attention")}
    flat = {k: v for k, v in given.items() if k not in by_type}
    if flat:
        raise ConfigError(f"{folder.name}: rope_parameters has {sorted(flat)[0]} outside sliding_attention and "
                          "full_attention, which attn-gui does not read for Gemma 3")
    if cfg.get("rope_scaling"):
        by_type["full_attention"].update(cfg["rope_scaling"])
    by_type["full_attention"].setdefault("rope_theta", cfg.get("rope_theta") or 1e6)
    by_type["sliding_attention"].setdefault("rope_theta", cfg.get("rope_local_base_freq") or 1e4)
    ropes = {t: rope({**cfg, "rope_scaling": None, "rope_theta": None, "rope_parameters": p}, folder)
             for t, p in by_type.items()}
    return tuple(ropes[kind] for kind in layer_types(cfg, family)), ropes["full_attention"]


def rope(cfg: dict, folder: Path) -> tuple[float, tuple]:
    """RoPE's base and scaling as transformers 5 reads them: ``rope_scaling``, else ``rope_parameters``
    (its ``rope_theta``, else the config's, else 10000).

    The scaling (llama3, linear, dynamic, yarn, longrope; ``kernel.rope.inv_freq``) as sorted (key,
    value) pairs, with ``original_max_position_embeddings`` (the config's own first, as transformers
    reads Phi-3's) and ``max_position_embeddings``; () for the plain RoPE. Another kind, a missing or
    unknown key, or a partial rotation is refused in one line naming it.
    """
    params = dict(cfg.get("rope_scaling") or cfg.get("rope_parameters") or {})
    kind = params.pop("rope_type", params.pop("type", "default"))
    theta = params.pop("rope_theta", cfg.get("rope_theta", cfg.get("rotary_emb_base")))  # GPT-NeoX's older name
    base = 1e4 if theta is None else float(theta)
    if kind == "default":
        return base, ()
    if kind not in SCALINGS:
        raise ConfigError(f"{folder.name} uses RoPE scaling {kind!r}, which attn-gui does not apply (it applies "
                          f"{', '.join(SCALINGS)})")
    unknown = sorted(set(params) - SCALING_KEYS)
    missing = [key for key in SCALINGS[kind] if params.get(key) is None]
    if unknown or missing:
        raise ConfigError(f"{folder.name}: its {kind} RoPE scaling " + (f"has {unknown[0]}, which attn-gui does not "
                          "read" if unknown else f"lacks {missing[0]}"))
    partial = params.pop("partial_rotary_factor", cfg.get("partial_rotary_factor", cfg.get("rotary_pct", 1.0)))
    if partial != 1.0:
        raise ConfigError(f"{folder.name} rotates part of each head (partial_rotary_factor {partial}) with a scaled "
                          "RoPE, which attn-gui does not apply yet")
    positions = int(cfg.get("max_position_embeddings") or MAX_TOKENS)
    params["max_position_embeddings"] = positions
    if kind in ("llama3", "yarn", "longrope"):
        params["original_max_position_embeddings"] = int(cfg.get("original_max_position_embeddings") or params.get(
            "original_max_position_embeddings") or positions)
    return base, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (*params.items(),
                                                                                     ("rope_type", kind))))


def rope_dims(cfg: dict, family: Family, d_k: int, where: str = "") -> int | None:
    """The dimensions of each head RoPE turns, where the family reads a partial share (None: all d_k).

    The share is ``rope_parameters["partial_rotary_factor"]`` (transformers 5), else the top-level
    ``partial_rotary_factor`` or GPT-NeoX's ``rotary_pct``, else the family's default, as transformers reads it.
    """
    params = cfg.get("rope_parameters") or {}
    share = params.get("partial_rotary_factor", cfg.get("partial_rotary_factor", cfg.get("rotary_pct")))
    if family.rotary is None:
        if share is not None and float(share) != 1.0:  # read, so never ignored: this path turns every dimension
            raise ConfigError(f"{where}config.json has partial_rotary_factor = {share}; attn-gui's {family.label} "
                              "path turns every dimension of a head (only Phi-3 and GPT-NeoX turn a part)")
        return None
    dims = int(d_k * float(family.rotary if share is None else share))
    return None if dims == d_k else dims


def position_offset(cfg: dict) -> int:
    """RoBERTa counts positions from its padding id + 1; BERT and DistilBERT from 0."""
    return int(cfg.get("pad_token_id", 1)) + 1 if cfg.get("model_type") == "roberta" else 0


@functools.cache
def spec_for(path: str, stamp: tuple = ()) -> ModelSpec:
    """The spec of the model folder at ``path``, from its config.json; ``ConfigError`` in one line otherwise.
    ``stamp``: the files' identity (``catalog.files_identity``), so that a folder rewritten in place is read again."""
    checks.model_path(path)
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"model {path!r:.80} is neither a bundled model, a model folder nor a .gguf file")
    for needed in ("config.json", "tokenizer.json"):
        if not regular(folder / needed):
            ggufs = sorted(p.name for p in folder.glob("*.gguf")) if needed == "config.json" else []
            also = f"; open one of its GGUF files: {', '.join(ggufs[:3])}{' …' if len(ggufs) > 3 else ''}" if ggufs \
                else ""
            raise ConfigError(f"{folder.name} has no {needed}{also}")
    cfg = json_object(folder / "config.json", f"{folder.name}/config.json")
    name = folder.name if folder.name.lower() not in GENERIC else f"{folder.parent.name}/{folder.name}"
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):  # the HF cache's
        name = folder.parent.parent.name.removeprefix("models--").replace("--", "/")  # ORG/NAME, not the commit
    if cfg.get("model_type") not in FAMILIES:  # outside the table: transformers runs it, where it is installed
        from .. import transformers_spec

        if transformers_spec.installed():
            return transformers_spec.spec_for(cfg, str(path), folder, name)
    return config_spec(cfg, str(path), folder, name, lambda: special_tokens(folder))


def config_spec(cfg: dict, path: str, folder: Path, name: str, special=tuple, reader: str = "hf") -> ModelSpec:
    """The spec of a model of config ``cfg`` (config.json's dict, or ``model.config.to_dict()``), named
    ``path`` and labelled ``name``; ``special()`` gives an encoder's special tokens, ``reader`` is the
    module that reads a decoder's weights (``memory`` for a model object). Messages name ``folder.name``.
    A field ``cfg`` leaves out is read at transformers' default for the family (``defaults.completed``)."""
    cfg = completed(cfg)
    try:
        family = family_of(cfg, folder)
        check_fields(cfg, family, folder)
        checks.config(f"{folder.name}/config.json", cfg, {k: size(cfg, family, k) for k in KEYS})
        activation(cfg, family, folder)
        heads, d = int(size(cfg, family, "heads")), int(size(cfg, family, "d_model"))
        d_k = int(cfg.get("head_dim") or d // heads)
        positions = int(size(cfg, family, "positions", MAX_TOKENS)) - position_offset(cfg)
        ropes, global_rope = layer_ropes(cfg, family, folder)
        rope_base, scaling = (None, ()) if family.positions == "learned" or family.path == "encoder" else \
            global_rope or rope(cfg, folder)
        dims = rope_dims(cfg, family, d_k, f"{folder.name}: ") if rope_base is not None else None
        if dims is not None and scaling:  # its scaled frequencies are over every dimension here
            raise ConfigError(f"{folder.name} rotates {dims} of each head's {d_k} dimensions with a scaled RoPE "
                              f"({dict(scaling)['rope_type']}), which attn-gui does not apply yet")
        # a decoder streams (engine.compute) up to its own length; an encoder and soft-capped scores keep their maps
        softcap = optional_float(cfg.get("attn_logit_softcapping")) if family.softcap else None
        limit = positions if family.path != "encoder" and softcap is None else min(MAX_TOKENS, positions)
        common: dict[str, Any] = dict(layers=int(size(cfg, family, "layers")), heads=heads, d_model=d, d_k=d_k,
                                      d_v=d_k, max_tokens=limit)
        if family.path == "encoder":
            from ...specs.encoder_config import spec_facts

            facts = {"has_bias": True, "norm": family.norm, "block": family.block,
                     **spec_facts(cfg, family, folder, common["layers"])}
            return ModelSpec(path, f"{name} ({family.label} encoder)", module="encoder",
                             special_tokens=special(), **common, **facts)
        uncapped = cfg.get("attn_logit_softcapping") if not family.softcap else None
        return decoder_spec(path, f"{name} ({family.label} decoder)", reader, family,
                            parallel=bool(cfg.get("use_parallel_residual", True)),
                            notes=(f"attn_logit_softcapping = {uncapped:g} is not applied: transformers' "
                                   f"{family.label} attention does not cap its scores",) if uncapped else (),
                            scale=bool(cfg.get("scale_attn_weights", True)),
                            layer_scale=bool(cfg.get("scale_attn_by_inverse_layer_idx", False)),
                            kv_heads=int(cfg.get("num_key_value_heads") or heads),
                            has_bias=bool(cfg.get("attention_bias", cfg.get("model_type") in
                                                  ("qwen2", "gpt2", "gpt_neox"))),
                            rope_base=rope_base, rope_scaling=scaling, rope_dims=dims,
                            window=sliding_window(cfg, family, folder),
                            layer_windows=layer_windows(cfg, family),
                            layer_rope_bases=tuple(base for base, _ in ropes),
                            layer_rope_scalings=tuple(scaling for _, scaling in ropes),
                            softcap=softcap,
                            score_scalar=optional_float(cfg.get("query_pre_attn_scalar")), **common)
    except ConfigError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, ArithmeticError) as exc:
        raise ConfigError(f"{folder.name}/config.json is not a model config: {exc!s:.80}") from None


def optional_float(value) -> float | None:
    return None if value is None else float(value)

"""A folder's spec where its model_type is outside the family table and transformers reads it
(``model.interop.via_transformers`` runs it): whether transformers is installed, the one line that refuses such
a folder, and the spec transformers' own config class gives. Imports nothing heavy until a folder asks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ..base.errors import ConfigError
from ..specs.families import MAX_TOKENS
from ..specs.spec import ModelSpec
from . import checks

HINT = "pip install attn-gui[transformers]"


def installed() -> bool:
    """Whether transformers can be imported here (imports nothing)."""
    try:
        return importlib.util.find_spec("transformers") is not None
    except (ImportError, ValueError):  # sys.modules["transformers"] = None: as if not installed
        return False


def refusal(kind, folder: Path, why: str = "") -> ConfigError:
    """The one line refusing a folder of model_type ``kind`` (``why``: what transformers says of it): the types
    the table reads, and how to read others (install transformers; or which it reads)."""
    from ..specs.families import FAMILIES

    beyond = ("others open through transformers" if installed() else
              f"other model_types open through transformers once it is installed ({HINT})")
    return ConfigError(f"{folder.name} is a {kind!r} model; supported model_types: {', '.join(FAMILIES)}; "
                       f"{beyond}{why}")


def spec_for(cfg: dict, path: str, folder: Path, name: str) -> ModelSpec:
    """The spec of a folder of a model_type outside the table, read by transformers' own config class;
    ``ConfigError`` in one line for remote code, a model_type transformers lacks or a config it refuses."""
    kind = cfg.get("model_type")
    if cfg.get("auto_map"):
        raise ConfigError(f"{folder.name}: config.json has auto_map: its {kind!r} model runs code from the folder "
                          "(trust_remote_code), which attn-gui never executes")
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if kind not in CONFIG_MAPPING_NAMES:
        raise refusal(kind, folder, ", not this one: transformers here lacks it")
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001  transformers raises many kinds for a bad config: one line
        raise ConfigError(f"{folder.name}/config.json is refused by transformers: {str(exc).splitlines()[0]:.100}") \
            from None
    if getattr(config, "is_encoder_decoder", False):  # two stacks and cross-attention: no one layer list
        raise refusal(kind, folder, ", not encoder-decoders (is_encoder_decoder)")
    where = f"{folder.name}/config.json"
    layers = checks.whole(where, "num_hidden_layers", getattr(config, "num_hidden_layers", None))
    heads = checks.whole(where, "num_attention_heads", getattr(config, "num_attention_heads", None))
    d = checks.whole(where, "hidden_size", getattr(config, "hidden_size", None))
    d_k = int(getattr(config, "head_dim", None) or d // heads)
    kv_heads = getattr(config, "num_key_value_heads", None)
    positions = getattr(config, "max_position_embeddings", None) or MAX_TOKENS
    from ..text.tokenizer_json import special_tokens

    about = (f"read through transformers (eager attention, output_attentions and hooks): attn-gui does not run "
             f"{kind}'s attention itself",
             "output is the attention module's output, before the residual")
    # a causal language model (its architectures name a ForCausalLM) is a decoder: it predicts the next token, and
    # generation, attribution and interventions say which step of it they cannot reach through transformers
    causal = any("ForCausalLM" in a for a in cfg.get("architectures") or []) or bool(cfg.get("is_decoder"))
    return ModelSpec(path, f"{name} ({kind} through transformers)", module="via_transformers", layers=layers,
                     causal=causal,
                     heads=heads, d_model=d, d_k=d_k, d_v=d_k, max_tokens=min(MAX_TOKENS, int(positions)),
                     has_bias=False, special_tokens=special_tokens(folder),
                     kv_heads=int(kv_heads) if kv_heads else None,
                     x_is="the attention module's input, as transformers runs it", about=about,
                     through=f"{kind} through transformers")

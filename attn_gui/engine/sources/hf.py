"""A Llama-family decoder from a local Hugging Face folder (``--model PATH``), run by ``llama.py``.

The folder holds config.json, the weights as safetensors (one file, or shards listed in
model.safetensors.index.json) and tokenizer.json. Its spec is read from config.json only
when a config first needs the model's sizes (``spec_for``, cached); the weights are read
memory-mapped with ``safetensors`` and the tokenizer with ``tokenizers``. Nothing is
downloaded and transformers is never imported. The families differ by a few declared
facts (``FAMILIES``), not by code: Qwen2's Q/K/V biases are found in its weights.
"""

from __future__ import annotations

import functools
import json
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .spec import ModelSpec

MAX_TOKENS = 512  # as the bundled models: the maps stay readable


@dataclass(frozen=True)
class Family:
    """What one config.json ``model_type`` declares beyond the Llama decoder."""

    label: str
    sliding_window: bool = False  # Mistral: a window of keys, capped out here by max_tokens


FAMILIES = {"llama": Family("Llama"), "mistral": Family("Mistral", sliding_window=True),
            "qwen2": Family("Qwen2")}


def weight_files(folder: Path) -> list[Path]:
    """The folder's safetensors files (the shards named by the index, else model.safetensors)."""
    index = folder / "model.safetensors.index.json"
    if _regular(index):
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [folder / n for n in names]
    else:
        files = [folder / "model.safetensors"]
    missing = [f.name for f in files if not _regular(f)]
    if missing:
        raise ConfigError(f"{folder.name} has no weights: {', '.join(missing)} is missing")
    return files


def _regular(path: Path) -> bool:
    """A regular file (a FIFO or a device is never opened: reading one could block forever)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


@functools.cache
def spec_for(path: str) -> ModelSpec:
    """The spec of the model folder at ``path``, from its config.json; ``ConfigError`` in one line otherwise."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ConfigError(f"model {path!r:.80} is neither a bundled model nor a folder")
    for needed in ("config.json", "tokenizer.json"):
        if not _regular(folder / needed):
            raise ConfigError(f"{folder.name} has no {needed}")
    try:
        cfg = json.loads((folder / "config.json").read_text())
        kind = cfg.get("model_type")
        if kind not in FAMILIES:
            raise ConfigError(f"{folder.name} is a {kind!r} model; supported model_types: {', '.join(FAMILIES)}")
        heads, d = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
        d_k = int(cfg.get("head_dim") or d // heads)
        window = cfg.get("sliding_window") if FAMILIES[kind].sliding_window else None
        limit = min(MAX_TOKENS, int(cfg.get("max_position_embeddings", MAX_TOKENS)), int(window or MAX_TOKENS))
        return ModelSpec(str(path), f"{folder.name} ({FAMILIES[kind].label} decoder)", module="hf",
                         layers=int(cfg["num_hidden_layers"]), heads=heads,
                         kv_heads=int(cfg.get("num_key_value_heads") or heads), d_model=d, d_k=d_k, d_v=d_k,
                         max_tokens=limit, has_bias=bool(cfg.get("attention_bias", kind == "qwen2")),
                         causal=True, rope_base=float(cfg.get("rope_theta", 10000.0)),
                         x_is="RMSNorm of the residual stream entering the layer",
                         about=("output is the attention block's output, before the residual",
                                "the model is causal by construction: the causal mask is always on"))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{folder.name}/config.json is not a model config: {exc!s:.80}") from None


def read(spec: ModelSpec):
    """The folder's weights (memory-mapped, stored dtype), tokenizer and constants, as ``smollm2.load_model`` keeps them."""
    from safetensors import safe_open
    from tokenizers import Tokenizer

    from .byte_bpe import readable
    from .llama import LlamaShape
    from .smollm2 import SmolLM2

    folder = Path(spec.name).expanduser()
    cfg = json.loads((folder / "config.json").read_text())
    weights = {}
    try:
        for file in weight_files(folder):
            with safe_open(str(file), framework="pt") as f:
                for key in f.keys():
                    weights[key] = f.get_tensor(key)
    except ConfigError:
        raise
    except Exception as exc:  # a truncated or corrupt file: safetensors' own error, in one line
        raise ConfigError(f"{folder.name}: the weights cannot be read ({exc!s:.80})") from None
    expected = (spec.heads * spec.d_k, spec.d_model)
    got = tuple(weights.get("model.layers.0.self_attn.q_proj.weight", ()).shape) if weights else ()
    if got != expected:
        raise ConfigError(f"{folder.name}: config.json says W_q is {expected}, the weights hold {got}")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    special = frozenset(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special)
    ids = tokenizer.get_vocab(with_added_tokens=True)
    texts = [""] * (max(ids.values()) + 1)
    for tok, i in ids.items():
        texts[i] = readable(tok, i in special)
    eos = cfg.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    shape = LlamaShape(spec.layers, spec.heads, spec.kv_heads, spec.d_k, float(cfg.get("rms_norm_eps", 1e-6)),
                       spec.rope_base)
    return SmolLM2(spec, shape, weights, tokenizer, tuple(texts), special, -1 if eos is None else int(eos), None)


from .smollm2 import READERS, Source as _Decoder  # noqa: E402  (torch: imported with the source, not the spec)

READERS["hf"] = read


class Source(_Decoder):
    """A Llama-family folder: everything of the bundled decoder, its files from the folder."""

    install_hint = 'pip install -e ".[pretrained]" (safetensors and tokenizers read the folder)'

    def available(self) -> bool:
        import importlib.util

        return all(importlib.util.find_spec(m) is not None for m in ("safetensors", "tokenizers"))

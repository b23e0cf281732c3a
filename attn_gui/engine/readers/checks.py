"""What a model file declares, checked whole before anything is built from it: each refusal one line.

A model folder (config.json, a shard index, tokenizer.json, safetensors) and a GGUF file (its
header's counts and constants, its tensors) are read by ``readers/hf`` and ``readers/gguf``; those
call the checks here at the moment each part is read, so a corrupt or hostile file is a
``ConfigError`` naming the field, never a traceback, a huge allocation or a read outside the
folder:

- counts (layers, heads, K/V heads, sizes, vocabulary) are whole numbers within ``LIMITS``,
  before a list or tensor is sized from them (a header declaring 2^31 layers is refused at once);
- constants (RoPE's theta, the norm's epsilon) are finite and positive, as every peer assumes;
- a shard index names files inside its folder only (no absolute path, no ``..``, no symlink out),
  checked by name: the file named is never opened;
- the weights hold every tensor the decoder reads, each of the shape the config declares, and
  the tokenizer's ids all have a row of the embedding.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from ..base.disk import read_json
from ..base.errors import ConfigError

# Sane bounds, far above every published model (Llama 3.1 405B: 126 layers, 128 heads, d 16384;
# Gemma 3's vocabulary: 262,144), far below what would exhaust a machine before the weights are read.
LIMITS = {"layers": 1024, "heads": 1024, "kv_heads": 1024, "d_model": 65536, "d_k": 4096, "vocab": 2**24,
          "positions": 2**24, "window": 2**24}
PATH_CHARS = 4096  # PATH_MAX on Linux: a longer model path cannot name a file


def whole(where: str, field: str, value, hi: int | None = None, lo: int = 1) -> int:
    """``value`` as an int if it is a whole number ``lo`` to ``hi``; ``ConfigError`` naming ``field`` otherwise.

    A float with no fraction (32.0) is whole; 32.5, "32", true and null are not: a config says
    a size as a number, and a string or a fraction would be guessed at, silently.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            isinstance(value, float) and not value.is_integer():
        raise ConfigError(f"{where}: {field} must be a whole number; got {value!r:.40}")
    value = int(value)
    if value < lo or hi is not None and value > hi:
        top = f" to {hi:,}" if hi is not None else " or more"
        raise ConfigError(f"{where}: {field} must be {lo}{top}; got {value:,}")
    return value


def positive(where: str, field: str, value) -> float:
    """``value`` as a float if it is a finite number above 0 (RoPE's theta, an epsilon); ``ConfigError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: {field} must be a finite number above 0; got {value!r:.40}")
    return float(value)


def sizes(where: str, layers, heads, kv_heads, d_model, d_k=None) -> None:
    """The declared counts, each within ``LIMITS``, and the heads a whole multiple of the K/V heads."""
    layers = whole(where, "the layer count", layers, LIMITS["layers"])
    heads = whole(where, "the head count", heads, LIMITS["heads"])
    kv_heads = whole(where, "the K/V head count", kv_heads, LIMITS["kv_heads"])
    whole(where, "d_model", d_model, LIMITS["d_model"])
    if d_k is not None:
        whole(where, "the head size", d_k, LIMITS["d_k"])
    if heads % kv_heads:
        raise ConfigError(f"{where}: {heads} heads cannot share {kv_heads} K/V heads (not a divisor)")


# ---------------------------------------------------------------- files


def model_path(path: str) -> None:
    """A model path a file system can name: at most ``PATH_CHARS`` characters."""
    if len(path) > PATH_CHARS:
        raise ConfigError(f"model path is {len(path):,} characters long; a path has at most {PATH_CHARS:,}")


def config(where: str, cfg: dict, raw: dict) -> None:
    """config.json's values that size or change the computation, each of its type and range.

    ``raw`` holds the family's values by our names (heads, d_model, layers, positions, eps, act),
    None where absent. The activation is the family's to read (``hf.activation``).
    """
    heads = whole(where, "num_attention_heads", raw["heads"], LIMITS["heads"])
    d = whole(where, "hidden_size", raw["d_model"], LIMITS["d_model"])
    whole(where, "num_hidden_layers", raw["layers"], LIMITS["layers"])
    kv_heads = cfg.get("num_key_value_heads")
    if kv_heads is not None:
        kv_heads = whole(where, "num_key_value_heads", kv_heads, heads)
        if heads % kv_heads:
            raise ConfigError(f"{where}: num_key_value_heads {kv_heads} does not divide num_attention_heads {heads}")
    if cfg.get("head_dim") is not None:
        whole(where, "head_dim", cfg["head_dim"], LIMITS["d_k"])
    elif d % heads:
        raise ConfigError(f"{where}: hidden_size {d} is not a whole number of heads ({heads}) and no head_dim is "
                          "given")
    for field, value, hi in (("max_position_embeddings", raw["positions"], LIMITS["positions"]),
                             ("vocab_size", cfg.get("vocab_size"), LIMITS["vocab"])):
        if value is not None:
            whole(where, field, value, hi)
    if raw["eps"] is not None:
        positive(where, "the norm's epsilon", raw["eps"])
    if cfg.get("rms_norm_eps") is not None:
        positive(where, "rms_norm_eps", cfg["rms_norm_eps"])
    for field in ("rope_parameters", "rope_scaling"):
        if cfg.get(field) is not None and not isinstance(cfg[field], dict):
            raise ConfigError(f"{where}: {field} must be an object or null; got {cfg[field]!r:.40}")
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta", cfg.get("rope_theta"))
    if theta is not None:
        positive(where, "rope_theta", theta)
    if cfg.get("sliding_window") is not None:
        whole(where, "sliding_window", cfg["sliding_window"])


def shard_names(folder: Path, index: Path) -> list[Path]:
    """The shard files ``model.safetensors.index.json`` names, each a file inside ``folder``.

    An absolute name, a ``..`` or a symlink leading out of the folder is refused by name, before
    the file it names is opened (a model folder only ever reads files inside itself); the one
    exception is Hugging Face's cache, whose snapshot folders link to the files in its ``blobs``.
    """
    data = read_json(index, f"{folder.name}/{index.name}")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ConfigError(f"{folder.name}/{index.name} has no weight_map of tensor names to file names")
    inside = [Path(os.path.realpath(folder))]
    if folder.parent.name == "snapshots":  # Hugging Face's cache: snapshots/REV/NAME links to ../../blobs/HASH
        inside.append(Path(os.path.realpath(folder.parent.parent / "blobs")))
    files = []
    for name in sorted(set(weight_map.values())):
        real = Path(os.path.realpath(folder / name))  # resolves symlinks by reading links, opens no file
        if os.path.isabs(name) or not any(real != root and real.is_relative_to(root) for root in inside):
            raise ConfigError(f"{folder.name}/{index.name} names {name!r:.80}, which is outside the folder; "
                              "a model folder only reads files inside itself")
        files.append(folder / name)
    return files


@contextlib.contextmanager
def tokenizer_errors(where: str):
    """What ``tokenizers`` cannot build or parse (a bare ``Exception``: "Token `ĠrA` out of vocabulary"; a
    TypeError for a merge that is not two tokens), as ``ConfigError`` naming ``where``; only the block's
    tokenizer building runs inside, so these come from the data; anything else goes on."""
    try:
        yield
    except Exception as exc:
        if type(exc) not in (Exception, TypeError, ValueError, KeyError, IndexError):  # not the data's fault: a bug
            raise
        said = (str(exc).splitlines() or [""])[0]
        raise ConfigError(f"{where} is not a tokenizer tokenizers can build: {said:.80}") from None


def tokenizer(file: Path):
    """The ``tokenizers.Tokenizer`` in ``file``; ``ConfigError`` for an empty or garbled one."""
    from tokenizers import Tokenizer

    with tokenizer_errors(f"{file.parent.name}/{file.name}"):
        return Tokenizer.from_file(str(file))


def token_ids(where: str, ids: dict, rows: int) -> None:
    """Every token id has a row of the (rows, d) embedding."""
    if not ids:
        raise ConfigError(f"{where}: the tokenizer has no tokens")
    top = max(ids.values())
    if min(ids.values()) < 0 or top >= rows:
        raise ConfigError(f"{where}: the tokenizer has ids up to {top:,}; the embedding has {rows:,} rows")


# ---------------------------------------------------------------- weights


def decoder_weights(where: str, weights: dict, shape, d_model: int, layers_key: str = "model.layers") -> None:
    """Every tensor the decoder (``llama.py``) reads is there, of the shape the config declares.

    ``shape`` is the ``llama.LlamaShape``; ``weights`` are under transformers' Llama names.
    """
    from ..specs.wiring import BLOCKS

    d, h, g, d_k = d_model, shape.heads, shape.kv_heads, shape.d_k

    def need(name: str, expected: tuple) -> tuple:
        if name not in weights:
            raise ConfigError(f"{where}: the weights lack {name}")
        got = tuple(weights[name].shape)
        if len(got) != len(expected) or any(e is not None and e != n for e, n in zip(expected, got, strict=True)):
            wanted = tuple("any" if e is None else e for e in expected)
            raise ConfigError(f"{where}: {name} is {got}; the config declares {wanted}")
        return got

    vocab = need("model.embed_tokens.weight", (None, d))[0]
    whole(where, "the embedding's rows", vocab, LIMITS["vocab"])
    need("model.norm.weight", (d,))
    if "lm_head.weight" in weights:
        need("lm_head.weight", (None, d))
    for i in range(shape.layers):
        p = f"{layers_key}.{i}"
        need(f"{p}.self_attn.q_proj.weight", (h * d_k, d))
        need(f"{p}.self_attn.k_proj.weight", (g * d_k, d))
        need(f"{p}.self_attn.v_proj.weight", (g * d_k, d))
        need(f"{p}.self_attn.o_proj.weight", (d, h * d_k))
        for norm in BLOCKS[shape.block].norms:  # the layer's norms as its residual wiring reads them
            need(f"{p}.{norm}.weight", (d,))
            if shape.norm == "layer":
                need(f"{p}.{norm}.bias", (d,))
        if f"{p}.self_attn.q_proj.bias" in weights:  # one said and missing: hf.weights.decoder_model refuses
            for name, rows in (("q", h * d_k), ("k", g * d_k), ("v", g * d_k)):
                need(f"{p}.self_attn.{name}_proj.bias", (rows,))
        if "model.layers.0.self_attn.q_norm.weight" in weights:  # per head (Qwen3), or over all heads (OLMo 2)
            across = tuple(weights["model.layers.0.self_attn.q_norm.weight"].shape) != (d_k,)
            need(f"{p}.self_attn.q_norm.weight", (h * d_k if across else d_k,))
            need(f"{p}.self_attn.k_norm.weight", (g * d_k if across else d_k,))
        inner = need(f"{p}.mlp.up_proj.weight", (None, d))[0]
        need(f"{p}.mlp.down_proj.weight", (d, inner))
        if shape.mlp in ("gated", "geglu"):  # llama.LlamaShape.mlp
            need(f"{p}.mlp.gate_proj.weight", (inner, d))
        else:
            need(f"{p}.mlp.up_proj.bias", (inner,))
            need(f"{p}.mlp.down_proj.bias", (d,))


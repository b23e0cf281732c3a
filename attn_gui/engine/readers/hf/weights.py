"""A Hugging Face folder's weights, read with ``safetensors`` and the tokenizer with ``tokenizers``:
the decoders' reader (``read``). GPT-2's, GPT-NeoX's and Phi-3's weights are renamed and split into
llama.py's names here (``RENAMES``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ...base.disk import json_object
from ...base.errors import ConfigError
from .. import checks
from ...text import tokenizer_child
from ...specs.defaults import completed
from ...specs.families import regular
from ...specs.spec import ModelSpec
from ...text.tokenizer_json import added_tokens
from .spec import optional_float, activation, family_of, size


def weight_files(folder: Path) -> list[Path]:
    """The folder's safetensors files (the shards named by the index, else model.safetensors)."""
    index = folder / "model.safetensors.index.json"
    files = checks.shard_names(folder, index) if regular(index) else [folder / "model.safetensors"]
    missing = [f.name for f in files if not regular(f)]
    if missing:
        raise ConfigError(f"{folder.name} has no weights: {', '.join(missing)} is missing")
    return files


def read_weights(folder: Path) -> dict:
    """Every tensor of the folder's safetensors files, memory-mapped in their stored dtype (``stored.mapped``).

    ``ConfigError`` in one line for a missing, truncated or corrupt file, and for a model that
    needs more memory than is free (checked from the headers, before anything is mapped).
    """
    from .. import stored

    files = weight_files(folder)
    try:
        stored.check_memory(folder.name, files)
        return stored.mapped(files)
    except ConfigError:
        raise
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as exc:  # truncated or corrupt: one line
        raise ConfigError(f"{folder.name}: the weights cannot be read ({exc!s:.80})") from None


def check_shape(folder: Path, got, expected) -> None:
    """Refuse weights whose W_q disagrees with config.json (a config from another model)."""
    if tuple(got) != tuple(expected):
        raise ConfigError(f"{folder.name}: config.json says W_q is {tuple(expected)}, the weights hold {tuple(got)}")


def gpt2_weights(w: dict, d: int) -> dict:
    """GPT-2's tensors under llama.py's names: Conv1D's (in, out) transposed, c_attn split into Q, K and V."""
    w = {k.removeprefix("transformer."): v for k, v in w.items()}
    out = {"model.embed_tokens.weight": w["wte.weight"], "model.embed_positions.weight": w["wpe.weight"],
           "model.norm.weight": w["ln_f.weight"], "model.norm.bias": w["ln_f.bias"]}
    if "lm_head.weight" in w:
        out["lm_head.weight"] = w["lm_head.weight"]
    linear = lambda t: t.T.contiguous()  # noqa: E731  Conv1D: y = x W + b, W (in, out); nn.Linear: (out, in)
    for i in range(len({k.split(".")[1] for k in w if k.startswith("h.")})):
        src, dst = f"h.{i}.", f"model.layers.{i}."
        for a, b in (("ln_1", "input_layernorm"), ("ln_2", "post_attention_layernorm")):
            out[f"{dst}{b}.weight"], out[f"{dst}{b}.bias"] = w[f"{src}{a}.weight"], w[f"{src}{a}.bias"]
        qkv_w, qkv_b = w[f"{src}attn.c_attn.weight"], w[f"{src}attn.c_attn.bias"]  # (d, 3d), (3d,)
        for j, name in enumerate("qkv"):
            out[f"{dst}self_attn.{name}_proj.weight"] = linear(qkv_w[:, j * d:(j + 1) * d])
            out[f"{dst}self_attn.{name}_proj.bias"] = qkv_b[j * d:(j + 1) * d]
        for a, b in (("attn.c_proj", "self_attn.o_proj"), ("mlp.c_fc", "mlp.up_proj"), ("mlp.c_proj", "mlp.down_proj")):
            out[f"{dst}{b}.weight"], out[f"{dst}{b}.bias"] = linear(w[f"{src}{a}.weight"]), w[f"{src}{a}.bias"]
    return out


def neox_weights(w: dict, heads: int) -> dict:
    """GPT-NeoX's tensors under llama.py's names: query_key_value split per head ([q_h, k_h, v_h] for each head h).

    Its fused W (3 h d_k, d) holds, head after head, that head's q, k and v rows, as
    ``GPTNeoXAttention`` views it (T, h, 3 d_k) and chunks each head's 3 d_k in three.
    """
    w = {k.removeprefix("gpt_neox."): v for k, v in w.items()}
    out = {"model.embed_tokens.weight": w["embed_in.weight"], "model.norm.weight": w["final_layer_norm.weight"],
           "model.norm.bias": w["final_layer_norm.bias"]}
    if "embed_out.weight" in w:
        out["lm_head.weight"] = w["embed_out.weight"]
    for i in range(len({k.split(".")[1] for k in w if k.startswith("layers.")})):
        src, dst = f"layers.{i}.", f"model.layers.{i}."
        for a in ("input_layernorm", "post_attention_layernorm"):
            out[f"{dst}{a}.weight"], out[f"{dst}{a}.bias"] = w[f"{src}{a}.weight"], w[f"{src}{a}.bias"]
        for kind in ("weight", "bias"):
            fused = w.get(f"{src}attention.query_key_value.{kind}")
            if fused is None:  # attention_bias false: no biases
                continue
            per_head = fused.reshape(heads, 3, -1, *fused.shape[1:])  # (h, 3, d_k[, d])
            for j, name in enumerate("qkv"):
                out[f"{dst}self_attn.{name}_proj.{kind}"] = per_head[:, j].reshape(-1, *fused.shape[1:])
            if f"{src}attention.dense.{kind}" in w:
                out[f"{dst}self_attn.o_proj.{kind}"] = w[f"{src}attention.dense.{kind}"]
        for a, b in (("mlp.dense_h_to_4h", "mlp.up_proj"), ("mlp.dense_4h_to_h", "mlp.down_proj")):
            out[f"{dst}{b}.weight"], out[f"{dst}{b}.bias"] = w[f"{src}{a}.weight"], w[f"{src}{a}.bias"]
    return out


def phi3_weights(w: dict, spec: ModelSpec) -> dict:
    """Phi-3's tensors under llama.py's names: qkv_proj split into Q (h d_k rows), K and V (g d_k rows each),
    and gate_up_proj into the gate (its first half) and up, as ``Phi3Attention`` and ``Phi3MLP`` slice them."""
    out = dict(w)
    q_rows, kv_rows = spec.heads * spec.d_k, (spec.kv_heads or spec.heads) * spec.d_k
    for name in [k for k in w if k.endswith((".qkv_proj.weight", ".gate_up_proj.weight"))]:
        fused, stem = out.pop(name), name.rsplit(".", 2)[0]
        if name.endswith(".qkv_proj.weight"):
            parts = fused.split([q_rows, kv_rows, kv_rows])
            for part, proj in zip(parts, ("q_proj", "k_proj", "v_proj"), strict=True):
                out[f"{stem}.{proj}.weight"] = part
        else:
            out[f"{stem}.gate_proj.weight"], out[f"{stem}.up_proj.weight"] = fused.chunk(2)
    return out


RENAMES = {"gpt2": lambda w, spec: gpt2_weights(w, spec.d_model),
           "gpt_neox": lambda w, spec: neox_weights(w, spec.heads), "phi3": phi3_weights}


def read(spec: ModelSpec, progress=None):
    """The folder's weights (stored dtype, llama.py's names), tokenizer and constants as a ``decoder.DecoderModel``
    (nothing is converted: ``progress`` is never called)."""
    folder = Path(spec.name).expanduser()
    cfg = json_object(folder / "config.json", f"{folder.name}/config.json")
    tokenizer = tokenizer_child.Child(path=folder / "tokenizer.json")  # built in a child meanwhile
    weights = read_weights(folder)
    with checks.tokenizer_errors(f"{folder.name}/tokenizer.json"):
        tokenizer.wait()
    return decoder_model(spec, cfg, weights, tokenizer, folder)


def decoder_model(spec: ModelSpec, cfg: dict, weights: dict, tokenizer, folder: Path):
    """A ``decoder.DecoderModel`` of ``weights`` (transformers' names, any dtype), ``tokenizer`` (a
    ``tokenizers.Tokenizer``) and config ``cfg``, checked against ``spec``; messages name ``folder.name``."""
    from ...text.byte_bpe import readable
    from ...specs.decoder import DecoderModel
    from ...specs.decoder import decoder_shape

    cfg = completed(cfg)  # a field left out: transformers' default for the family
    family = family_of(cfg, folder)
    headless = "model.embed_tokens.weight" not in weights and "embed_tokens.weight" in weights
    if headless:  # saved from AutoModel (an embedding model's decoder): the same tensors, no lm_head
        weights = {f"model.{name}": t for name, t in weights.items()}
    if family.rename:
        try:
            weights = RENAMES[family.rename](weights, spec)
        except KeyError as exc:
            raise ConfigError(f"{folder.name}: the weights lack {exc} for a {family.label} model") from None
    for needed in ("model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"):
        if needed not in weights:
            held = ", ".join(sorted(weights)[:3]) or "no tensors"
            raise ConfigError(f"{folder.name}: the weights have no {needed} for a {family.label} decoder "
                              f"(they hold {held}{' …' if len(weights) > 3 else ''})")
    check_shape(folder, weights["model.layers.0.self_attn.q_proj.weight"].shape, (spec.heads * spec.d_k, spec.d_model))
    for field, key in (("attention_bias", "self_attn.q_proj.bias"), ("mlp_bias", "mlp.down_proj.bias")):
        if cfg.get(field) and (family.norm == "rms" or field == "attention_bias") and \
                f"model.layers.0.{key}" not in weights:
            raise ConfigError(f"{folder.name}: config.json has {field} = true, the weights lack model.layers.0.{key}")
    if spec.qk_norm and "model.layers.0.self_attn.q_norm.weight" not in weights:
        raise ConfigError(f"{folder.name}: the weights lack q_norm and k_norm for a {family.label} model")
    special = frozenset(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special)
    ids = tokenizer.get_vocab(with_added_tokens=True)
    rows = weights["model.embed_tokens.weight"].shape[0]  # V: often padded past the tokenizer's last id
    checks.token_ids(folder.name, ids, rows)
    texts = [f"<unused {i}>" for i in range(max(max(ids.values()) + 1, rows))]
    for tok, i in ids.items():
        texts[i] = readable(tok, i in special)
    eos = cfg.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) else eos
    eps = size(cfg, family, "eps") if family.norm == "layer" else cfg.get("rms_norm_eps")
    shape = decoder_shape(spec, family, float(eps or 1e-6), activation(cfg, family, folder),
                          optional_float(cfg.get("final_logit_softcapping")))
    checks.decoder_weights(folder.name, weights, shape, spec.d_model)
    first, last = added_tokens(tokenizer, folder)
    return DecoderModel(spec, shape, weights, tokenizer, tuple(texts), special, -1 if eos is None else int(eos),
                        first, add_eos=last, predicts=not headless)


NEEDS = ("safetensors", "tokenizers")


def available(spec: ModelSpec) -> bool:
    """Whether the libraries that read a folder are installed."""
    return all(importlib.util.find_spec(m) is not None for m in NEEDS)


def install_hint(spec: ModelSpec) -> str:
    return 'pip install -e ".[pretrained]" (safetensors and tokenizers read the folder)'

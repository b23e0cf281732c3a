"""The BERT-family encoder's forward pass, written out, for any BERT, RoBERTa or DistilBERT folder.

Embeddings (word + position + token type 0 where the model has token types, then LayerNorm),
then per layer: self-attention through the engine's one ``attention.attend``, residual +
LayerNorm, the feed-forward (GELU), residual + LayerNorm (post-LN). The families differ by
declared facts only (``hf.FAMILIES``): RoBERTa counts positions from its padding id + 1,
DistilBERT names its weights its own way (renamed here to BERT's, ``RENAMES``) and has no
token types. MiniLM-L6 (``minilm.py``) is a BERT folder inside its package. The tests compare
every layer with transformers' ``BertModel``, ``RobertaModel`` and ``DistilBertModel``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..attention import Projections, attend
from ..tokens import Tokens
from .base import ModelSource
from . import hf, stored
from .byte_bpe import readable
from .hf import activation, check_shape, family_of, position_offset, read_weights
from .llama import act
from .loaded import LOADED
from .spec import ModelSpec

# DistilBERT's names -> BERT's (transformer.layer.N.<leaf> -> encoder.layer.N.<leaf>)
RENAMES = {
    "attention.q_lin": "attention.self.query", "attention.k_lin": "attention.self.key",
    "attention.v_lin": "attention.self.value", "attention.out_lin": "attention.output.dense",
    "sa_layer_norm": "attention.output.LayerNorm", "ffn.lin1": "intermediate.dense", "ffn.lin2": "output.dense",
    "output_layer_norm": "output.LayerNorm",
}
PREFIXES = ("bert.", "roberta.", "distilbert.")  # a task model's body (BertForMaskedLM, …); its heads are unused


@dataclass(frozen=True)
class EncoderShape:
    """The constants of a BERT-family encoder."""

    layers: int
    heads: int
    eps: float  # LayerNorm's epsilon
    act: str  # the feed-forward's activation (llama.act): gelu, gelu_tanh, relu
    position_offset: int  # the first token's position id (RoBERTa: padding id + 1)


@dataclass(frozen=True)
class Encoder:
    """A loaded encoder: its weights (BERT's names, stored dtype, CPU), tokenizer and constants."""

    spec: ModelSpec
    shape: EncoderShape
    weights: dict[str, torch.Tensor]
    tokenizer: object
    vocab: tuple[str, ...]  # the readable text of each id


def bert_names(weights: dict) -> dict:
    """Every family's tensors under BERT's names: task prefixes dropped, DistilBERT renamed, gamma/beta named."""
    out = {}
    for key, value in weights.items():
        for prefix in PREFIXES:
            key = key.removeprefix(prefix)
        m = re.fullmatch(r"transformer\.layer\.(\d+)\.(.+)\.(weight|bias)", key)
        if m and m.group(2) in RENAMES:
            key = f"encoder.layer.{m.group(1)}.{RENAMES[m.group(2)]}.{m.group(3)}"
        key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))
        out[key] = value
    return out


def read(spec: ModelSpec, folder: Path) -> Encoder:
    """The encoder in ``folder``: config.json, safetensors weights and tokenizer.json; ``ConfigError`` in one line."""
    from tokenizers import Tokenizer

    cfg = json.loads((folder / "config.json").read_text())
    family = family_of(cfg, folder)
    weights = bert_names(read_weights(folder))
    key = "encoder.layer.0.attention.self.query.weight"
    check_shape(folder, weights[key].shape if key in weights else (), (spec.heads * spec.d_k, spec.d_model))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    byte_level = (json.loads(tokenizer.to_str()).get("decoder") or {}).get("type") == "ByteLevel"
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    ids = tokenizer.get_vocab(with_added_tokens=True)
    texts = [""] * (max(ids.values()) + 1)
    for tok, i in ids.items():  # RoBERTa's byte-level "Ġthe" is shown "␣the"; WordPiece as it is
        texts[i] = readable(tok, i in special) if byte_level else tok
    shape = EncoderShape(spec.layers, spec.heads, float(cfg.get("layer_norm_eps", 1e-12)),
                         activation(cfg, family, folder), position_offset(cfg))
    return Encoder(spec, shape, weights, tokenizer, tuple(texts))


def load(spec: ModelSpec, folder: Path) -> Encoder:
    """The encoder of ``spec``, read from ``folder`` once and kept while it is one of the models in memory
    (``loaded.LOADED``)."""
    return LOADED.get(spec.name, lambda: read(spec, folder))


@functools.lru_cache(maxsize=1)
def weights_on(src: Source, device: str, dtype: torch.dtype):
    """An encoder's weights as a forward on ``device`` in ``dtype`` reads them (``stored.weights_on``);
    read again if other models pushed it out of memory meanwhile."""
    return stored.weights_on(src.model().weights, device, dtype)


LOADED.on_drop(weights_on.cache_clear)


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


def embed(w: dict, ids: torch.Tensor, shape: EncoderShape) -> torch.Tensor:
    """Word + position (+ token type 0, where the model has token types) embeddings, then LayerNorm: (T, d)."""
    T = ids.shape[0]
    x = (stored.rows(w, "embeddings.word_embeddings.weight", ids)
         + stored.rows(w, "embeddings.position_embeddings.weight", torch.arange(shape.position_offset,
                                                                                shape.position_offset + T)))
    if "embeddings.token_type_embeddings.weight" in w:
        x = x + w["embeddings.token_type_embeddings.weight"][0]
    return _layer_norm(x, w, "embeddings.LayerNorm", shape.eps)


def encoder_layer(x: torch.Tensor, w: dict, layer: int, shape: EncoderShape):
    """A full post-LN layer; returns (next hidden state, the layer's attention steps)."""
    steps = attend(x, head_weights(w, layer, shape.heads), layout="column")
    p = f"encoder.layer.{layer}"
    h1 = _layer_norm(steps["output"] + x, w, f"{p}.attention.output.LayerNorm", shape.eps)
    ff = act(_linear(h1, w, f"{p}.intermediate.dense"), shape.act)
    h2 = _layer_norm(_linear(ff, w, f"{p}.output.dense") + h1, w, f"{p}.output.LayerNorm", shape.eps)
    return h2, steps


def run(w: dict, ids: torch.Tensor, shape: EncoderShape):
    """Every layer's input hidden state (L + 1 of them, the last is the output) and attention weights.

    Returns
    -------
    hidden : list of (T, d) tensors, hidden[l] enters layer l
    weights : (L, h, T, T) attention weights of every layer and head
    """
    x = embed(w, ids, shape)
    hidden, all_weights = [x], []
    for layer in range(shape.layers):
        x, steps = encoder_layer(x, w, layer, shape)
        hidden.append(x)
        all_weights.append(steps["weights"])
    return hidden, torch.stack(all_weights)


class Source(ModelSource):
    """A BERT, RoBERTa or DistilBERT folder given as a path; ``minilm.Source`` finds its folder in a package."""

    install_hint = hf.install_hint(None)

    def folder(self) -> Path:
        """Where the model's files are."""
        return Path(self.spec.name).expanduser()

    def available(self) -> bool:
        return hf.available(self.spec)

    def model(self) -> Encoder:
        """The loaded encoder (read on first use)."""
        return load(self.spec, self.folder())

    def load(self, progress=None) -> None:
        self.model()

    def loaded(self) -> bool:
        return self.spec.name in LOADED

    def tokenize(self, sentence: str) -> Tokens:
        return _tokenize(self, sentence)

    def layer_inputs(self, token_ids, device, dtype):
        with torch.no_grad():
            return run(self._weights(device, dtype), token_ids.to(device), self.model().shape)

    def layer_weights(self, layer, device, dtype) -> Projections:
        return head_weights(self._weights(device, dtype), layer, self.spec.heads)

    def _weights(self, device, dtype) -> dict[str, torch.Tensor]:
        return weights_on(self, str(device), dtype)


@functools.lru_cache(maxsize=64)
def _tokenize(src: Source, sentence: str) -> Tokens:
    """The model's tokens with its own special tokens ([CLS] … [SEP], <s> … </s>); ids are vocabulary ids."""
    model = src.model()
    ids = model.tokenizer.encode(sentence).ids
    return Tokens(tuple(model.vocab[i] for i in ids), tuple(ids), model.vocab)


__all__ = ["Encoder", "EncoderShape", "Source", "embed", "encoder_layer", "head_weights", "run"]

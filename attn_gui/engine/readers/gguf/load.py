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
or corrupt file, a tensor type not dequantized here (``quantized.READ``), a NaN or infinite block scale
(``finite.py``: the tensor and block named), a FIFO or device (never opened), and a file that,
mapped, with a layer in float32, needs more memory than is free. A
Llama or Qwen file's sliding window is not applied, as llama.cpp and transformers run such a file
(the notes say so; ``layer_attention``). The tokenizer adds what the file asks for: a first token
(``add_bos_token``; a SentencePiece vocabulary's default) and an end token (``add_eos_token``),
as llama.cpp does; a model that ends every text with its end token does not generate.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import re
from pathlib import Path

from ...base.errors import ConfigError
from .. import checks
from ...specs.spec import ModelSpec
from .finite import check_finite
from .format import Header
from .spec import checked_header, shape_of, spec_of
from .vocab import header_facts
from .tensors import convert, mapped_weights


CACHE_VERSION = 5  # change it when the conversion changes: older caches are rebuilt (1: SmolLM2's own reader;
# 2: every tensor dequantized into the cache; 3: the tokenizer and metadata only, the weights read from the file;
# 4: SentencePiece's "▁" before every stretch of text, as llama.cpp puts it; add_eos_token in the metadata;
# 5: the block scales checked finite as the cache is built, finite.py)


def cached_facts(converted) -> bool:
    """Whether a cache's facts are those ``vocabulary`` writes, each of its type (``cache.load``'s check)."""
    meta = converted.meta
    return ("tokenizer.json" in converted.texts and type(meta.get("eps")) is float and math.isfinite(meta["eps"])
            and all(type(meta.get(k)) is int and meta[k] >= -1 for k in ("eos_id", "bos_id"))
            and all(type(meta.get(k)) is bool for k in ("add_bos", "add_eos"))
            and isinstance(meta.get("special_ids"), list) and all(type(i) is int for i in meta["special_ids"])
            and isinstance(meta.get("tokenizer"), str))


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
    from ..stored import gb

    if free is not None and mapped + matrix > free:
        raise ConfigError(f"{name} needs about {gb(mapped + matrix)} of memory (the {gb(mapped)} file and "
                          f"{gb(matrix)} to dequantize a matrix) and {gb(free)} is available (free memory and "
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
    from .. import quantized
    from ...text import tokenizer_child
    from ...text.byte_bpe import readable
    from ...text.spm_bpe import readable as readable_piece

    header = checked_header(path)
    now = spec_of(header, spec.name)
    changed = [f for f in FACTS if getattr(now, f) != getattr(spec, f)]
    if changed:
        raise ConfigError(f"{path.name} is not the model it was opened as ({', '.join(changed)} differ)")
    mapped, layer = header.size, layer_bytes(header)  # the file mapped, one layer dequantized at a time
    free = stored.free_bytes()
    check_memory(path.name, mapped, matrix_bytes(header), free)

    def build(report):
        check_finite(path, header)  # once per file: the cache is keyed by its size and modification time
        try:
            return convert(spec, header, report)
        except ConfigError:
            raise
        except (ValueError, OSError, KeyError) as exc:
            raise ConfigError(f"{path.name}: its vocabulary cannot be read ({exc!s:.100})") from None

    folder = cache.cache_root() / (cache_folder or cache_name(path))
    facts = header_facts(header)  # a cache whose facts are not the file's (edited, sealed again) is rebuilt

    def check(converted) -> bool:
        return cached_facts(converted) and converted.meta == facts
    converted = cache.load_or_build(folder, cache.fingerprint(path), CACHE_VERSION, build, progress, check)
    if converted.meta != facts:  # built just now from the same header: never, unless the file changed meanwhile
        raise ConfigError(f"{path.name} changed while it was read; open it again")
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
    for key in ("bos_id", "eos_id", "special_ids"):  # a cache edited and sealed again: refused, never an IndexError
        past = [i for i in (meta[key] if key == "special_ids" else [meta[key]]) if i >= len(texts)]
        if past:
            raise ConfigError(f"{path.name}'s cache ({folder}) gives {key} {past[0]:,}, past the model's "
                              f"{len(texts):,} tokens; delete that folder and open the file again")
    shape = shape_of(spec, header, meta["eps"])
    checks.decoder_weights(path.name, stored_weights.shapes(), shape, spec.d_model)
    checks.token_ids(path.name, ids, rows)
    bos = meta["bos_id"] if meta["add_bos"] and meta["bos_id"] >= 0 else None
    eos = meta["eos_id"] if meta["add_eos"] and meta["eos_id"] >= 0 else None  # spec_for refused one without
    return dict(spec=spec, shape=shape, weights=stored_weights, tokenizer=tokenizer, vocab=tuple(texts),
                special_ids=special, eos_id=meta["eos_id"], add_bos=bos, add_eos=eos)


NEEDS = ("gguf", "safetensors", "tokenizers", "platformdirs")


def read(spec: ModelSpec, progress=None):
    """The model of a ``--model PATH.gguf`` (``decoder.DecoderModel``): the file mapped, its tokenizer cached."""
    from ...specs.decoder import DecoderModel

    return DecoderModel(**load(spec, Path(spec.name).expanduser(), progress))


def available(spec: ModelSpec) -> bool:
    """Whether the libraries that read a GGUF are installed."""
    return all(importlib.util.find_spec(m) is not None for m in NEEDS)


def install_hint(spec: ModelSpec) -> str:
    return 'pip install gguf safetensors tokenizers platformdirs (or: pip install -e ".[pretrained]")'

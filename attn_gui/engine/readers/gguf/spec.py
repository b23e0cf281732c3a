"""A GGUF's spec, from its header alone: its family, sizes, RoPE and each layer's attention, every
``{arch}.*`` key the family does not read refused in one line (``check_keys``).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

from ...base.errors import ConfigError
from .. import checks
from ...specs.families import MAX_TOKENS, Family, decoder_spec, regular, supported_ggufs
from ...specs.spec import ModelSpec
from .format import FLOATS, Header, Tensor, eps_key, read_header
from .tensors import check_tensors, quantized_types
from .vocab import TOKENIZERS, check_token_ids, special_tokens


@functools.cache
def spec_for(path: str, stamp: tuple = ()) -> ModelSpec:
    """The spec of the GGUF at ``path``, from its header; ``ConfigError`` in one line otherwise.
    ``stamp``: the file's identity (``catalog.files_identity``), so that a file rewritten in place is read again."""
    checks.model_path(path)
    file = Path(path).expanduser()
    if not file.exists():
        raise ConfigError(f"model {path!r:.80} is neither a bundled model, a model folder nor a .gguf file")
    if file.is_dir():
        raise ConfigError(f"{file.name} is a folder, not a GGUF file")
    return spec_of(checked_header(file), str(path))


def checked_header(file: Path) -> Header:
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
    window, windows, bases, scalings = layer_attention(header, family, layers, rope_base, scaling)
    unapplied = header.arch_key("attention.sliding_window") if family.window in ("", "layers") else None
    notes = (f"attention.sliding_window = {int(unapplied)} is not applied: llama.cpp runs every layer of a "
             f"{header.get('general.architecture')} file over all keys, as transformers reads the file",
             ) if unapplied and int(unapplied) < positions else ()  # why: layer_attention; longer, it changes nothing
    from .. import quantized  # here, not above: a child building a vocabulary (tokenizer_child) needs no torch

    unread = next((t for t in header.tensors.values() if t.kind not in quantized.READ), None)
    if unread is not None:
        raise ConfigError(f"{file} stores {unread.name} as {quantized.unread([unread.kind])}, which attn-gui does not "
                          f"compute (it reads {', '.join(quantized.READ.values())})")
    weights = weights_note(quantized_types(header))
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
    """The RoPE scaling a GGUF declares (``kernel.rope.inv_freq``; () for the plain one): rope.scaling.type
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


def shape_of(spec: ModelSpec, header: Header, eps: float):
    """The ``llama.LlamaShape`` of the GGUF's decoder (``llama.decoder_shape``, as a folder's): its spec, its
    family's declared differences, and the final soft-cap from the header."""
    from ..hf.spec import ACTIVATIONS
    from ...specs.decoder import decoder_shape

    family = header.family
    assert family is not None  # spec_for has refused a family not read here
    final = header.arch_key("final_logit_softcapping")
    return decoder_shape(spec, family, eps, ACTIVATIONS[family.act],
                         None if final is None else checks.positive(header.path.name, "final_logit_softcapping", final))


def weights_note(kinds: list[str]) -> str:
    """What the window says of quantized weights of types ``kinds`` ("Q4_K", "Q6_K"), in each dtype as the forward
    multiplies them (``quantized.QuantizedWeights``: ``read`` in float32 and float64, ``matrix`` in bfloat16); ""
    for none. The bfloat16 run's note said "dequantized to float32 layer by layer", which it never did."""
    if not kinds:
        return ""
    from .. import packed, quantized  # here, not above: they import torch

    int4 = [k for k in kinds if k in packed.INT4.values()]
    int8 = [k for k in kinds if k in {quantized.QUANTS[t] for t in packed.INT8}]
    kept = [f"{', '.join(int4)} packed for PyTorch's int4 kernel"] if int4 else []
    kept += [f"{', '.join(int8)} as int8 values with their scales"] if int8 else []
    rest = " (any other type dequantized and rounded to bfloat16 as it multiplies)" if kept else \
        " are dequantized and rounded to bfloat16 as each matrix multiplies"
    bf16 = f"in bfloat16 the matrices multiply {' and '.join(kept)}{rest}" if kept else f"in bfloat16 they{rest}"
    return (f"the weights stay quantized ({', '.join(kinds)}) in the mapped file; in float32 and float64 each "
            f"layer's are dequantized to float32 as the forward reads them, as llama.cpp's own dequantization gives "
            f"them; {bf16}")

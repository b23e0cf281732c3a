"""A GGUF's tensors under transformers' names: llama.cpp's names mapped (``LEAVES``, ``TOP``, a family's
``gguf_names``), each step of its converter undone as a tensor is read (``to_hf``: W_q and W_k un-permuted,
Gemma's norm gains less the 1 it added, fused Q/K/V and gate/up split), the file mapped (``mapped_weights``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...base.errors import ConfigError
from ...specs.families import Family
from ...specs.spec import ModelSpec
from .format import FLOATS, Header
from .vocab import vocabulary, vocabulary_at

if TYPE_CHECKING:  # torch is imported where the weights are converted, not with the spec
    import torch


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

    from ..quantized import Quantized

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
                                                      (vocabulary_at.__module__, vocabulary_at.__name__))
    return cache.Converted({}, texts, meta)

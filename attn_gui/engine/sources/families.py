"""The model families, one table for Hugging Face folders and GGUF files (no heavy imports here).

A family is a row of declared differences from the one decoder (``llama.py``) or the one
encoder (``encoder.py``), as transformers' modular files write Qwen3 as Llama plus q/k norms.
``hf.py`` finds a folder's row by its config.json ``model_type``; ``gguf_file.py`` finds a
file's by its ``general.architecture`` (``Family.gguf``). Both describe a decoder with
``decoder_spec``, so the window says the same of a model whichever file it came from.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from .spec import ModelSpec

MAX_TOKENS = 512  # the most tokens any model reads here: the maps stay readable


@dataclass(frozen=True)
class Family:
    """What one family declares beyond the Llama decoder or the BERT encoder."""

    label: str
    path: str = "decoder"  # "decoder": llama.py; "encoder": encoder.py
    names: tuple[tuple[str, str], ...] = ()  # config.json's own key for a size, where it is not BERT's / Llama's
    window: str = ""  # "every": sliding_window in every layer (Mistral); "layers": Qwen's use_sliding_window
    #                   and layer_types say which layers slide; "local": ModernBERT's local and global layers,
    #                   each with its window and RoPE base (encoder_config.local_layers); "": none
    norm: str = "rms"  # the decoder's norm and feed-forward (llama.LlamaShape)
    mlp: str = "swiglu"
    pre_norm: bool = False  # an encoder whose LayerNorms come before attention and the MLP (ModernBERT)
    relative: bool = False  # DeBERTa's disentangled attention: c2p and p2c terms (attention.Relative)
    qk_norm: bool = False  # Qwen3: q_norm and k_norm, each head's q and k RMS-normed before RoPE
    post_norm: bool = False  # OLMo 2: no norm before attention or the MLP; each output normed before its residual
    #                          (post_attention_layernorm, post_feedforward_layernorm); q/k norms over all heads
    positions: str = "rope"  # "rope"; "learned": absolute positions added to the embedding (GPT-2's wpe)
    act: str = "gelu"  # the activation where config.json names none (a GELU feed-forward's)
    rotary: float | None = None  # reads a partial rotary share (rope_parameters' partial_rotary_factor,
    #                              rotary_pct), this one where config.json names none; None: every dimension
    parallel: bool = False  # reads use_parallel_residual (default true): attention and MLP from one residual
    rename: str = ""  # the reader that renames and splits its weights into llama.py's names (hf.RENAMES)
    gguf: str = ""  # the general.architecture llama.cpp writes it as ("": no GGUF of it is read here)
    permuted: bool = False  # llama.cpp's converter interleaved W_q's and W_k's rows for its RoPE (LlamaModel.permute)
    also: tuple[str, ...] = ()  # other models of the family, named where a GGUF is refused


FAMILIES = {  # by config.json's model_type
    "llama": Family("Llama", gguf="llama", permuted=True, also=("SmolLM", "TinyLlama")),
    "mistral": Family("Mistral", window="every", gguf="llama", permuted=True),  # llama.cpp writes Mistral as llama
    "qwen2": Family("Qwen2", window="layers", gguf="qwen2"),
    "qwen3": Family("Qwen3", window="layers", qk_norm=True, gguf="qwen3"),  # Qwen3Model(Qwen2Model): no permute
    "olmo2": Family("OLMo 2", qk_norm=True, post_norm=True),
    "phi3": Family("Phi-3", window="every", rotary=1.0, rename="phi3", also=("Phi-4",)),  # fused qkv, gate_up
    "gpt2": Family("GPT-2", names=(("heads", "n_head"), ("d_model", "n_embd"), ("layers", "n_layer"),
                                    ("positions", "n_positions"), ("eps", "layer_norm_epsilon"),
                                    ("act", "activation_function")), norm="layer", mlp="gelu",
                 positions="learned", act="gelu_new", rename="gpt2"),
    "gpt_neox": Family("GPT-NeoX", norm="layer", mlp="gelu", rotary=0.25, parallel=True, rename="gpt_neox",
                       also=("Pythia",)),  # transformers' GPTNeoXConfig: rotary_pct 0.25, use_parallel_residual
    "bert": Family("BERT", path="encoder"), "roberta": Family("RoBERTa", path="encoder"),
    "distilbert": Family("DistilBERT", path="encoder", names=(("heads", "n_heads"), ("d_model", "dim"),
                                                             ("layers", "n_layers"), ("act", "activation"))),
    "deberta-v2": Family("DeBERTa-v2", path="encoder", relative=True),  # DeBERTa-v3 folders are deberta-v2 too
    "modernbert": Family("ModernBERT", path="encoder", names=(("eps", "norm_eps"), ("act", "hidden_activation")),
                         window="local", pre_norm=True, norm="layer", mlp="geglu"),
}


def gguf_architectures() -> dict[str, list[str]]:
    """The GGUF architectures read here, each with the model_types llama.cpp writes as it, in table order."""
    found: dict[str, list[str]] = {}
    for kind, family in FAMILIES.items():
        if family.gguf:
            found.setdefault(family.gguf, []).append(kind)
    return found


def gguf_family(arch: str, name: str) -> Family | None:
    """The family of a GGUF of ``general.architecture`` ``arch`` and ``general.name`` ``name``; None if not read.

    Where llama.cpp writes several families as one architecture (Mistral as llama), the one
    named in ``general.name`` is chosen, as transformers' GGUF loader chooses; else the first.
    """
    kinds = gguf_architectures().get(arch)
    if not kinds:
        return None
    named = [kind for kind in kinds if kind in name.lower()]
    return FAMILIES[(named or kinds)[0]]


def supported_ggufs() -> str:
    """The architectures for a refusal: "llama (Llama, Mistral, SmolLM, TinyLlama), qwen2, qwen3"."""
    parts = []
    for arch, kinds in gguf_architectures().items():
        names = [FAMILIES[kind].label for kind in kinds] + [n for kind in kinds for n in FAMILIES[kind].also]
        parts.append(f"{arch} ({', '.join(names)})" if len(names) > 1 else arch)
    return ", ".join(parts)


def decoder_spec(name: str, label: str, reader: str, family: Family, *, weights: str = "",
                 **sizes) -> ModelSpec:
    """The spec of a decoder of ``family`` read by module ``reader``, described once for every file kind.

    ``weights`` says how exact the weights are (quantized ones); ``sizes`` are ``ModelSpec``'s.
    """
    about = ("output is the attention block's output, before the residual",
             "the model is causal by construction: the causal mask is always on", *((weights,) if weights else ()))
    x_is = f"{'LayerNorm' if family.norm == 'layer' else 'RMSNorm'} of the residual stream entering the layer"
    if family.post_norm:
        x_is = "the residual stream entering the layer (no norm before attention)"
        about = (*about, "the attention and MLP outputs are RMS-normed before each is added to the residual")
    return ModelSpec(name, label, module="decoder", reader=reader, causal=True, qk_norm=family.qk_norm,
                     qk_norm_across=family.post_norm,
                     x_is=x_is, about=about, **sizes)


def regular(path: Path) -> bool:
    """A regular file (a FIFO or a device is never opened: reading one could block forever)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False

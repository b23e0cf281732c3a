"""What the config needs to know about a model without loading it (no heavy imports here)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

# The module that reads a decoder's files, by ``ModelSpec.reader`` (``model.decoder.source.reader`` imports it)
READERS: Mapping[str, str] = MappingProxyType({
    "hf": "attn_gui.engine.readers.hf.weights",
    "gguf_file": "attn_gui.engine.readers.gguf.load",
    "smollm2": "attn_gui.engine.readers.bundled",
    "memory": "attn_gui.engine.model.interop.memory",
})


@dataclass(frozen=True)
class ModelSpec:
    """The fixed facts of one pretrained model.

    Attributes
    ----------
    name : str
        The config's ``model`` value ("minilm-l6").
    label : str
        Human name for menus and messages.
    module : str
        The module in ``attn_gui.engine.model.registry`` that implements it; it defines ``Source``
        ("decoder" for every decoder, "encoder" for a BERT-family folder).
    layers, heads, d_model, d_k, d_v : int
        The model's sizes (d_k and d_v per head).
    max_tokens : int
        The most tokens (special tokens included) the model reads here.
    has_bias : bool
        Whether its Q, K, V and output projections add a bias.
    special_tokens : tuple of str
        Tokens the model adds itself ([CLS], [SEP]); views may hide them.
    kv_heads : int, optional
        Key/value heads, each shared by heads / kv_heads query heads (grouped-query
        attention); None means one per head.
    causal : bool
        A decoder: every layer masks the keys after each query, by construction, and the
        source predicts the next token (``ModelSource.next_tokens``, ``decoder``).
    rope_base : float, optional
        The base of the RoPE rotation of q and k in every layer; None without RoPE.
    rope_dims : int, optional
        Partial rotary (GPT-NeoX's ``rotary_pct``): RoPE turns only each head's first ``rope_dims``
        dimensions; None: all d_k.
    rope_scaling : tuple of (key, value)
        A scaled RoPE's parameters (``kernel.rope.inv_freq``: llama3, linear, dynamic, yarn, longrope);
        () for the plain one.
    qk_norm : bool
        Every head's q and k are RMS-normed before RoPE (Qwen3's q_norm and k_norm).
    qk_norm_across : bool
        The q and k norms span all heads of a token (OLMo 2), not each head.
    window : int, optional
        The sliding window every layer applies (Mistral's ``sliding_window``): query i sees
        keys i - window < j <= i; None: every key up to the query.
    layer_windows, layer_rope_bases : tuple, optional
        Per layer, where layers differ (ModernBERT's and Gemma 2's local and global layers): each layer's
        window (None: global) and RoPE base, in place of ``window`` and ``rope_base``; () where every
        layer is alike. ``window_at`` and ``rope_at`` read either.
    score_terms : tuple of str
        DeBERTa's position terms added to the content scores ("c2p", "p2c"), ``attention.Relative``.
    scale_factor : int
        The scores are divided by √(d_k · scale_factor) (DeBERTa: 1 + the number of its position terms).
    scale : bool
        The scores are divided by √d_k (GPT-2's ``scale_attn_weights``; every other model: True).
    layer_scale : bool
        The scores are further divided by the layer's number counted from 1 (GPT-2's
        ``scale_attn_by_inverse_layer_idx``).
    score_scalar : float, optional
        The scores are divided by √score_scalar instead of √d_k (Gemma 2's ``query_pre_attn_scalar``).
    softcap : float, optional
        The scaled scores are soft-capped, ω″ = c · tanh(ω′ / c) (Gemma 2's ``attn_logit_softcapping``).
    layer_rope_scalings : tuple of tuple
        Per layer, each layer's RoPE scaling (Gemma 3's scaled global layers), in place of
        ``rope_scaling``; () where every layer is alike. ``rope_scaling_at`` reads either.
    norm : str
        The norm and its gain convention (``families.Family.norm``): "rms", "gemma" (x̂ (1 + γ)) or "layer".
    block : str
        The residual wiring of a layer (``families.Family.block``: "pre", "parallel", "sandwich", "post";
        encoders "post_ln", "pre_ln"); "" where another library runs the model.
    through : str
        A model read through another library, which runs it (``via_transformers``): "stablelm through
        transformers"; "" for a model attn-gui runs itself.
    reader : str
        A decoder's module that reads its files into a ``decoder.DecoderModel``, named in ``READERS``: "hf"
        (a folder), "gguf_file" (a .gguf file), "smollm2" (the bundled SmolLM2's GGUF, in its package) or
        "memory" (a model object registered in memory).
    x_is : str
        What X is ("the hidden state entering the layer").
    about : tuple of str
        What the window and the result notes say about the model's numbers: what X is,
        what the output is, how exact the weights are.
    """

    name: str
    label: str
    module: str
    layers: int
    heads: int
    d_model: int
    d_k: int
    d_v: int
    max_tokens: int
    has_bias: bool
    special_tokens: tuple[str, ...] = ()
    kv_heads: int | None = None
    causal: bool = False
    rope_base: float | None = None
    rope_dims: int | None = None
    rope_scaling: tuple[tuple[str, object], ...] = ()
    qk_norm: bool = False
    qk_norm_across: bool = False
    window: int | None = None
    layer_windows: tuple[int | None, ...] = ()
    layer_rope_bases: tuple[float, ...] = ()
    score_terms: tuple[str, ...] = ()
    scale_factor: int = 1
    scale: bool = True
    layer_scale: bool = False
    score_scalar: float | None = None
    softcap: float | None = None
    layer_rope_scalings: tuple[tuple, ...] = ()
    reader: str = ""
    norm: str = ""
    block: str = ""
    through: str = ""
    x_is: str = "the hidden state entering the layer"
    about: tuple[str, ...] = ("output is the attention block's output, before the residual and LayerNorm",)

    @property
    def kv_head_count(self) -> int:
        """The key/value heads: ``kv_heads``, or one per head."""
        return self.heads if self.kv_heads is None else self.kv_heads

    def rope_scaling_at(self, layer: int) -> tuple:
        """Layer ``layer``'s RoPE scaling (``rope_scaling``, or its entry of ``layer_rope_scalings``)."""
        return self.layer_rope_scalings[layer] if self.layer_rope_scalings else self.rope_scaling

    def window_at(self, layer: int) -> int | None:
        """Layer ``layer``'s own sliding window (``window``, or its entry of ``layer_windows``)."""
        return self.layer_windows[layer] if self.layer_windows else self.window

    def rope_at(self, layer: int) -> float | None:
        """Layer ``layer``'s RoPE base (``rope_base``, or its entry of ``layer_rope_bases``)."""
        return self.layer_rope_bases[layer] if self.layer_rope_bases else self.rope_base

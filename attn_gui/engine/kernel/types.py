"""The kernel's records: the weights (``Projections``), the options of one attention (``AttendOptions``), a
streamed run's settings (``Stream``) and every intermediate ``attend`` returns (``Steps`` and its groups).

Shapes: T tokens, d = d_model, h heads, d_k per-head query/key size, d_v per-head value size.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Projections:
    """The weights of one multi-head attention block; all None means no projections (q = k = v = x).

    Row layout (q = x W): w_q (h, d, d_k), w_k (g, d, d_k), w_v (g, d, d_v), w_o (h*d_v, d).
    Column layout (q = W x): w_q (h, d_k, d), w_k (g, d_k, d), w_v (g, d_v, d), w_o (d, h*d_v).
    g is the number of key/value heads: h, or a divisor of h (grouped-query attention,
    each K/V head shared by h / g query heads).
    Biases, when there are any: b_q (h, 1, d_k), b_k (g, 1, d_k), b_v (g, 1, d_v), b_o (1, d).
    Per-head norms, when there are any (Qwen3's q_norm and k_norm): the RMSNorm gains
    q_norm (d_k,) and k_norm (d_k,), shared by every head, with epsilon ``norm_eps``; or
    (OLMo 2's) q_norm (h d_k,) and k_norm (g d_k,): one RMSNorm over all heads' q (k) of a token.
    ``matmuls``, where set (a model's forward with bfloat16 matmuls, ``readers.packed``): W_Q, W_K,
    W_V and W_O as matrices that multiply rows themselves, nn.Linear's x Wᵀ in column layout
    ((…, d) -> (…, h d_k) …), the w_* fields then holding only their shapes (meta tensors).
    """

    w_q: torch.Tensor | None = None
    w_k: torch.Tensor | None = None
    w_v: torch.Tensor | None = None
    w_o: torch.Tensor | None = None
    b_q: torch.Tensor | None = None
    b_k: torch.Tensor | None = None
    b_v: torch.Tensor | None = None
    b_o: torch.Tensor | None = None
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    norm_eps: float = 1e-6
    matmuls: tuple[Callable[[torch.Tensor], torch.Tensor], ...] | None = None

    def transposed(self) -> Projections:
        """The same weights in the other layout (W becomes Wᵀ; views, no copy; biases and norms unchanged)."""
        t = lambda w: None if w is None else w.transpose(-2, -1)  # noqa: E731
        return dataclasses.replace(self, w_q=t(self.w_q), w_k=t(self.w_k), w_v=t(self.w_v), w_o=t(self.w_o))


@dataclass(frozen=True)
class Relative:
    """DeBERTa's disentangled attention: the position terms added to the content scores (He et al. 2021).

    Query i and key j meet at relative position δ(i, j) = clamp(bucket(i - j) + s, 0, 2s - 1),
    a row of the 2s relative embeddings P (s the attention span). Projected by a layer's
    position weights they give K_r = P W_k,r and Q_r = P W_q,r, per head. Then
    c2p_ij = q_i · K_r[δ(i, j)] (content → position) and p2c_ij = k_j · Q_r[δ(i, j)]
    (position → content); the scaled score is (q_i · k_j + c2p_ij + p2c_ij) / √(d_k · scale_factor), the
    factor (1 + the number of position terms the model declares, ``pos_att_type``) in ``AttendOptions``.

    index : (T, T_k) long, δ(i, j); None: no position terms (``relative_attention`` off)
    pos_k : (h, 2s, d_k) K_r, or None without the c2p term
    pos_q : (h, 2s, d_k) Q_r, or None without the p2c term
    """

    index: torch.Tensor | None
    pos_k: torch.Tensor | None
    pos_q: torch.Tensor | None


@dataclass(frozen=True)
class AttendOptions:
    """How one attention block computes, beyond its inputs and weights: every option of ``attend``.

    ``AttentionConfig.attend_options`` gives a config's; a model's layer (``sources.llama.layer_options``,
    ``sources.encoder.layer_options``) and the training loop build their own.

    Attributes
    ----------
    layout : "row" or "column"
        How ``Projections`` are read: q = x W (row) or q = W x (column).
    scale, scale_factor, scale_dim, layer_scale, temperature
        Divide the scores by √d_k (``scale``; √(d_k · scale_factor) for DeBERTa's position terms, √scale_dim
        where a model declares its own, Gemma's ``query_pre_attn_scalar``), then by ``layer_scale`` (GPT-2's
        ``scale_attn_by_inverse_layer_idx``: the layer's number counted from 1) and by ``temperature``:
        ``divisor`` is their product.
    causal : bool
        Mask the keys after each query.
    similarity : "dot" or "cosine"
        How a query is compared with a key.
    rope_base : float, optional
        Rotate q and k by their position (RoPE, Llama's half-split pairing) with this base; None: no RoPE.
    rope_scaling : tuple of (key, value)
        A model's scaled RoPE (``rope.inv_freq``: llama3, linear, dynamic, yarn, longrope);
        () for the plain one.
    rope_dims : int, optional
        Partial rotary (GPT-NeoX's ``rotary_pct``): only each head's first ``rope_dims``
        dimensions are rotated, paired within them (their angles over ``rope_dims``, not d_k);
        the rest pass unrotated. None: all d_k.
    softcap : float, optional
        Gemma 2's attention-logit soft-capping: the scaled scores ω′ become c · tanh(ω′ / c) (``capped``)
        before the softmax; None: none. Not streamed (model mode never is).
    alibi : bool
        Add ALiBi's linear bias -m_h (i - j) to the scaled scores (-m_h |i - j| without
        ``causal``), m_h the paper's slope of query head h.
    position_offset : int
        The position of the first token (RoPE's rotation and ALiBi's bias; both read
        positions only through i - j, so the scores do not change with it).
    window, sink_tokens
        Sliding-window attention: query i sees keys i - window < j <= i (causal) or
        |i - j| < window; the first ``sink_tokens`` keys stay visible whatever the window.
    relative : Relative, optional
        DeBERTa's disentangled attention: its c2p and p2c terms added to the scores before the
        scale, which divides by √(d_k · scale_factor). Neither streamed nor with a key/value cache.
    """

    layout: str = "row"
    scale: bool = True
    temperature: float = 1.0
    scale_factor: int = 1
    scale_dim: float | None = None
    layer_scale: float = 1.0
    causal: bool = False
    similarity: str = "dot"
    rope_base: float | None = None
    rope_scaling: tuple = ()
    rope_dims: int | None = None
    softcap: float | None = None
    alibi: bool = False
    position_offset: int = 0
    window: int | None = None
    sink_tokens: int = 0
    relative: Relative | None = None

    def replace(self, **changes: Any) -> AttendOptions:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    def root(self, d_k: int) -> float:
        """What the scores are divided by first: √d_k (DeBERTa: √(d_k · scale_factor), Gemma: √scale_dim), 1
        without ``scale``."""
        if not self.scale:
            return 1.0
        if self.scale_dim is not None:
            return math.sqrt(self.scale_dim)
        return math.sqrt(d_k * self.scale_factor)

    def divisor(self, d_k: int) -> float:
        """Everything ω (with DeBERTa's terms) is divided by: ``root(d_k)``, ``layer_scale``, ``temperature``."""
        return self.root(d_k) * self.layer_scale * self.temperature

    def root_text(self, d_k: int) -> str:
        """``root`` as the formulas write it: "√64", "√(3·64)" (DeBERTa), "√256" (Gemma), "" without scale."""
        if not self.scale:
            return ""
        if self.scale_dim is not None:
            return f"√{self.scale_dim:g}"
        return f"√({self.scale_factor}·{d_k})" if self.scale_factor != 1 else f"√{d_k}"

    def divisor_text(self, d_k: int, d_k_name: str | None = None) -> list[str]:
        """The divisors in the order they apply, as text: ["√64", "3" (GPT-2's layer), "0.5" (temperature)].

        ``d_k_name``: write the root with this symbol instead of the number ("d_k")."""
        parts = [self.root_text(d_k)] if self.scale else []
        if parts and d_k_name is not None and self.scale_dim is None:
            parts = [parts[0].replace(str(d_k), d_k_name)]
        if self.layer_scale != 1.0:
            parts.append(f"{self.layer_scale:g}")
        if self.temperature != 1.0:
            parts.append(f"{self.temperature:g}")
        return parts


@dataclass(frozen=True)
class Stream:
    """Attention streamed: the T x T fields kept only pooled to at most ``reduce_to`` per side, computed a block
    of query rows of about ``block_bytes`` of scores at a time, so no h x T x T tensor is ever allocated."""

    reduce_to: int
    block_bytes: int


@dataclass(frozen=True)
class Rotary:
    """What RoPE produces beside the rotated q and k.

    q_unrotated : (h, T, d_k) the projections before the rotation (and before any q/k norm)
    k_unrotated : (g, T_k, d_k)
    angles : (T, r/2) the queries' angles (r the rotated dimensions); None where not computed here
        (a model read through transformers)
    angles_plain : (T, r/2) a scaled RoPE's angles before its scaling; None for the plain RoPE
    """

    q_unrotated: torch.Tensor | None
    k_unrotated: torch.Tensor | None
    angles: torch.Tensor | None = None
    angles_plain: torch.Tensor | None = None


@dataclass(frozen=True)
class QKNorm:
    """Per-head q/k norms (``Projections.q_norm``; Qwen3's per head, OLMo 2's over all heads): q and k after
    their RMSNorm, before the rotation.  q_normed (h, T, d_k), k_normed (g, T_k, d_k)"""

    q_normed: torch.Tensor
    k_normed: torch.Tensor


@dataclass(frozen=True)
class PositionTerms:
    """What a position scheme adds to the scores, each (h, T, T_k) or None: ALiBi's ``bias`` (added to the
    scaled scores), DeBERTa's ``c2p`` and ``p2c`` (added to ω before the scale, ``Relative``)."""

    bias: torch.Tensor | None = None
    c2p: torch.Tensor | None = None
    p2c: torch.Tensor | None = None


@dataclass(frozen=True)
class Pooled:
    """What a streamed attention (``Stream``) keeps of its T x T fields.

    maps : name -> (h, r, r_k), each field pooled as ``reduce_matrix`` pools it: scores, scaled and
        weights (``attend``), or weights alone (``attend_summarised``)
    row_max : (h, T) each query row's largest α (``attend``), else None
    last_row : (h, T) the last query's α (``attend_summarised``), else None
    summaries : the layer's summaries by name (``attend_summarised``: ``LayerSums.finish()``), else None
    """

    maps: dict[str, torch.Tensor]
    row_max: torch.Tensor | None = None
    last_row: torch.Tensor | None = None
    summaries: dict[str, torch.Tensor] | None = None


@dataclass(frozen=True)
class Steps:
    """Every intermediate of one ``attend``, named after the paper; each optional group None where it does
    not apply.

    q (h, T, d_k) after any norm and RoPE, k (g, P + T_k, d_k), v (g, P + T_k, d_v); head_outputs z
    (h, T, d_v), what W_O reads (after a ``z_hook``); concat (T, h*d_v); output (T, d).
    scores ω, scaled ω′ (masked -inf) and weights α (h, T, P + T_k): None when streamed (``pooled``).
    capped ω″ (h, T, P + T_k): the soft-capped scores (``AttendOptions.softcap``), else None.
    rope (``Rotary``), qk_norm (``QKNorm``), positions (``PositionTerms``), pooled (``Pooled``): what RoPE,
    the q/k norms, ALiBi or DeBERTa's position terms, and streaming produce.
    With a batch (B, T, d) every tensor gains the leading B axis (RoPE's angles and ALiBi's bias, the same
    for every sequence, do not).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    head_outputs: torch.Tensor
    concat: torch.Tensor
    output: torch.Tensor
    scores: torch.Tensor | None = None
    scaled: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    capped: torch.Tensor | None = None
    rope: Rotary | None = None
    qk_norm: QKNorm | None = None
    positions: PositionTerms | None = None
    pooled: Pooled | None = None

    @property
    def alpha(self) -> torch.Tensor:
        """α, the weights of attention not streamed (``pooled`` holds them otherwise)."""
        if self.weights is None:
            raise ValueError("a streamed attention keeps its weights only pooled")
        return self.weights


PLAIN = AttendOptions()

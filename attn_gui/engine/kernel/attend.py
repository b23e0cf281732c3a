"""The math of (multi-head) scaled dot-product attention, every step kept.

Self-attention reads one sequence; cross-attention takes the queries from one and the
keys and values from another (``x_kv``, T_k tokens; T_k = T in self-attention).
Shapes: T tokens, d = d_model, h heads, d_k per-head query/key size, d_v per-head
value size. All functions are batched over heads; there is no loop over tokens or heads.
``attend`` also takes a batch of sequences (B, T, d), as the training loop calls it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

from ..base import progress
from . import rope as rope_scaling


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
    ``matmuls``, where set (a model's forward with bfloat16 matmuls, ``sources.packed``): W_Q, W_K,
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


def disentangled_terms(q: torch.Tensor, k: torch.Tensor, relative: Relative) -> dict[str, torch.Tensor]:
    """DeBERTa's c2p and p2c terms (``Relative``), each (h, T, T_k), those the model has.

    q (h, T, d_k), k (h, T_k, d_k): every key head repeated per query head.
    """
    h, T, T_k = q.size(0), q.size(1), k.size(1)
    terms: dict[str, torch.Tensor] = {}
    if relative.index is None:  # no position terms
        return terms
    if relative.pos_k is not None:
        c2p = q @ relative.pos_k.transpose(-2, -1)  # every query with every relative position: (h, T, 2s)
        terms["c2p"] = c2p.gather(-1, relative.index.expand(h, T, T_k))  # pick δ(i, j): (h, T, T_k)
    if relative.pos_q is not None:
        p2c = k @ relative.pos_q.transpose(-2, -1)  # every key with every relative position: (h, T_k, 2s)
        # key j's row at δ(i, j): the bucket is odd (bucket(-r) = -bucket(r)), so this is transformers' p2c_pos
        terms["p2c"] = p2c.gather(-1, relative.index.T.expand(h, T_k, T)).transpose(-2, -1)  # (h, T, T_k)
    return terms


def relative_index(T: int, T_k: int, span: int, buckets: int = -1, max_position: int = -1,
                   device=None) -> torch.Tensor:
    """δ(i, j) (T, T_k): the relative embedding row of query i and key j, clamp(bucket(i - j) + span, 0, 2 span - 1).

    With ``buckets`` and ``max_position`` (> 0), distances past buckets/2 share log-spaced buckets,
    as transformers' ``make_log_bucket_position``; else bucket(r) = r.
    """
    rel = torch.arange(T, device=device)[:, None] - torch.arange(T_k, device=device)[None, :]  # (T, T_k): i - j
    if buckets > 0 and max_position > 0:
        sign, mid = torch.sign(rel), buckets // 2
        far = torch.where((rel < mid) & (rel > -mid), torch.tensor(mid - 1, device=device), rel.abs())
        log_pos = torch.ceil(torch.log(far / mid) / torch.log(torch.tensor((max_position - 1) / mid))
                             * (mid - 1)) + mid
        rel = torch.where(far <= mid, rel.to(log_pos.dtype), log_pos * sign).long()
    return torch.clamp(rel + span, 0, 2 * span - 1)


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
        A model's scaled RoPE (``rope_scaling.inv_freq``: llama3, linear, dynamic, yarn, longrope);
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


def attend(x: torch.Tensor, weights: Projections, options: AttendOptions = PLAIN, *,
           x_kv: torch.Tensor | None = None, past: tuple[torch.Tensor, torch.Tensor] | None = None,
           z_hook: Callable[[torch.Tensor], torch.Tensor] | None = None, stream: Stream | None = None) -> Steps:
    """Multi-head attention of ``x`` over ``x_kv`` (itself by default) with every intermediate kept.

    Parameters
    ----------
    x : (T, d) tensor, or (B, T, d): a batch of sequences, each attended as alone
        The tokens' input vectors (embeddings, or the hidden state entering a layer): the queries'.
    weights : Projections
        In ``options.layout``; all None for simplified attention (q = k = v = x, one head).
    options : AttendOptions
        Scale, temperature, mask, similarity, RoPE, soft-cap, ALiBi, window and DeBERTa's position terms.
    x_kv : (T_k, d) tensor, optional
        Cross-attention: the keys' and values' input vectors (another sentence); None: ``x``.
        (B, T_k, d) with a batch.
    past : (k, v), optional
        A key/value cache: the keys (g, P, d_k), after RoPE, and values (g, P, d_v) of the P
        tokens before ``x``. The rows of ``x`` are then positions P ... P + n - 1 (their
        RoPE angles and causal mask start at P) and attend to the cached keys and their own.
    z_hook : callable, optional
        Given the per-head outputs Z (h, T, d_v), returns what the concat and W_O read instead
        (a head ablated or patched, ``engine.interventions``); ``head_outputs`` is its result.
    stream : Stream, optional
        Keep the T x T fields only as ``reduce_matrix(field, reduce_to, reduce_to)`` would pool them
        (``Steps.pooled``, with each row's largest α), computed per block of query rows of about
        ``block_bytes``. The values are the same. Not with a batch, ``past``, ``softcap`` or ``relative``.

    Returns
    -------
    Steps
        q, k, v, the scores, scaled scores and weights (h, T, T_k), head outputs, concat and output, with
        the groups the options produce (``rope``, ``qk_norm``, ``positions``, ``capped``, ``pooled``).
        With ``past``, k and v are the whole cache, past rows then new (g, P + n, .), ready to be the next
        step's ``past``; q and RoPE's unrotated q and k are the n new rows; the T x T fields are (h, n, P + n).
        With a batch every field gains the leading B axis and equals that sequence's own ``attend`` up to
        the order of float sums (Q, K and V are then one matmul).
    """
    o = options
    if x.dim() > 2 and stream is not None:
        raise ValueError("a batch of sequences is not streamed (reduce_to)")
    if past is not None and stream is not None:
        raise ValueError("a key/value cache is not streamed")
    q, k, v, rope, qk_norm = queries_keys_values(x, weights, o, x_kv=x_kv, past=past)
    T, P = x.size(-2), 0 if past is None else past[0].size(-2)  # new tokens, cached positions before them
    T_k = k.size(-2) - P  # the new keys
    heads = q.size(-3)
    k_per_head, v_per_head = repeat_kv(k, heads), repeat_kv(v, heads)  # (h, T, n): head i uses K/V i // (h/g)
    d_k = q.size(-1)
    slopes = alibi_slopes(heads, q.dtype, q.device) if o.alibi else None  # (h,)

    if o.relative is not None and (stream is not None or past is not None):
        raise ValueError("disentangled attention is neither streamed nor cached")
    attn_scores: torch.Tensor | None = None
    scaled: torch.Tensor | None = None
    attn_weights: torch.Tensor | None = None
    capped: torch.Tensor | None = None
    positions: PositionTerms | None = None
    pooled: Pooled | None = None
    if stream is None:
        attn_scores = attention_scores(q, k_per_head, o.similarity)  # omega (h, T, P + T_k)
        summed = attn_scores
        terms: dict[str, torch.Tensor] = {}
        if o.relative is not None:  # DeBERTa: omega + c2p + p2c, over sqrt(d_k * scale_factor)
            terms = disentangled_terms(q, k_per_head, o.relative) if o.relative.index is not None else {}
            summed = sum(terms.values(), attn_scores)
        scaled = scaled_scores(summed, o, d_k, row_start=P, slopes=slopes)  # omega', -inf: masked
        capped, attn_weights = score_weights(scaled, o)  # Gemma 2's omega'' (else None); alpha, rows sum to 1
        context_vec = context_vectors(attn_weights, v_per_head)  # z (h, T, d_v)
        bias = None if slopes is None else position_bias(slopes, P, T, P + T_k, o.causal,
                                                          o.position_offset)  # (h, T, P + T_k)
        if terms or bias is not None:
            positions = PositionTerms(bias, terms.get("c2p"), terms.get("p2c"))
    else:
        context_vec, pooled = _attend_in_blocks(q, k_per_head, v_per_head, stream, o, slopes)
    if z_hook is not None:
        context_vec = z_hook(context_vec)  # an intervention (ablation, patching): Z shows what W_O reads
    concat, output = project_outputs(context_vec, weights, o.layout)
    return Steps(q, k, v, context_vec, concat, output, attn_scores, scaled, attn_weights, capped, rope, qk_norm,
                 positions, pooled)


def project_outputs(context_vec: torch.Tensor, p: Projections, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """concat (T, h*d_v) and output (T, d) of the head outputs z (h, T, d_v): the heads joined and W_O (and b_O)."""
    concat = concat_heads(context_vec)  # (T, h*d_v)
    # W_O multiplying rows itself (p.matmuls: column layout), else as stored
    output = p.matmuls[3](concat) if p.matmuls is not None else output_projection(concat, p.w_o, layout)  # (T, d)
    if p.b_o is not None:
        output = output + p.b_o  # (1, d) broadcasts over the T rows
    return concat, output


def queries_keys_values(x: torch.Tensor, weights: Projections, options: AttendOptions = PLAIN, *,
                        x_kv: torch.Tensor | None = None, past: tuple[torch.Tensor, torch.Tensor] | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Rotary | None, QKNorm | None]:
    """``attend``'s first steps: q (h, T, d_k), k (g, P + T_k, d_k) and v (g, P + T_k, d_v), projected, biased,
    normed and rotated, a ``past`` cache before the new keys; and what RoPE and the q/k norms produce."""
    layout = options.layout
    T, d = x.shape[-2:]  # tokens (the new ones, with a past), embedding size
    source = x if x_kv is None else x_kv  # (T_k, d): the keys' and values' tokens
    T_k = source.size(-2)
    P = 0 if past is None else past[0].size(-2)  # cached positions before x
    p = weights
    if p.w_q is None:
        q, k = x.unsqueeze(-3), source.unsqueeze(-3)  # simplified attention: q = x, k = v = x_kv, (1, T, d)
        v = k
    elif p.matmuls is not None:  # W multiplies rows itself (column layout): one product per W, split by head
        assert p.w_k is not None and p.w_v is not None, "Projections: all of W_Q, W_K, W_V or none"
        q = _split_heads(p.matmuls[0](x), p.w_q.size(0)).contiguous()  # (h, T, d_k)
        k = _split_heads(p.matmuls[1](source), p.w_k.size(0)).contiguous()  # (g, T_k, d_k)
        v = _split_heads(p.matmuls[2](source), p.w_v.size(0)).contiguous()  # (g, T_k, d_v)
    elif x.dim() > 2 and x_kv is None:
        assert p.w_k is not None and p.w_v is not None, "Projections: all of W_Q, W_K, W_V or none"
        q, k, v = project_qkv(x, p.w_q, p.w_k, p.w_v, layout)  # a batch: one matmul, (B, h, T, d_k) ...
    else:
        assert p.w_k is not None and p.w_v is not None, "Projections: all of W_Q, W_K, W_V or none"
        q = project(x, p.w_q, layout)  # (h, T, d_k)
        k = project(source, p.w_k, layout)  # (g, T_k, d_k)
        v = project(source, p.w_v, layout)  # (g, T_k, d_v)
    if p.b_q is not None:
        assert p.b_k is not None and p.b_v is not None, "Projections: the q, k and v biases come together"
        q, k, v = q + p.b_q, k + p.b_k, v + p.b_v  # (h, 1, n) broadcasts over the rows
    q_unrotated, k_unrotated = q, k
    assert (p.q_norm is None) == (p.k_norm is None), "Projections: q_norm and k_norm come together"
    k_norm = cast(torch.Tensor, p.k_norm)  # set where q_norm is
    qk_norm = None
    if p.q_norm is not None and p.q_norm.numel() != q.size(-1):  # OLMo 2: over all heads of a token, before RoPE
        q, k = norm_across_heads(q, p.q_norm, p.norm_eps), norm_across_heads(k, k_norm, p.norm_eps)
        qk_norm = QKNorm(q, k)
    elif p.q_norm is not None:  # Qwen3: every head's q and k RMS-normed over d_k, before RoPE
        q, k = rms_norm(q, p.q_norm, p.norm_eps), rms_norm(k, k_norm, p.norm_eps)  # (h, T, d_k), (g, T_k, d_k)
        qk_norm = QKNorm(q, k)
    rope = None
    if options.rope_base is not None:
        base, scaling, offset = options.rope_base, options.rope_scaling, options.position_offset + P
        r = options.rope_dims or q.size(-1)  # the rotated dimensions of each head
        theta, cos, sin = rope_tables(max(T, T_k), r, base, q.dtype, q.device, offset,
                                      scaling)  # (max(T, T_k), r/2), cos, sin (., r)
        # with a scaled RoPE, the plain angles beside the scaled ones
        plain = rope_theta(T, r, base, q.dtype, q.device, offset) if scaling else None
        rope = Rotary(q_unrotated, k_unrotated, theta[:T], plain)
        q, k = rotate(q, cos[:T], sin[:T]), rotate(k, cos[:T_k], sin[:T_k])  # (h, T, d_k), (g, T_k, d_k)
    if past is not None:
        k, v = torch.cat([past[0], k], dim=-2), torch.cat([past[1], v], dim=-2)  # (g, P + T_k, n)
    return q, k, v, rope, qk_norm


def attend_summarised(x: torch.Tensor, weights: Projections, options: AttendOptions, stream: Stream, *,
                      shown: bool = False, z_hook: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Steps:
    """A decoder layer's causal self-attention at any length, no T x T tensor kept: what the next layer needs.

    The same q, k, v, z and output as ``attend(x, weights, options)`` (the same rows of α, a block of
    query rows of about ``stream.block_bytes`` of scores at a time); of the maps only α is kept, pooled to
    at most ``stream.reduce_to`` per side as ``reduce_matrix`` pools it, with the last query's row and the
    summaries (``engine.summaries``: sink mass, distance, decay, top keys) of every head.

    ``options`` must be causal attention without ALiBi, soft-cap, offset or position terms (a decoder's: its
    scale, temperature, RoPE, window and sinks are read, and a cosine similarity).

    ``shown``: the layer on screen. Its ω and scaled scores are pooled too, from the same blocks (ω of
    every key, the later ones' too, as ``attend(..., stream=)`` pools them), so that the layer is
    not computed a second time for its maps.

    Returns
    -------
    Steps
        q, k, v, head_outputs, concat, output (and RoPE's and the q/k norms' groups) as ``attend``'s, and
        ``pooled``: maps {"weights": (h, r, r_k)} (with ``shown`` also "scores" and "scaled", and
        ``row_max`` (h, T) as ``attend(..., stream=)``'s), last_row (h, T) and summaries
        (``LayerSums.finish``)
    """
    from .reduce import block_edges, block_runs, pool_row_blocks, reduce_row_blocks
    from .summaries import LayerSums, row_stats

    o = options
    if not o.causal or o.alibi or o.softcap is not None or o.position_offset or o.relative is not None:
        raise ValueError("attend_summarised runs causal attention only (no ALiBi, soft-cap, offset or position "
                         "terms)")
    reduce_to, block_bytes = stream.reduce_to, stream.block_bytes
    q, k, v, rope, qk_norm = queries_keys_values(x, weights, o)
    h, T, d_k = q.shape  # heads, tokens, head size
    k_per_head, v_per_head = repeat_kv(k, h), repeat_kv(v, h)  # (h, T, d_k): head i uses K/V i // (h/g)
    q_dot, k_dot = (F.normalize(q, dim=-1), F.normalize(k_per_head, dim=-1)) if o.similarity == "cosine" \
        else (q, k_per_head)  # a cosine is the dot product of unit vectors: normalised once, not per block
    side = min(T, reduce_to)
    edges = block_edges(T, side)
    rows_per_block = max(1, block_bytes // (h * T * q.element_size()))
    pooled = q.new_empty(h, side, side)
    signed = {name: q.new_empty(h, side, side) for name in ("scores", "scaled")} if shown else {}
    context_vec = q.new_empty(h, T, v.size(-1))  # z (h, T, d_v)
    sums = LayerSums(h, T, T, q.device, q.dtype)
    for first, last in block_runs(edges, rows_per_block):  # runs of whole pooling blocks
        progress.check()  # a window's Esc stops a long sentence within a block of rows
        start, end = edges[first][0], edges[last - 1][1]
        # causal: these rows see keys before ``end`` only; the later keys' alpha is 0 and is not computed
        hidden = masked_keys(start, end - start, end, True, o.window, o.sink_tokens, q.device)  # (n, end)
        assert hidden is not None  # causal: never every key
        if shown:  # ω of every key (h, n, T): the map of ω shows the later keys' too
            omega = q_dot[:, start:end] @ k_dot.transpose(-2, -1)
            signed["scores"][:, first:last] = reduce_row_blocks(omega, edges[first:last], start, side)
            scaled = scaled_scores(omega[..., :end], o, d_k, row_start=start)  # ω′ (h, n, end), masked
        else:
            scaled = scaled_scores(q_dot[:, start:end] @ k_dot[:, :end].transpose(-2, -1), o, d_k, row_start=start,
                                   in_place=True)  # ω′ (h, n, end), the softmax's input
        _, alpha = score_weights(scaled, o)  # (h, n, end)
        context_vec[:, start:end] = context_vectors(alpha, v_per_head[:, :end])  # (h, n, d_v)
        pooled[:, first:last] = pool_row_blocks(alpha, edges[first:last], start, side, width=T)  # later keys: 0
        if shown:  # the later keys' scaled scores are -inf (masked)
            signed["scaled"][:, first:last] = reduce_row_blocks(scaled, edges[first:last], start, side, width=T)
        sums.add(row_stats(alpha, start, hidden, causal=True, width=T, scores=scaled), start)  # ω′ overwritten
    last_row = alpha[:, -1].clone()  # (h, T): the last block ends at T; a copy, not a view holding the block
    if z_hook is not None:
        context_vec = z_hook(context_vec)  # an intervention (ablation): Z shows what W_O reads
    concat, output = project_outputs(context_vec, weights, o.layout)
    summary = sums.finish()
    row_max = None
    maps = {"weights": pooled}
    if shown:  # each row's largest α: its top key's
        maps.update(signed)
        row_max = summary["top_weights"][..., 0]
    kept = Pooled(maps, row_max=row_max, last_row=last_row, summaries=summary)
    return Steps(q, k, v, context_vec, concat, output, rope=rope, qk_norm=qk_norm, pooled=kept)


def query_rows(q: torch.Tensor, k: torch.Tensor, start: int, options: AttendOptions = PLAIN,
               slopes: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """omega, the scaled scores and alpha of the query rows ``q``, the rows from ``start`` on.

    Each row of attention depends on its own query alone, so these equal the same rows of
    the full (h, T, T) fields.

    Parameters
    ----------
    q : (..., n, d_k) the queries of rows start ... start + n - 1 (after RoPE)
    k : (..., T_k, d_k) every key (one per query head: grouped K repeated)
    options : the scale, temperature, mask, similarity and ALiBi offset (RoPE is already in q and k)
    slopes : (h,) ALiBi's slopes of the heads of ``q``, or None

    Returns
    -------
    dict with scores, scaled and weights, each (..., n, T_k), and capped where the options soft-cap
    """
    attn_scores = attention_scores(q, k, options.similarity)  # (..., n, T_k)
    scaled = scaled_scores(attn_scores, options, k.size(-1), row_start=start, slopes=slopes)
    capped, alpha = score_weights(scaled, options)
    rows = dict(scores=attn_scores, scaled=scaled, weights=alpha)
    return rows if capped is None else {**rows, "capped": capped}


def _attend_in_blocks(q, k, v, stream: Stream, options: AttendOptions, slopes: torch.Tensor | None):
    """z (h, T, d_v) and the T x T_k fields pooled to at most reduce_to per side (``Pooled``), block by block
    of rows.

    Every head is computed at once, ``block_bytes`` of scores at a time. Each block of query
    rows holds whole pooling blocks (``reduce.block_edges``), so pooling it at once gives
    exactly the rows of the pooled full matrix.
    """
    from .reduce import block_edges, block_runs, reduce_matrix, reduce_row_blocks

    h, T, d_k = q.shape  # heads, query tokens, head size
    T_k = k.size(-2)  # key tokens
    side, cols = min(T, stream.reduce_to), min(T_k, stream.reduce_to)
    if options.similarity == "cosine":  # normalise once, not per block
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        options = options.replace(similarity="dot")
    edges = block_edges(T, side)
    groups = block_runs(edges, max(1, stream.block_bytes // (h * T_k * q.element_size())))  # of pooling blocks
    kinds = {"scores": "signed", "scaled": "signed", "weights": "weights"}
    shown = {name: q.new_empty(h, side, cols) for name in kinds}
    context_vec = q.new_empty(h, T, v.size(-1))  # z (h, T, d_v)
    row_max = q.new_empty(h, T)  # each row's largest alpha: how one-hot the softmax is, per row
    for b0, b1 in groups:
        progress.check()
        start, end = edges[b0][0], edges[b1 - 1][1]  # query rows of these pooling blocks
        rows = query_rows(q[:, start:end], k, start, options, slopes)  # each (h, n, T_k)
        context_vec[:, start:end] = context_vectors(rows["weights"], v)  # (h, n, d_v)
        row_max[:, start:end] = rows["weights"].amax(-1)
        for name, kind in kinds.items():
            if len(groups) == 1:  # every row at once (a GPU's block): pool as the display does
                shown[name] = reduce_matrix(rows[name], side, side, kind)
            else:
                shown[name][:, b0:b1] = reduce_row_blocks(rows[name], edges[b0:b1], start, side, kind)
    return context_vec, Pooled(shown, row_max=row_max)


def project(x: torch.Tensor, w: torch.Tensor, layout: str) -> torch.Tensor:
    """Project the inputs for every head.

    Parameters
    ----------
    x : (T, d)
    w : (h, d, n) in "row" layout (q = x W) or (h, n, d) in "column" layout (q = W x)

    Returns
    -------
    (h, T, n)
    """
    if x.dim() > 2:  # a batch (..., T, d): one matmul, (..., T, h*n) -> (..., h, T, n)
        return _split_heads(x @ _heads_matrix(w, layout), w.size(0))
    if layout == "row":
        return x @ w  # (T, d) @ (h, d, n) -> (h, T, n)
    return x @ w.transpose(-2, -1)  # q_i = W x_i for every row i: (h, T, n)


def project_qkv(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor, layout: str):
    """q, k and v of a batch of sequences, Q, K and V projected as one matmul.

    Parameters
    ----------
    x : (..., T, d)
    w_q, w_k, w_v : (h, d, d_k), (g, d, d_k), (g, d, d_v) in "row" layout, (h, d_k, d) ... in "column"

    Returns
    -------
    q (..., h, T, d_k), k (..., g, T, d_k), v (..., g, T, d_v): what ``project`` gives each
    sequence (equal up to the order of the float sums)
    """
    ws = (w_q, w_k, w_v)
    fused = x @ torch.cat([_heads_matrix(w, layout) for w in ws], dim=-1)  # (..., T, h*d_k + g*d_k + g*d_v)
    parts = fused.split([w.size(0) * w.size(2 if layout == "row" else 1) for w in ws], dim=-1)
    return tuple(_split_heads(part, w.size(0)) for part, w in zip(parts, ws, strict=True))


def _heads_matrix(w: torch.Tensor, layout: str) -> torch.Tensor:
    """Every head's projection side by side: (d, h*n), head 0's n columns first."""
    if layout == "row":  # (h, d, n)
        return w.transpose(0, 1).reshape(w.size(1), -1)
    return w.reshape(-1, w.size(-1)).T  # (h, n, d) -> (h*n, d) -> (d, h*n)


def _split_heads(y: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., T, h*n) -> (..., h, T, n) (a view)."""
    return y.unflatten(-1, (heads, -1)).transpose(-3, -2)


def soft_cap(scaled: torch.Tensor, cap: float) -> torch.Tensor:
    """c · tanh(ω′ / c) (Gemma 2's soft-capping: every score within ±c), -inf (a masked key) kept."""
    return torch.where(torch.isinf(scaled), scaled, torch.tanh(scaled / cap) * cap)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) * weight, over the last axis (Llama's RMSNorm)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def norm_across_heads(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of each token's heads side by side (OLMo 2's q_norm over h d_k).  (..., h, T, d_k), (h d_k,)"""
    heads = x.size(-3)
    joined = x.transpose(-3, -2).flatten(-2)  # (..., T, h d_k)
    return rms_norm(joined, weight, eps).unflatten(-1, (heads, -1)).transpose(-3, -2)


def attention_scores(q: torch.Tensor, k: torch.Tensor, similarity: str = "dot") -> torch.Tensor:
    """omega = q k^T, or the cosine of the angle between each query and key.

    q (h, T, d_k), k (h, T_k, d_k) -> (h, T, T_k)
    """
    if similarity == "cosine":
        # F.normalize keeps a zero vector at zero, so its similarity is 0, not NaN
        q = F.normalize(q, dim=-1)
        k = F.normalize(k, dim=-1)
    return q @ k.transpose(-2, -1)


def scaled_scores(scores: torch.Tensor, options: AttendOptions, d_k: int, row_start: int = 0,
                  slopes: torch.Tensor | None = None, *, in_place: bool = False) -> torch.Tensor:
    """ω′: the scores (ω, with DeBERTa's terms where it has them) over ``options.root(d_k)``, ALiBi's bias added,
    over ``layer_scale`` and ``temperature``, the keys a query cannot see at -inf.

    The one place the scores are scaled and masked (``score_weights`` adds the soft-cap and the softmax): every
    path (``attend``, one query's rows, the streamed and the kept blocks, attribution and the views) calls it.
    ``scores`` (..., n, T) are the rows of queries ``row_start`` ... ``row_start + n - 1``; with ``slopes`` (h,)
    the head axis is the third from last. ``in_place``: ``scores`` is overwritten (a block's scratch).
    """
    o = options
    root = o.root(d_k)
    if in_place:
        scaled = scores.div_(root) if root != 1.0 else scores
    else:
        scaled = scores / root if root != 1.0 else scores.clone()
    n, T = scores.shape[-2:]  # query rows, keys
    if slopes is not None:
        scaled += position_bias(slopes, row_start, n, T, o.causal, o.position_offset)  # (h, n, T)
    if o.layer_scale != 1.0:
        scaled /= o.layer_scale
    if o.temperature != 1.0:
        scaled /= o.temperature
    hidden = masked_keys(row_start, n, T, o.causal, o.window, o.sink_tokens, scores.device)  # (n, T) or None
    if hidden is not None:
        scaled.masked_fill_(hidden, float("-inf"))
    return scaled


def score_weights(scaled: torch.Tensor, options: AttendOptions, *,
                  out: torch.Tensor | None = None) -> tuple[torch.Tensor | None, torch.Tensor]:
    """ω″ and α of the scaled scores ω′ (``scaled_scores``): Gemma 2's soft-cap c · tanh(ω′ / c) where the options
    have one (else None), then the softmax over the keys (into ``out`` where given)."""
    capped = None if options.softcap is None else soft_cap(scaled, options.softcap)
    logits = scaled if capped is None else capped
    return capped, (torch.softmax(logits, dim=-1, out=out) if out is not None else attention_weights(logits))


def masked_keys(row_start: int, n: int, T: int, causal: bool, window: int | None, sink_tokens: int,
                device=None) -> torch.Tensor | None:
    """(n, T) True where query i (row_start + row) may not see key j; None when every key is seen.

    causal: j > i. window: j <= i - window (causal) or |i - j| >= window, except the first
    ``sink_tokens`` keys (the causal mask still applies to them).
    """
    if not causal and window is None:
        return None
    query = torch.arange(row_start, row_start + n, device=device).unsqueeze(1)  # (n, 1)
    key = torch.arange(T, device=device)  # (T,)
    hidden = torch.zeros(n, T, dtype=torch.bool, device=device)
    if window is not None:
        far = (query - key >= window) if causal else ((query - key).abs() >= window)  # (n, T)
        hidden |= far & (key >= sink_tokens)
    if causal:
        hidden |= key > query  # key j after query i
    return hidden


def alibi_slopes(heads: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """ALiBi's head slopes m_h (h,): 2^(-8/n), 2^(-16/n), ... for n the power of two at or below h,
    then every other slope of 2n for the remaining heads (as BLOOM's ``build_alibi_tensor``)."""
    closest = 2 ** math.floor(math.log2(heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(closest) - 3)))
    slopes = [base ** p for p in range(1, closest + 1)]
    if closest != heads:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra ** p for p in range(1, 2 * min(closest, heads - closest), 2)]
    return torch.tensor(slopes, dtype=dtype, device=device)


def position_bias(slopes: torch.Tensor, row_start: int, n: int, T: int, causal: bool,
                  offset: int = 0) -> torch.Tensor:
    """ALiBi's bias of query rows row_start ... row_start + n - 1: -m_h (i - j), or -m_h |i - j|
    without ``causal``. (h, n, T). With causal it differs from BLOOM's m_h j by a constant per
    row, so the weights are the same. The positions start at ``offset``, which i - j cancels."""
    first = offset + row_start
    query = torch.arange(first, first + n, device=slopes.device, dtype=slopes.dtype).unsqueeze(1)
    keys = torch.arange(offset, offset + T, device=slopes.device, dtype=slopes.dtype)
    distance = query - keys  # (n, T): i - j
    if not causal:
        distance = distance.abs()
    return -slopes[:, None, None] * distance + 0.0  # (h, n, T); + 0.0 shows the diagonal's -0.0 as 0


def rope_theta(T: int, d_k: int, base: float, dtype=torch.float32, device=None, offset: int = 0) -> torch.Tensor:
    """RoPE's angle of each dimension pair at each position: theta[t, i] = p * base^(-2i/d_k),
    p = offset + t. (T, d_k/2), computed in ``dtype`` (Llama's ``inv_freq`` times the position)."""
    inv_freq = 1.0 / base ** (torch.arange(0, d_k, 2, dtype=dtype, device=device) / d_k)  # (d_k/2,)
    return torch.arange(offset, offset + T, dtype=dtype, device=device).unsqueeze(1) * inv_freq  # (T, d_k/2)


def scaled_rope_theta(T: int, d_k: int, base: float, scaling: tuple, dtype=torch.float32, device=None,
                      offset: int = 0) -> tuple[torch.Tensor, float]:
    """The angles of a scaled RoPE (``rope_scaling.inv_freq``: Llama 3.1, YaRN …) at positions offset ...
    offset + T − 1, computed in float32 as transformers computes them, in ``dtype``; and the attention factor
    cos and sin are multiplied by.  (T, d_k/2)"""
    inv_freq, factor = rope_scaling.inv_freq(d_k, base, scaling)
    positions = torch.arange(offset, offset + T, dtype=torch.float32).unsqueeze(1)  # (T, 1)
    return (positions * inv_freq).to(dtype=dtype, device=device), factor


@lru_cache(maxsize=32)
def rope_tables(T: int, d_k: int, base: float, dtype=torch.float32, device=None, offset: int = 0,
                scaling: tuple = ()):
    """``rope_theta`` and its ``rope_cos_sin``, (T, d_k/2), (T, d_k), (T, d_k): computed once per
    sizes, base, dtype, device, offset and scaling (a training step asks for the same every layer and step).
    A scaled RoPE's cos and sin are multiplied by its attention factor (YaRN's, LongRoPE's).

    The same values as computing them afresh; shared, so read-only. Made outside autograd
    and inference mode, so any later computation may use them.
    """
    with torch.inference_mode(False), torch.no_grad():
        if not scaling:
            theta = rope_theta(T, d_k, base, dtype, device, offset)
            return (theta, *rope_cos_sin(theta))
        theta, factor = scaled_rope_theta(T, d_k, base, scaling, dtype, device, offset)
        return (theta, *(t * factor if factor != 1.0 else t for t in rope_cos_sin(theta)))


def rope_cos_sin(theta: torch.Tensor):
    """cos and sin (T, d_k) of the angles ``theta`` (T, d_k/2), each frequency twice (Llama's layout):
    dimensions i and i + d_k/2 form pair i."""
    angles = torch.cat([theta, theta], dim=-1)  # (T, d_k)
    return angles.cos(), angles.sin()


def rope_angles(T: int, d_k: int, base: float, dtype=torch.float32, device=None, offset: int = 0,
                start: int = 0):
    """cos and sin (T, d_k) of RoPE's angles at positions offset + start ... offset + start + T - 1.

    ``offset`` is where the sentence starts (the shift demonstration), ``start`` the length
    of a key/value cache before these tokens; only their sum matters.
    """
    return rope_cos_sin(rope_theta(T, d_k, base, dtype, device, offset + start))


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_i, x_{i + r/2}) by its angle: x cos + rotate_half(x) sin.  (..., T, d)

    r is the width of ``cos`` (T, r): where r < d (partial rotary) the last d - r dimensions pass unrotated."""
    r = cos.size(-1)
    if r < x.size(-1):
        return torch.cat([rotate(x[..., :r], cos, sin), x[..., r:]], dim=-1)
    half = x.size(-1) // 2
    rotated_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)  # rotate_half: (-x2, x1)
    return x * cos + rotated_half * sin


def repeat_kv(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., g, T, n) -> (..., h, T, n): each key/value head repeated for its h / g query heads (itself when g = h)."""
    groups = kv.size(-3)
    return kv if groups == heads else kv.repeat_interleave(heads // groups, dim=-3)


def attention_weights(scaled: torch.Tensor) -> torch.Tensor:
    """alpha = softmax over keys. torch.softmax subtracts each row's maximum, so large scores do not overflow."""
    return torch.softmax(scaled, dim=-1)


def context_vectors(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z_i = sum_j alpha_ij v_j.  (h, T, T) @ (h, T, d_v) -> (h, T, d_v)"""
    return weights @ v


def concat_heads(z: torch.Tensor) -> torch.Tensor:
    """(..., h, T, d_v) -> (..., T, h * d_v), head 0's columns first (as torch.cat of the heads)."""
    h, T, d_v = z.shape[-3:]
    return z.transpose(-3, -2).reshape(*z.shape[:-3], T, h * d_v)


def output_projection(concat: torch.Tensor, w_o: torch.Tensor | None, layout: str) -> torch.Tensor:
    """concat W_o (row: W_o is (h*d_v, d)) or W_o concat (column: W_o is (d, h*d_v))."""
    if w_o is None:
        return concat
    return concat @ w_o if layout == "row" else concat @ w_o.T


def sinusoidal_positions(T: int, d: int, dtype=torch.float32, device=None, offset: int = 0) -> torch.Tensor:
    """The sinusoidal positional encoding of "Attention Is All You Need" at positions offset ... offset + T - 1:
    (T, d)."""
    pos = torch.arange(offset, offset + T, dtype=torch.float64, device=device).unsqueeze(1)  # (T, 1)
    i = torch.arange(0, d, 2, dtype=torch.float64, device=device)  # even dims
    angle = pos / torch.pow(10000.0, i / d)  # (T, ceil(d/2))
    pe = torch.zeros(T, d, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.to(dtype)

"""The one score pipeline: ω = q·k (or another similarity), scaled (ω'), soft-capped (ω''), masked
(causal, window, sinks), position terms (ALiBi, DeBERTa's disentangled terms) and α = softmax.

Every implementation that shows scores (the maps, why scaling, the circuits) calls these functions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .types import AttendOptions, PLAIN, Relative


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


def soft_cap(scaled: torch.Tensor, cap: float) -> torch.Tensor:
    """c · tanh(ω′ / c) (Gemma 2's soft-capping: every score within ±c), -inf (a masked key) kept."""
    return torch.where(torch.isinf(scaled), scaled, torch.tanh(scaled / cap) * cap)


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


def attention_weights(scaled: torch.Tensor) -> torch.Tensor:
    """alpha = softmax over keys. torch.softmax subtracts each row's maximum, so large scores do not overflow."""
    return torch.softmax(scaled, dim=-1)

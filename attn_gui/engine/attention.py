"""The math of (multi-head) scaled dot-product self-attention, every step kept.

Shapes: T tokens, d = d_model, h heads, d_k per-head query/key size, d_v per-head
value size. All functions are batched over heads; there is no loop over tokens or heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Projections:
    """The weights of one multi-head attention block; all None means no projections (q = k = v = x).

    Row layout (q = x W): w_q, w_k (h, d, d_k), w_v (h, d, d_v), w_o (h*d_v, d).
    Column layout (q = W x): w_q, w_k (h, d_k, d), w_v (h, d_v, d), w_o (d, h*d_v).
    Biases, when the model has them: b_q, b_k (h, 1, d_k), b_v (h, 1, d_v), b_o (1, d).
    """

    w_q: torch.Tensor | None = None
    w_k: torch.Tensor | None = None
    w_v: torch.Tensor | None = None
    w_o: torch.Tensor | None = None
    b_q: torch.Tensor | None = None
    b_k: torch.Tensor | None = None
    b_v: torch.Tensor | None = None
    b_o: torch.Tensor | None = None

    def transposed(self) -> "Projections":
        """The same weights in the other layout (W becomes Wᵀ; views, no copy; biases unchanged)."""
        t = lambda w: None if w is None else w.transpose(-2, -1)  # noqa: E731
        return Projections(t(self.w_q), t(self.w_k), t(self.w_v), t(self.w_o),
                           self.b_q, self.b_k, self.b_v, self.b_o)


def attend(x: torch.Tensor, weights: Projections, *, layout: str = "row", scale: bool = True,
           temperature: float = 1.0, causal: bool = False, similarity: str = "dot",
           reduce_to: int | None = None, block_bytes: int = 16 * 2**20) -> dict[str, torch.Tensor]:
    """Multi-head self-attention over ``x`` with every intermediate kept.

    Parameters
    ----------
    x : (T, d) tensor
        The tokens' input vectors (embeddings, or the hidden state entering a layer).
    weights : Projections
        In ``layout``; all None for simplified attention (q = k = v = x, one head).
    layout : "row" or "column"
    scale, temperature, causal, similarity
        Divide the scores by sqrt(d_k), further by ``temperature``; mask future keys;
        "dot" or "cosine" scores.
    reduce_to : int, optional
        Keep the T x T fields only as ``reduce_matrix(field, reduce_to, reduce_to)`` would
        pool them, computed per head and per block of query rows of about ``block_bytes``,
        so no h x T x T tensor is ever allocated. The values are the same.

    Returns
    -------
    dict with q, k (h, T, d_k), v (h, T, d_v), scores, scaled, weights (h, T, T),
    head_outputs (h, T, d_v), concat (T, h*d_v) and output (T, d). With ``reduce_to``,
    ``shown`` (a dict of the three pooled (h, r, r) fields) replaces scores, scaled and weights.
    """
    T, d = x.size()  # tokens, embedding size
    p = weights
    if p.w_q is None:
        q = k = v = x.unsqueeze(0)  # simplified attention: q = k = v = x, (1, T, d)
    else:
        q = project(x, p.w_q, layout)  # (h, T, d_k)
        k = project(x, p.w_k, layout)  # (h, T, d_k)
        v = project(x, p.w_v, layout)  # (h, T, d_v)
        if p.b_q is not None:
            q, k, v = q + p.b_q, k + p.b_k, v + p.b_v  # (h, 1, n) broadcasts over the T rows
    d_k = q.size(-1)

    if reduce_to is None:
        attn_scores = attention_scores(q, k, similarity)  # omega (h, T, T)
        scaled = scale_and_mask(attn_scores, d_k, scale, temperature, causal)  # (h, T, T), -inf where masked
        attn_weights = attention_weights(scaled)  # alpha (h, T, T), rows sum to 1
        context_vec = context_vectors(attn_weights, v)  # z (h, T, d_v)
        fields = dict(scores=attn_scores, scaled=scaled, weights=attn_weights)
    else:
        context_vec, shown = _attend_in_blocks(q, k, v, reduce_to, block_bytes, scale=scale,
                                               temperature=temperature, causal=causal, similarity=similarity)
        fields = dict(shown=shown)
    concat = concat_heads(context_vec)  # (T, h*d_v)
    output = output_projection(concat, p.w_o, layout)  # (T, d)
    if p.b_o is not None:
        output = output + p.b_o  # (1, d) broadcasts over the T rows
    return dict(q=q, k=k, v=v, **fields, head_outputs=context_vec, concat=concat, output=output)


def query_rows(q: torch.Tensor, k: torch.Tensor, start: int, *, scale: bool = True, temperature: float = 1.0,
               causal: bool = False, similarity: str = "dot") -> dict[str, torch.Tensor]:
    """omega, the scaled scores and alpha of the query rows ``q``, the rows from ``start`` on.

    Each row of attention depends on its own query alone, so these equal the same rows of
    the full (h, T, T) fields.

    Parameters
    ----------
    q : (..., n, d_k) the queries of rows start ... start + n - 1
    k : (..., T, d_k) every key

    Returns
    -------
    dict with scores, scaled and weights, each (..., n, T)
    """
    attn_scores = attention_scores(q, k, similarity)  # (..., n, T)
    scaled = scale_and_mask(attn_scores, k.size(-1), scale, temperature, causal, row_start=start)
    return dict(scores=attn_scores, scaled=scaled, weights=attention_weights(scaled))


def _attend_in_blocks(q, k, v, reduce_to: int, block_bytes: int, **options):
    """z (h, T, d_v) and the T x T fields pooled to at most reduce_to per side, block by block of rows.

    Every head is computed at once, ``block_bytes`` of scores at a time. Each block of query
    rows holds whole pooling blocks (``reduce.block_edges``), so pooling it at once gives
    exactly the rows of the pooled full matrix.
    """
    from .reduce import block_edges, reduce_matrix, reduce_row_blocks

    h, T, d_k = q.shape  # heads, tokens, head size
    side = min(T, reduce_to)
    if options["similarity"] == "cosine":  # normalise once, not per block
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        options = {**options, "similarity": "dot"}
    edges = block_edges(T, side)
    rows_per_block = max(1, block_bytes // (h * T * q.element_size()))
    groups, first = [], 0  # runs of pooling blocks, about rows_per_block query rows each
    for i, (start, end) in enumerate(edges):
        if end - edges[first][0] > rows_per_block and i > first:
            groups.append((first, i))
            first = i
    groups.append((first, len(edges)))
    kinds = {"scores": "signed", "scaled": "signed", "weights": "weights"}
    shown = {name: q.new_empty(h, side, side) for name in kinds}
    context_vec = q.new_empty(h, T, v.size(-1))  # z (h, T, d_v)
    row_max = q.new_empty(h, T)  # each row's largest alpha: how one-hot the softmax is, per row
    for b0, b1 in groups:
        start, end = edges[b0][0], edges[b1 - 1][1]  # query rows of these pooling blocks
        rows = query_rows(q[:, start:end], k, start, **options)  # each (h, n, T)
        context_vec[:, start:end] = context_vectors(rows["weights"], v)  # (h, n, d_v)
        row_max[:, start:end] = rows["weights"].amax(-1)
        for name, kind in kinds.items():
            if len(groups) == 1:  # every row at once (a GPU's block): pool as the display does
                shown[name] = reduce_matrix(rows[name], side, side, kind)
            else:
                shown[name][:, b0:b1] = reduce_row_blocks(rows[name], edges[b0:b1], start, side, kind)
    shown["weights_row_max"] = row_max
    return context_vec, shown


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
    if layout == "row":
        return x @ w  # (T, d) @ (h, d, n) -> (h, T, n)
    return x @ w.transpose(-2, -1)  # q_i = W x_i for every row i: (h, T, n)


def attention_scores(q: torch.Tensor, k: torch.Tensor, similarity: str = "dot") -> torch.Tensor:
    """omega = q k^T, or the cosine of the angle between each query and key.

    q, k : (h, T, d_k) -> (h, T, T)
    """
    if similarity == "cosine":
        # F.normalize keeps a zero vector at zero, so its similarity is 0, not NaN
        q = F.normalize(q, dim=-1)
        k = F.normalize(k, dim=-1)
    return q @ k.transpose(-2, -1)


def scale_and_mask(
    scores: torch.Tensor, d_k: int, scale: bool = True, temperature: float = 1.0, causal: bool = False,
    row_start: int = 0,
) -> torch.Tensor:
    """omega / sqrt(d_k) / temperature, with keys after the query set to -inf when causal.

    ``scores`` (..., n, T) are the rows of queries ``row_start`` ... ``row_start + n - 1``.
    """
    divisor = (math.sqrt(d_k) if scale else 1.0) * temperature
    scaled = scores / divisor if divisor != 1.0 else scores.clone()
    if causal:
        n, T = scores.shape[-2:]  # query rows, keys
        query = torch.arange(row_start, row_start + n, device=scores.device).unsqueeze(1)  # (n, 1)
        future = torch.arange(T, device=scores.device) > query  # (n, T): key j after query i
        scaled.masked_fill_(future, float("-inf"))
    return scaled


def attention_weights(scaled: torch.Tensor) -> torch.Tensor:
    """alpha = softmax over keys. torch.softmax subtracts each row's maximum, so large scores do not overflow."""
    return torch.softmax(scaled, dim=-1)


def context_vectors(weights: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """z_i = sum_j alpha_ij v_j.  (h, T, T) @ (h, T, d_v) -> (h, T, d_v)"""
    return weights @ v


def concat_heads(z: torch.Tensor) -> torch.Tensor:
    """(h, T, d_v) -> (T, h * d_v), head 0's columns first (as torch.cat of the heads)."""
    h, T, d_v = z.shape
    return z.transpose(0, 1).reshape(T, h * d_v)


def output_projection(concat: torch.Tensor, w_o: torch.Tensor | None, layout: str) -> torch.Tensor:
    """concat W_o (row: W_o is (h*d_v, d)) or W_o concat (column: W_o is (d, h*d_v))."""
    if w_o is None:
        return concat
    return concat @ w_o if layout == "row" else concat @ w_o.T


def sinusoidal_positions(T: int, d: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The sinusoidal positional encoding of "Attention Is All You Need": (T, d)."""
    pos = torch.arange(T, dtype=torch.float64, device=device).unsqueeze(1)  # (T, 1)
    i = torch.arange(0, d, 2, dtype=torch.float64, device=device)  # even dims
    angle = pos / torch.pow(10000.0, i / d)  # (T, ceil(d/2))
    pe = torch.zeros(T, d, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.to(dtype)

"""The projections around attention: X to q, k, v (per head, with RoPE and q/k norms), the context
vectors z = αV, the heads concatenated and W_o; the norms and sinusoidal positions they read.
"""

from __future__ import annotations

from typing import cast

import torch

from .rope import rope_tables, rope_theta, rotate
from .types import AttendOptions, PLAIN, Projections, QKNorm, Rotary


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


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) * weight, over the last axis (Llama's RMSNorm)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def norm_across_heads(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of each token's heads side by side (OLMo 2's q_norm over h d_k).  (..., h, T, d_k), (h d_k,)"""
    heads = x.size(-3)
    joined = x.transpose(-3, -2).flatten(-2)  # (..., T, h d_k)
    return rms_norm(joined, weight, eps).unflatten(-1, (heads, -1)).transpose(-3, -2)


def repeat_kv(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """(..., g, T, n) -> (..., h, T, n): each key/value head repeated for its h / g query heads (itself when g = h)."""
    groups = kv.size(-3)
    return kv if groups == heads else kv.repeat_interleave(heads // groups, dim=-3)


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

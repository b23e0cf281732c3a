"""Score attribution: one scaled score of a head split into query-side x key-side component terms."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...kernel.rope import rope_tables, rotate
from ...kernel.scores import soft_cap
from ...base.errors import ConfigError
from ...model.plan import Request, as_plan
from ...specs.wiring import BLOCKS
from ...model.decoder.parts import head_weights
from .trace import Trace, decoder_parts, trace, frozen_norm


@dataclass(frozen=True)
class ScoreAttribution:
    """One scaled score omega'[query, key] of a head, split into query-side x key-side component terms.

    Attributes
    ----------
    matrix : (C_q, C_k) tensor
        matrix[a, b] = (R_query q_a) . (R_key k_b) / divisor: the query that component a gives against the key
        that component b gives, each rotated by its position as the layer's RoPE turns it (its scaling, its
        rotated dimensions), over what the layer divides its scores by (the plan's: √d_k, Gemma's
        √query_pre_attn_scalar, GPT-2's layer number, none where the model does not scale).
    query_names, key_names : the components of each side: those of the residual entering the layer,
        then "bias" (the norm's bias and the projection's bias) where the model has one
    score : float, the model's own scaled score ω′, which the matrix sums to
    capped : float or None, the soft-capped score ω″ = c tanh(ω′ / c) the softmax reads (Gemma 2), which no sum
        of terms gives; None without a soft-cap
    divisor : str, what the scores are divided by ("√64", "√256", "√64 / 3")
    """

    matrix: torch.Tensor
    query_names: list[str]
    key_names: list[str]
    score: float
    layer: int
    head: int
    query: int
    key: int
    capped: float | None = None
    divisor: str = ""


def _side(t: Trace, w: dict, shape, layer: int, pos: int, w_all: torch.Tensor, b_all, x_norm,
          index: int) -> tuple:
    """One side's per-component vectors (C [+ 1], d_k) before RoPE, and its names.

    ``w_all``, ``b_all``: every head's projection (H, d_k, d) and bias (H, 1, d_k) or None, of which head ``index``
    is this side's; ``x_norm``: the q/k norm's gain (per head, d_k; or over all heads, H d_k), or None."""
    count = t.entering[layer]
    block = BLOCKS[shape.block]
    prefix = None if block.attn_norm is None else f"model.layers.{layer}.{block.attn_norm}"
    shares, beta = frozen_norm(t.parts[:count, pos:pos + 1], t.residual[layer][pos:pos + 1], w, prefix,
                               shape)  # (C, 1, d)
    w_x = w_all[index]  # (d_k, d)
    vectors = shares[:, 0] @ w_x.T  # (C, d_k)
    names = list(t.names[:count])
    bias = None if beta is None else beta @ w_x.T
    if b_all is not None:
        bias = b_all[index].reshape(-1) if bias is None else bias + b_all[index].reshape(-1)
    if bias is not None:
        vectors = torch.cat([vectors, bias[None]])
        names.append("bias")
    if x_norm is not None:  # the q/k RMSNorm, its scale frozen on the whole vector this token gives
        d_k = vectors.size(-1)
        full = vectors.sum(0)
        if x_norm.numel() != d_k:  # OLMo 2: over every head of the token (H d_k); this head's slice of the gain
            x = shares[:, 0].sum(0) + (0 if beta is None else beta)  # what attention reads at ``pos`` (d,)
            full = torch.einsum("hkd,d->hk", w_all, x) + (0 if b_all is None else b_all.reshape(w_all.size(0), -1))
            x_norm = x_norm.view(w_all.size(0), d_k)[index]
        vectors = vectors * torch.rsqrt(full.pow(2).mean() + shape.eps) * x_norm
    return vectors, names


def score_attribution(request: Request, head: int, query: int, key: int,
                      traced: Trace | None = None) -> ScoreAttribution:
    """Split the scaled score omega'[query, key] of head ``head`` (0-based) of the shown layer (``config.layer``)
    into the terms of each pair (query-side component, key-side component); the terms sum to the score.

    The layer's arithmetic is its plan's (``engine.plan``): RoPE with its scaling and rotated dimensions, its
    divisor. Positions are 0-based token indices; a key the query cannot see (after it, or out of the window) is
    refused.
    """
    planned = as_plan(request)
    _, w, shape, _, _ = decoder_parts(planned)
    layer = planned.config.layer
    if not 0 <= layer < shape.layers:
        raise ConfigError(f"layer {layer + 1} does not exist: layers are 1 to {shape.layers}")
    if not 0 <= head < shape.heads:
        raise ConfigError(f"head {head + 1} does not exist: heads are 1 to {shape.heads}")
    t = traced or trace(planned)
    n = len(t.ids)
    if not (0 <= query < n and 0 <= key < n):
        raise ConfigError(f"query and key must be token positions 1 to {n}; got {query + 1} and {key + 1}")
    score = t.scaled[layer, head, query, key]
    if not torch.isfinite(score):
        raise ConfigError(f"token {query + 1} cannot see token {key + 1} (masked): its score is -inf")
    p = head_weights(w, layer, shape)
    assert p.w_q is not None and p.w_k is not None  # a decoder layer has every projection
    options = shape.options(layer)  # the plan's: as this compute ran the layer
    group = head // (shape.heads // shape.kv_heads)  # the K head this query head reads
    with torch.no_grad():
        qs, q_names = _side(t, w, shape, layer, query, p.w_q, p.b_q, p.q_norm, head)
        ks, k_names = _side(t, w, shape, layer, key, p.w_k, p.b_k, p.k_norm, group)
        d_k = qs.size(-1)
        if options.rope_base is not None:  # rotate each term by its position: the rotation is linear
            r = options.rope_dims or d_k  # partial rotary: the first r dimensions turn
            _, cos, sin = rope_tables(n, r, options.rope_base, qs.dtype, qs.device, 0, options.rope_scaling)
            qs, ks = rotate(qs, cos[query], sin[query]), rotate(ks, cos[key], sin[key])
        if options.similarity == "cosine":
            raise ConfigError("a cosine similarity divides each score by |q| |k|, which no sum of terms gives: "
                              "score attribution splits dot-product scores")
        matrix = qs @ ks.T / options.divisor(d_k)  # (C_q, C_k)
    capped = None if options.softcap is None else float(soft_cap(score.double(), options.softcap))
    return ScoreAttribution(matrix.double().cpu(), q_names, k_names, float(score), layer, head, query, key,
                            capped, " / ".join(options.divisor_text(d_k)) or "1")

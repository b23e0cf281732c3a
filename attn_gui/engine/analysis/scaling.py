"""Why scaling matters: is the softmax saturated, and how entropy falls as d_k grows.

Seed 004's "why scaling" argument on the current numbers: dot products of d_k terms
grow with d_k, a softmax of large scores is nearly one-hot, and dividing by sqrt(d_k)
(or a temperature, or weights drawn with variance 1/fan_in) keeps it soft.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..kernel.scores import alibi_slopes, scaled_scores, score_weights
from ..run.compute import compute
from ..config.config import AttentionConfig
from .metrics import causal_visible, head_metrics

ONE_HOT = 0.99  # a row whose largest weight reaches this is as good as one-hot
SATURATED_SHARE = 0.5  # the warning shows when at least this share of rows is one-hot


@dataclass(frozen=True)
class Saturation:
    """How one-hot a set of attention rows is.

    Attributes
    ----------
    one_hot : float
        Share of rows with max alpha >= ``ONE_HOT`` among rows with two or more visible keys
        (a row with one key is one-hot by construction and is not counted).
    rows : int
        The rows counted.
    span : float
        The largest finite |omega'| (the softmax's input); 0 when there is none.
    """

    one_hot: float
    rows: int
    span: float

    @property
    def saturated(self) -> bool:
        """At least half the rows are one-hot."""
        return self.rows > 0 and self.one_hot >= SATURATED_SHARE


def saturation(weights: torch.Tensor, scaled: torch.Tensor | None = None,
               mask: torch.Tensor | None = None) -> Saturation:
    """How many rows of ``weights`` (..., T, T_k) are one-hot, and how far ``scaled`` reaches.

    ``mask`` (True = visible key, broadcastable) says which keys each row has; None: all.
    """
    T, T_k = weights.shape[-2:]  # T_k = T in self-attention
    if mask is None:
        keys = torch.full(weights.shape[:-1], T_k, device=weights.device)  # (..., T)
    else:
        keys = mask.bool().sum(-1).broadcast_to(weights.shape[:-1])  # the mask's rows counted, never broadcast whole
    counted = keys > 1
    one_hot = (weights.amax(-1) >= ONE_HOT) & counted
    rows = int(counted.sum())
    return Saturation(float(one_hot.sum()) / rows if rows else 0.0, rows,
                      0.0 if scaled is None else finite_span(scaled))


SPAN_BLOCK = 2**22  # values of omega' read at a time by ``finite_span``: a copy of all of them could be gigabytes


def finite_span(scaled: torch.Tensor) -> float:
    """The largest finite |value| of ``scaled`` (0 when none), read in blocks of rows: never a full-size copy."""
    rows = scaled.reshape(-1, scaled.shape[-1]) if scaled.dim() else scaled.reshape(1, 1)
    step = max(1, SPAN_BLOCK // max(1, rows.shape[-1]))
    span = 0.0
    for start in range(0, rows.shape[0], step):
        block = rows[start:start + step]
        block = block.abs().masked_fill_(~torch.isfinite(block), 0)
        if block.numel():
            span = max(span, float(block.max()))
    return span


@dataclass(frozen=True)
class EntropySweep:
    """Mean normalised entropy of alpha against d_k, with and without 1/sqrt(d_k).

    Attributes
    ----------
    d_ks : tuple of int
    scaled, unscaled : tuple of float
        Mean over heads and rows of entropy / ln(keys): 1 = uniform, 0 = one-hot.
    """

    d_ks: tuple[int, ...]
    scaled: tuple[float, ...]
    unscaled: tuple[float, ...]


def sweep_d_ks(d_k: int, top: int = 512, even: bool = False) -> tuple[int, ...]:
    """Powers of two from 1 (2 when ``even``: RoPE rotates pairs) to ``top``, and ``d_k`` itself."""
    return tuple(sorted({2 ** i for i in range(1 if even else 0, int(math.log2(top)) + 1)} | {d_k}))


def sweep_cost(config: AttentionConfig, T: int, d_ks: tuple[int, ...]) -> int:
    """Multiply-adds of the sweep: the weights drawn and the scores of every point."""
    h, d, d_v = config.heads, config.d_model, config.d_v
    return sum(h * (d * (2 * dk + 2 * d_v) + T * d * 2 * dk + T * T * dk) for dk in d_ks)


def entropy_vs_dk(config: AttentionConfig, d_ks: tuple[int, ...] | None = None) -> EntropySweep:
    """Mean normalised entropy of alpha for each d_k, with and without scaling.

    Everything else is ``config``'s: sentence, sizes, seeds, initialisation, temperature,
    mask and similarity; only d_k changes. Random weights with projections only (a
    model's d_k is fixed, and without projections d_k = d_model).
    """
    if config.model is not None or not config.projections:
        raise ValueError("the d_k sweep needs random weights with projections")
    d_ks = sweep_d_ks(config.d_k) if d_ks is None else tuple(d_ks)
    scaled_curve: list[float] = []
    unscaled_curve: list[float] = []
    for d_k in d_ks:
        result = compute(config.replace(d_k=d_k, scale=True))
        assert result.scores is not None and result.weights is not None  # not streamed: no display_max
        T = result.seq_len
        options = result.resolved.shown  # every option as the compute ran it but the scale
        mask = causal_visible(T, result.scores.device) if options.causal else None
        slopes = alibi_slopes(result.heads, result.scores.dtype, result.scores.device) if options.alibi else None
        unscaled_scores = scaled_scores(result.scores, options.replace(scale=False), d_k, slopes=slopes)
        unscaled = score_weights(unscaled_scores, options)[1]
        for curve, weights in ((scaled_curve, result.weights), (unscaled_curve, unscaled)):
            curve.append(float(head_metrics(weights, mask, cross=config.cross)["entropy_norm"].mean()))
    return EntropySweep(d_ks, tuple(scaled_curve), tuple(unscaled_curve))

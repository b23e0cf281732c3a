"""Head metrics: one number per head saying what its attention weights do.

Each metric is a mean over the query rows that have at least one visible key.
Positions count from 1 in the definitions (the first token is position 1):

- ``entropy``: -sum_j alpha_ij ln alpha_ij, in nats (0 ln 0 = 0);
- ``entropy_norm``: the entropy divided by ln(visible keys of the row), 0 for a row with one key;
- ``max_weight``: max_j alpha_ij;
- ``sink``: alpha_i1, the weight on the first token;
- ``previous``: alpha_i,i-1, over rows i >= 2;
- ``self``: alpha_ii;
- ``distance``: sum_j alpha_ij |i - j|, the mean distance attended over, in tokens.

In cross-attention (queries and keys from two texts, T x T_k) ``previous``, ``self`` and
``distance`` compare positions of different texts: they are NaN; ``sink`` is the weight on
the second text's first token.
"""

from __future__ import annotations

import torch

METRICS: tuple[str, ...] = ("entropy", "entropy_norm", "max_weight", "sink", "previous", "self", "distance")

# Plain words for each metric, for tables, tooltips and CSV readers.
METRIC_LABELS: dict[str, str] = {
    "entropy": "entropy (nats)",
    "entropy_norm": "entropy / ln(keys)",
    "max_weight": "max α",
    "sink": "first token",
    "previous": "previous token",
    "self": "self",
    "distance": "distance",
}
METRIC_HELP: dict[str, str] = {
    "entropy": "−Σ_j α_ij ln α_ij: 0 when a row looks at one key, ln T when it looks at all alike",
    "entropy_norm": "entropy ÷ ln(visible keys): 0 = one-hot, 1 = uniform",
    "max_weight": "the largest weight of each row: 1 = one-hot",
    "sink": "α_i1: weight on the first token ([CLS] in MiniLM), where heads with nothing to do park",
    "previous": "α_i,i−1: weight on the token just before (rows from the 2nd)",
    "self": "α_ii: weight of each token on itself",
    "distance": "Σ_j α_ij |i − j|: how far, in tokens, a row looks on average",
}


def causal_visible(T: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The visible keys of a causal mask: (T, T), True on and below the diagonal."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril_()


def _row_mean(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` (..., R) over the rows where ``rows`` is True; NaN where there are none."""
    rows = rows.to(values.dtype)
    return (values * rows).sum(-1) / rows.sum(-1)


def head_metrics(weights: torch.Tensor, mask: torch.Tensor | None = None,
                 cross: bool = False) -> dict[str, torch.Tensor]:
    """Per-head metrics of attention weights.

    Parameters
    ----------
    weights : (h, T, T_k) or (L, h, T, T_k) tensor
        alpha: each query row's weights over the keys (T_k = T unless ``cross``).
    mask : bool tensor, optional
        True where a key is visible to a query, broadcastable to ``weights``
        (``causal_visible(T)`` for a causal mask). None: every key is visible.
        Weights on hidden keys are taken as 0.
    cross : bool
        The queries and keys are two texts (cross-attention): the metrics of positions are NaN.

    Returns
    -------
    dict
        Metric name (``METRICS``) -> tensor of shape (h,) or (L, h), on the weights' device
        and in their floating dtype. A metric with no rows to average over is NaN
        (``previous`` of a single token).
    """
    if weights.dim() not in (3, 4) or (weights.size(-1) != weights.size(-2) and not cross):
        raise ValueError(f"weights must be (h, T, T) or (L, h, T, T); got {tuple(weights.shape)}")
    if not weights.is_floating_point():
        weights = weights.float()
    T = weights.size(-1)  # keys
    if mask is None:
        visible = torch.ones(weights.shape[-2:], dtype=torch.bool, device=weights.device)
    else:
        visible = torch.as_tensor(mask, device=weights.device).bool()
    visible = visible.broadcast_to(weights.shape)
    alpha = torch.where(visible, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))

    keys = visible.sum(-1)  # (..., T) visible keys of each query row
    rows = keys > 0  # the rows that count
    entropy = -torch.xlogy(alpha, alpha).sum(-1)  # (..., T), 0 ln 0 = 0
    log_keys = torch.log(keys.clamp_min(2).to(alpha.dtype))
    entropy_norm = torch.where(keys > 1, entropy / log_keys, torch.zeros_like(entropy))
    out = {
        "entropy": _row_mean(entropy, rows),
        "entropy_norm": _row_mean(entropy_norm, rows),
        "max_weight": _row_mean(alpha.amax(-1), rows),
        "sink": _row_mean(alpha[..., 0], rows),
    }
    if cross:
        nan = torch.full_like(out["entropy"], float("nan"))
        return {**out, "previous": nan, "self": nan, "distance": nan}
    position = torch.arange(T, device=alpha.device, dtype=alpha.dtype)
    offset = (position[:, None] - position[None, :]).abs()  # |i - j|, (T, T)
    return {
        **out,
        "previous": _row_mean(alpha.diagonal(offset=-1, dim1=-2, dim2=-1), rows[..., 1:]),
        "self": _row_mean(alpha.diagonal(dim1=-2, dim2=-1), rows),
        "distance": _row_mean((alpha * offset).sum(-1), rows),
    }

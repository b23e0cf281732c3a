"""Which query heads share one key/value head (grouped-query attention), and each head's sink mass."""

from __future__ import annotations

import torch

from ..engine import AttentionResult


def kv_groups(result: AttentionResult) -> list[list[int]]:
    """The query heads (0-based) reading each key/value head, in order.

    With ``kv_heads`` g < h heads, head ``i`` reads K/V head ``i // (h // g)``; with
    g = h every head is a group of its own.
    """
    # a model read through transformers may lack K after RoPE (not captured): its unrotated K or V has the heads
    kv = next((n for n in ("k", "k_unrotated", "v") if getattr(result, n) is not None), None)
    if kv is None:
        return [[head] for head in range(result.heads)]
    groups: list[list[int]] = [[] for _ in range(result.shape(kv)[0])]
    for head in range(result.heads):
        groups[result.head_index(kv, head)].append(head)
    return groups


def sink_mass(layer_weights: torch.Tensor) -> torch.Tensor:
    """Each layer's and head's mean alpha on the first token, over the queries after it: (L, h).

    The first query row is left out: in a causal model it sees the first token only (alpha 1).
    ``layer_weights`` is (L, h, T, T); with T = 1 the one row counts.
    """
    rows = layer_weights[:, :, 1:, 0] if layer_weights.size(-2) > 1 else layer_weights[:, :, :, 0]
    return rows.mean(-1)

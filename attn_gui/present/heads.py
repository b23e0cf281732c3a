"""Which query heads share one key/value head (grouped-query attention), for the heads strip."""

from __future__ import annotations

from ..engine import AttentionResult


def kv_groups(result: AttentionResult) -> list[list[int]]:
    """The query heads (0-based) reading each key/value head, in order.

    With ``kv_heads`` g < h heads, head ``i`` reads K/V head ``i // (h // g)``; with
    g = h every head is a group of its own.
    """
    groups: list[list[int]] = [[] for _ in range(result.shape("k")[0])]
    for head in range(result.heads):
        groups[result.head_index("k", head)].append(head)
    return groups

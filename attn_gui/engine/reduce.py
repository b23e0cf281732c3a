"""Shrink large matrices on their device before they travel to the host or the screen.

A T x T map at T = 8192 is 64 M cells; a screen shows well under a million. Pooling
on the device first means host memory and copy time follow the displayed size, not T^2.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reduce_matrix(m: torch.Tensor, max_rows: int, max_cols: int, kind: str = "signed") -> torch.Tensor:
    """Pool the last two axes down to at most ``max_rows`` x ``max_cols`` cells.

    Each output cell keeps its block's extreme value: the maximum for weights (a thin
    stripe of strong attention stays visible), the value of largest magnitude, sign
    kept, for signed matrices. -inf (masked) cells only win where the whole block is
    masked. A matrix already small enough is returned as it is.

    Parameters
    ----------
    m : (..., R, C) tensor
    max_rows, max_cols : int
    kind : "weights" or "signed"
    """
    R, C = m.shape[-2:]
    if R <= max_rows and C <= max_cols:
        return m
    out_size = (min(R, max_rows), min(C, max_cols))
    lead = m.shape[:-2]
    flat = m.reshape(-1, 1, R, C)  # (N, 1, R, C) for the pooling op
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    pos = F.adaptive_max_pool2d(flat, out_size)
    if kind != "weights":
        masked = torch.isneginf(flat)
        neg = F.adaptive_max_pool2d(torch.where(masked, float("-inf"), -flat), out_size)
        pos = torch.where(pos >= neg, pos, -neg)
    return pos.reshape(*lead, *out_size)


def block_edges(n: int, out: int) -> list[tuple[int, int]]:
    """[start, end) of each of ``out`` blocks as adaptive pooling splits ``n`` items."""
    return [((i * n) // out, -((-(i + 1) * n) // out)) for i in range(out)]

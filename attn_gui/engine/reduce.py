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


def reduce_row_blocks(rows: torch.Tensor, edges: list[tuple[int, int]], offset: int, max_cols: int,
                      kind: str = "signed") -> torch.Tensor:
    """Pool some whole row blocks of a matrix exactly as :func:`reduce_matrix` pools the full matrix.

    A block's extreme is the extreme of its rows' extremes, so pooling the columns of these
    rows, then each row block, gives the same cells (the sign of a signed cell is decided
    only once its whole block is pooled, as there).

    Parameters
    ----------
    rows : (..., n, C) tensor
        Rows ``offset`` ... ``offset + n - 1`` of the full (..., R, C) matrix.
    edges : list of (start, end)
        The full matrix's row blocks (``block_edges(R, r)``) to pool; all inside ``rows``.
    max_cols : int
    kind : "weights" or "signed"

    Returns
    -------
    (..., len(edges), min(C, max_cols)) tensor
    """
    n, C = rows.shape[-2:]
    lead = rows.shape[:-2]
    cols = min(C, max_cols)
    flat = rows.reshape(-1, n, C)  # (N, n, C)
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    longest = max(end - start for start, end in edges)
    # (blocks, longest) row indices; a short block repeats its last row, which a maximum ignores
    index = torch.tensor([[min(start + j, end - 1) - offset for j in range(longest)] for start, end in edges],
                         device=flat.device)

    def pool(m: torch.Tensor) -> torch.Tensor:
        if cols < C:
            m = F.adaptive_max_pool1d(m.reshape(-1, 1, C), cols).reshape(-1, n, cols)  # (N, n, cols)
        return m[:, index].amax(dim=2)  # (N, blocks, longest, cols) -> (N, blocks, cols)

    pos = pool(flat)
    if kind != "weights":
        neg = pool(torch.where(torch.isneginf(flat), float("-inf"), -flat))
        pos = torch.where(pos >= neg, pos, -neg)
    return pos.reshape(*lead, len(edges), cols)

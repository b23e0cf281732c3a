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

    A block's extreme is the extreme of its rows' extremes, so taking each row block's
    extreme, then pooling its columns, gives the same cells (the sign of a signed cell is
    decided only once its whole block is pooled, as there).

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
    blocks, cols = len(edges), min(C, max_cols)
    flat = rows.reshape(-1, n, C)  # (N, n, C)
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    longest = max(end - start for start, end in edges)
    # the rows of each block, (blocks * longest); a short block repeats its last row, which a maximum ignores
    index = torch.tensor([min(start + j, end - 1) - offset for start, end in edges for j in range(longest)],
                         device=flat.device)
    grouped = flat.index_select(1, index).reshape(-1, blocks, longest, C)  # (N, blocks, longest, C)

    def pool(m: torch.Tensor) -> torch.Tensor:
        m = m.amax(dim=2)  # each block's rows -> (N, blocks, C)
        if cols < C:  # the columns exactly as reduce_matrix splits them; the rows stay
            m = F.adaptive_max_pool2d(m.unsqueeze(1), (blocks, cols)).squeeze(1)
        return m

    pos = pool(grouped)
    if kind != "weights":
        neg = pool(torch.where(torch.isneginf(grouped), float("-inf"), -grouped))
        pos = torch.where(pos >= neg, pos, -neg)
    return pos.reshape(*lead, blocks, cols)

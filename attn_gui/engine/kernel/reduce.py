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


def block_runs(edges: list[tuple[int, int]], rows: int) -> list[tuple[int, int]]:
    """Runs [first, last) of consecutive blocks ``edges`` (``block_edges``), each of at most ``rows`` rows
    (one block at least): a streamed run's blocks of query rows, each holding whole pooling blocks."""
    runs, first = [], 0
    for i, (_start, end) in enumerate(edges):
        if end - edges[first][0] > rows and i > first:
            runs.append((first, i))
            first = i
    runs.append((first, len(edges)))
    return runs


def reduce_row_blocks(rows: torch.Tensor, edges: list[tuple[int, int]], offset: int, max_cols: int,
                      kind: str = "signed", width: int | None = None) -> torch.Tensor:
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
    width : the full matrix's columns when ``rows`` holds only its first C (causal rows, whose later
        columns are masked: -inf for signed scores, 0 for weights); None: C

    Returns
    -------
    (..., len(edges), min(width, max_cols)) tensor
    """
    n, C = rows.shape[-2:]
    width = C if width is None else width
    lead = rows.shape[:-2]
    flat = rows.reshape(-1, n, C)  # (N, n, C)
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    fill = 0.0 if kind == "weights" else float("-inf")
    pos = pool_row_blocks(flat, edges, offset, max_cols, width, fill)
    if kind != "weights":
        neg = pool_row_blocks(torch.where(torch.isneginf(flat), float("-inf"), -flat), edges, offset, max_cols,
                              width, fill)
        pos = torch.where(pos >= neg, pos, -neg)
    return pos.reshape(*lead, len(edges), min(width, max_cols))


def pool_row_blocks(rows: torch.Tensor, edges: list[tuple[int, int]], offset: int, max_cols: int,
                    width: int | None = None, fill: float = 0.0) -> torch.Tensor:
    """Weights' rows pooled as :func:`reduce_row_blocks` pools them (each cell its block's maximum), columns first.

    A block's maximum is the maximum over its rows of each row's maximum over the block's columns, and
    adaptive pooling splits the columns alike in every row: pooling the columns of every row first
    shrinks the rows before they are grouped, the same cells for a tenth of the copying.

    Parameters
    ----------
    rows : (h, n, C) rows ``offset`` ... ``offset + n - 1`` of the full (h, R, width) matrix, its first C columns
    edges : the full matrix's row blocks (``block_edges(R, r)``) to pool; all inside ``rows``
    max_cols : int
    width : the full matrix's columns, the last width − C of them ``fill`` (None: C)
    fill : at most every value of ``rows`` (0 under weights, -inf)

    Returns
    -------
    (h, len(edges), min(width, max_cols)) tensor
    """
    h, n, C = rows.shape
    width = C if width is None else width
    cols = min(width, max_cols)
    flat = rows if rows.dtype in (torch.float32, torch.float64) else rows.float()
    if cols < width:
        flat = pool_columns(flat.reshape(h * n, C), cols, width, fill).view(h, n, cols)  # (h, n, cols)
    elif C < width:  # every column its own block: the later ones are ``fill``
        flat = F.pad(flat, (0, width - C), value=fill)
    return torch.stack([flat[:, start - offset:end - offset].amax(dim=1) for start, end in edges], dim=1)


def pool_columns(m: torch.Tensor, cols: int, width: int | None = None, fill: float = 0.0) -> torch.Tensor:
    """(N, C) -> (N, cols): each row's maximum over the column blocks adaptive pooling splits ``width`` into.

    A block [s, e) is covered by two windows of the shortest block's length K, [s, s + K) and
    [e - K, e), when no block is longer than 2K (as with C ≥ 2 cols): one sliding maximum of width K
    and a gather give every block, about twice as fast as ``adaptive_max_pool1d``, the same values (and
    faster than gathering each block's two windows alone, even at K = 22).

    ``width`` (None: C): the rows' full length, their columns from C on ``fill``, a value no larger than
    any of theirs (0 under weights, -inf): a block past C is ``fill``, one across C the maximum of its first part.
    """
    N, C = m.shape
    width = C if width is None else width
    edges = block_edges(width, cols)
    K = min(end - start for start, end in edges)
    if max(end - start for start, end in edges) > 2 * K:
        if C < width:
            m = F.pad(m, (0, width - C), value=fill)
        return F.adaptive_max_pool1d(m[None], cols)[0]
    inside = sum(1 for _, end in edges if end <= C)  # the blocks within the first C columns
    out = m.new_full((N, cols), fill)
    if inside:
        first = torch.tensor([start for start, _ in edges[:inside]], device=m.device)
        second = torch.tensor([end - K for _, end in edges[:inside]], device=m.device)
        window = F.max_pool1d(m[None], K, 1)[0]  # (N, C - K + 1): window[:, j] = max m[:, j:j + K]
        out[:, :inside] = torch.maximum(window.index_select(1, first), window.index_select(1, second))  # not [:, i]: 3x
    for b in range(inside, cols):  # the blocks across C: their columns before C
        start = edges[b][0]
        if start >= C:
            break
        out[:, b] = m[:, start:].amax(-1)
    return out

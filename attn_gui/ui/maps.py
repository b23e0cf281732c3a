"""From an engine result to what each heatmap shows (no widgets here).

``Frame`` is what the worker thread hands the window: the result plus every field
already reduced on its device and copied to host numpy. ``map_data`` turns one field
(and head) of a frame into a ``MapData`` with title, labels and colour scale; the
window and the exporter both use it, so a picture reads the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine import FIELDS, AttentionResult, formula
from ..engine.reduce import block_edges, reduce_matrix
from .heatmap import MapData

DISPLAY_MAX = 384  # cells per side sent to the screen: at least the pixels a map has here
THUMB_MAX = 48  # cells per side of each head in the model view


@dataclass(frozen=True)
class Frame:
    """One computed request: its id, the result, and the host arrays to draw.

    Attributes
    ----------
    request_id : int
    result : AttentionResult (tensors stay on the compute device)
    arrays : field name -> numpy array, each matrix reduced to at most DISPLAY_MAX per side
    """

    request_id: int
    result: AttentionResult
    arrays: dict[str, np.ndarray]


def make_frame(request_id: int, result: AttentionResult, max_side: int = DISPLAY_MAX) -> Frame:
    """Reduce every field on its device, then copy only the reduced arrays to the host."""
    arrays = {name: result.display(name, max_side, max_side) for name in result.fields()}
    if result.layer_weights is not None:  # the model view: every layer's and head's alpha, small
        arrays["layer_weights"] = reduce_matrix(result.layer_weights, THUMB_MAX, THUMB_MAX, "weights").cpu().numpy()
    return Frame(request_id, result, arrays)


def special_tokens(result: AttentionResult) -> tuple[int, ...]:
    """Indices of the model's special tokens ([CLS], [SEP], ...) in a model-mode result."""
    if result.config.model is None:
        return ()
    return tuple(i for i, t in enumerate(result.tokens) if t in ("[CLS]", "[SEP]"))  # [UNK] is a real word


def axis_labels(result: AttentionResult, axis: str, n: int, prefix: str = "") -> list[str]:
    if axis in ("token", "key"):
        return list(result.tokens)
    return [f"{prefix}{i}" for i in range(n)]


def full_shape(result: AttentionResult, name: str, head: int | None) -> tuple[int, int]:
    t = getattr(result, name)
    return tuple(t.shape[-2:])


def map_data(frame: Frame, name: str, head: int | None = None, hidden: tuple[int, ...] = ()) -> MapData:
    """The MapData of field ``name`` (head ``head`` for per-head fields) in ``frame``.

    ``hidden`` token indices are left out of token axes shown in full (the title says
    "shown r × c"); the numbers of the rest are unchanged.
    """
    result, info = frame.result, FIELDS[name]
    matrix = frame.arrays[name]
    if info.per_head:
        matrix = matrix[head]
    R, C = full_shape(result, name, head)
    row_blocks = block_edges(R, matrix.shape[0]) if matrix.shape[0] != R else None
    col_blocks = block_edges(C, matrix.shape[1]) if matrix.shape[1] != C else None
    if hidden and info.rows == "token" and row_blocks is None:
        keep = [i for i in range(R) if i not in hidden]
        if keep:  # a text of special tokens only is shown whole
            matrix, row_blocks = matrix[keep], [(i, i + 1) for i in keep]
    if hidden and info.cols == "key" and col_blocks is None:
        keep = [j for j in range(C) if j not in hidden]
        if keep:
            matrix, col_blocks = matrix[:, keep], [(j, j + 1) for j in keep]
    r_shown, c_shown = matrix.shape
    cfg = result.config
    heads = result.heads
    head_txt = f", head {head + 1}/{heads}" if info.per_head and heads > 1 else ""
    layer_txt = f"layer {cfg.layer}: " if cfg.model is not None else ""
    reduced = f", shown {r_shown} × {c_shown}" if (r_shown, c_shown) != (R, C) else ""
    title = f"{layer_txt}{formula(name, cfg)}  ({R} × {C}{head_txt}{reduced})"
    return MapData(
        matrix=matrix,
        title=title,
        kind=info.kind,
        row_labels=axis_labels(result, info.rows, R),
        col_labels=axis_labels(result, info.cols, C),
        row_blocks=row_blocks,
        col_blocks=col_blocks,
        symbol=info.symbol,
        head=head if info.per_head else None,
        masked_reason=("masked: this key comes after the query (causal)" if cfg.causal
                       else "not finite: overflow in this dtype"),
        pair_arrow=info.rows == "token" and info.cols == "key",
    )


def map_keys(result: AttentionResult) -> list[tuple[str, int | None]]:
    """(field, head) of every map a result has, in data-flow order."""
    keys: list[tuple[str, int | None]] = []
    for name in result.fields():
        if FIELDS[name].per_head:
            keys.extend((name, h) for h in range(result.heads))
        else:
            keys.append((name, None))
    return keys


def map_name(name: str, head: int | None) -> str:
    """The objectName / file stem of a map: ``heatmap:weights:0`` style without the prefix."""
    return name if head is None else f"{name}:{head}"

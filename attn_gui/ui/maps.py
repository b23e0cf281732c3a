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
from ..engine.reduce import block_edges
from .heatmap import MapData

DISPLAY_MAX = 512  # cells per side sent to the screen; more than a map has pixels


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
    return Frame(request_id, result, arrays)


def axis_labels(result: AttentionResult, axis: str, n: int, prefix: str = "") -> list[str]:
    if axis in ("token", "key"):
        return list(result.tokens)
    return [f"{prefix}{i}" for i in range(n)]


def full_shape(result: AttentionResult, name: str, head: int | None) -> tuple[int, int]:
    t = getattr(result, name)
    return tuple(t.shape[-2:])


def map_data(frame: Frame, name: str, head: int | None = None) -> MapData:
    """The MapData of field ``name`` (head ``head`` for per-head fields) in ``frame``."""
    result, info = frame.result, FIELDS[name]
    matrix = frame.arrays[name]
    if info.per_head:
        matrix = matrix[head]
    R, C = full_shape(result, name, head)
    r_shown, c_shown = matrix.shape
    cfg = result.config
    heads = result.heads
    head_txt = f", head {head + 1}/{heads}" if info.per_head and heads > 1 else ""
    reduced = ""
    if (r_shown, c_shown) != (R, C):
        reduced = f", shown {r_shown} × {c_shown}"
    title = f"{formula(name, cfg)}  ({R} × {C}{head_txt}{reduced})"
    return MapData(
        matrix=matrix,
        title=title,
        kind=info.kind,
        row_labels=axis_labels(result, info.rows, R),
        col_labels=axis_labels(result, info.cols, C),
        row_blocks=block_edges(R, r_shown) if r_shown != R else None,
        col_blocks=block_edges(C, c_shown) if c_shown != C else None,
        symbol=info.symbol,
        head=head if info.per_head else None,
        masked_reason="masked: this key comes after the query (causal)",
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

""""All maps": every map of the canvas in data-flow columns scaled to fill the viewport, alpha the
largest (pure Python, no Qt; ``present.layout.lay_out`` without a focus comes here)."""

from __future__ import annotations

import functools
import math
from dataclasses import replace

from ..engine import FIELDS
from .maps import STAGES
from .sizes import (LABEL_CELL, LABELLED_T, MAX_CELL, PAD, READABLE_T, SMALLER, TOKEN_AXES, VALUE_CELL_H, VALUES_T, Box,
                    Layout, MapShape, box_for, label_px_for, largest_cell)

ALL_MAPS_SIDE = 420  # "All maps": a long axis is about this many pixels at scale 1
ALL_MAPS_MIN_SCALE, ALL_MAPS_MAX_SCALE = 0.3, 6.0  # "All maps" scales its cells within these to fill the view
ALL_MAPS_MIN_CELL = 10  # "All maps": the least cell of a token axis up to READABLE_T (labels at 7 px)
ALPHA_SHARE = 1.7  # "All maps": alpha's cells are this much larger than the others' at one scale
ALPHA_OVER = 3.0  # "All maps": alpha's cells at most this many times the others' (their labels readable)
ALPHA_WIDTH_SHARE = 0.5  # "All maps": alpha grows as tall as the view, up to this share of its width


def lay_out_all(maps: list[MapShape], top: float, width: float, height: float, boxes: dict[str, Box]) -> Layout:
    """Every map, a column per stage of the data flow, alpha in a column of its own, scaled to fill the viewport.

    Alpha is sized first: as tall as the viewport allows (within ``ALPHA_WIDTH_SHARE`` of its width), its cells
    no larger than focused (``MAX_CELL``) nor ``ALPHA_OVER`` times the others' beside it, smaller only where the
    other columns would not fit beside it even at the least scale. Each other column's cells
    grow by the largest factor with which it fits the height, and every column by one more factor until together
    they fill the width beside alpha; no map grows larger than alpha (its box's area). A column that does not fit
    even at the least scale scrolls. The factors are found by bisection on pure arithmetic: no map is drawn
    until the last.
    """
    stages = [[m for m in maps if m.field in names] for _, names, _ in STAGES]
    alpha = next((m for m in maps if m.field == "weights"), None)
    if alpha is None:  # nothing to make the largest: every column at one scale
        columns = [c for c in stages if c]
        tall = [_bisect(lambda s, c=c: _column(c, 0.0, top, s, {})[1] <= height) for c in columns]
        scale = _bisect(lambda s: _columns(columns, top, [min(s, t) for t in tall], {})[0] <= width)
        right, bottom = _columns(columns, top, [min(scale, t) for t in tall], boxes)
        return Layout(boxes, max(width, right), max(height, bottom))
    rest = [[m for m in c if m.field != "weights"] for c in stages]
    columns = [c for c in [*rest[:3], [alpha], *rest[3:]] if c]
    at = columns.index([alpha])
    others = [c for i, c in enumerate(columns) if i != at]
    tall = [_bisect(lambda s, c=c: _column(c, 0.0, top, s, {})[1] <= height) for c in others]

    def alpha_box(scale: float) -> Box:
        placed: dict[str, Box] = {}
        _column([alpha], 0.0, top, scale, placed)
        return placed[alpha.id]

    def beside(a: float) -> float:
        """The scale with which the other columns fill the width beside alpha at ``a``."""
        room = width - alpha_box(a).w - PAD
        return _bisect(lambda s: _columns(others, top, [min(s, t) for t in tall], {})[0] <= room)

    def scales(a: float) -> list[float]:
        """Each column's scale beside alpha at ``a``: the others fill the width left, none larger than alpha."""
        box, s = alpha_box(a), beside(a)
        out = []
        for c, t in zip(others, tall, strict=True):
            smaller = lambda x, c=c: all(b.w * b.h <= SMALLER * box.w * box.h  # noqa: E731
                                         for b in _placed(c, top, x).values())
            out.append(min(s, t) if smaller(min(s, t)) else _bisect(smaller, hi=min(s, t)))
        out.insert(at, a)
        return out

    def fits(a: float) -> bool:  # a pixel or two to spare: the view rounds each box to whole pixels
        box = alpha_box(a)
        return box.bottom <= height - 2 and box.w <= ALPHA_WIDTH_SHARE * width

    def comfortable(x: float) -> bool:  # alpha's cells hold its values (up to VALUES_T tokens), else its labels
        box = alpha_box(x)
        return min(box.cell_w, box.cell_h) < _alpha_floor(alpha)

    least = min(ALL_MAPS_MAX_SCALE, _bisect(comfortable) * 1.02)
    # as large as the focused alpha at most (``MAX_CELL``), its cells at most ``ALPHA_OVER`` times the others' (as
    # they are beside it: where it shrinks they grow), the width beyond to the other maps' labels
    a = min(_bisect(fits), _bisect(lambda x: max(alpha_box(x).cell_w, alpha_box(x).cell_h) <= MAX_CELL))
    a = max(least, _bisect(lambda x: x <= ALPHA_OVER / ALPHA_SHARE * min(beside(x), *tall), hi=a, steps=6))
    wide = lambda x: _columns(columns, top, scales(x), {})[0] > width - 2  # noqa: E731
    if wide(a):  # alpha gives way to spare the others a scroll, down to a comfortable size
        a = least if wide(least) else max(least, _bisect(lambda x: fits(x) and not wide(x), hi=a))
    right, bottom = _columns(columns, top, scales(a), boxes)
    return Layout(boxes, max(width, right), max(height, bottom))


def _alpha_floor(m: MapShape) -> float:
    """The least cell of alpha before the other maps scroll: wide enough for a value (up to ``VALUES_T`` tokens),
    else tall enough for its labels at ``MIN_LABEL_PX`` (up to ``LABELLED_T``)."""
    n = max(m.rows, m.cols)
    if n <= VALUES_T:
        return VALUE_CELL_H
    if n <= READABLE_T:  # larger than the others' least (ALL_MAPS_MIN_CELL): alpha stays the largest map
        return ALL_MAPS_MIN_CELL * 1.25
    return LABEL_CELL if n <= LABELLED_T else 1.0


def _placed(column: list[MapShape], top: float, scale: float) -> dict[str, Box]:
    placed: dict[str, Box] = {}
    _column(column, 0.0, top, scale, placed)
    return placed


def _bisect(fits, hi: float = ALL_MAPS_MAX_SCALE, steps: int = 10) -> float:
    """The largest scale in [``ALL_MAPS_MIN_SCALE``, ``hi``] that ``fits`` (the least if none), to within
    ``2 ** -steps`` of the range."""
    lo = ALL_MAPS_MIN_SCALE
    if fits(hi):
        return hi
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _columns(columns: list[list[MapShape]], top: float, scales: list[float],
             boxes: dict[str, Box]) -> tuple[float, float]:
    """Lay ``columns`` out side by side, each at its scale; returns their right edge and bottom."""
    x, bottom = 0.0, top
    for column, scale in zip(columns, scales, strict=True):
        w, y = _column(column, x, top, scale, boxes)
        bottom = max(bottom, y)
        x += w + PAD
    return x, bottom


def _column(column: list[MapShape], x: float, top: float, scale: float, boxes: dict[str, Box]) -> tuple[float, float]:
    """Stack ``column``'s maps from (``x``, ``top``), every cell ``scale`` times its size at scale 1
    (``_cell``); returns the column's width and bottom."""
    col_w, bottom, placed = _stack(tuple(column), top, scale)
    for m, box in zip(column, placed, strict=True):
        boxes[m.id] = replace(box, x=x) if x else box
    return col_w, bottom


@functools.lru_cache(maxsize=4096)  # the bisections of "All maps" lay the same column out at the same scale again
def _stack(column: tuple[MapShape, ...], top: float, scale: float) -> tuple[float, float, tuple[Box, ...]]:
    y, col_w, placed = top, 0.0, []
    for m in column:
        share = ALPHA_SHARE if m.field == "weights" else 1.0
        largest = largest_cell(m) * share
        info = FIELDS.get(m.field)
        floor_c = _floor(m.cols, info is not None and info.cols in TOKEN_AXES)
        floor_r = _floor(m.rows, info is not None and info.rows in TOKEN_AXES)
        cw = _cell(m.cols, scale * share, largest, floor_c)
        ch = _cell(m.rows, scale * share, largest, floor_r)
        if max(m.rows, m.cols) <= 4 * min(m.rows, m.cols):  # square cells unless one axis is long; a token
            cw, ch = max(min(cw, ch), floor_c), max(min(cw, ch), floor_r)  # axis keeps its labels' least cell
        box = box_for(m, 0.0, y, cw, ch, label_px_for(min(cw, ch) if m.cols <= LABELLED_T else ch))
        placed.append(box)
        y = box.bottom + PAD
        col_w = max(col_w, box.w)
    return col_w, y, tuple(placed)


def _floor(n: int, tokens: bool) -> float:
    """The least cell along an axis of ``n`` in "All maps": ``ALL_MAPS_MIN_CELL`` for tokens up
    to ``READABLE_T`` (each labelled), else a quarter pixel (a d axis of 384 in 96 px: its numbers are
    thinned, as a map larger than alpha would not be)."""
    return ALL_MAPS_MIN_CELL if tokens and n <= READABLE_T else 0.25


def _cell(n: int, scale: float, largest: float, floor: float) -> float:
    """A cell's size along an axis of ``n`` in "All maps" at ``scale``: at 1, 16 px while short and
    about ``ALL_MAPS_SIDE`` in all when long; never below ``floor``."""
    base = min(16.0, ALL_MAPS_SIDE / n) if n <= READABLE_T else ALL_MAPS_SIDE / n
    return max(floor, min(largest, math.floor(base * scale * 4) / 4))

"""Where each map goes on the one canvas, by importance (pure Python, no Qt).

The focused map (alpha by default) gets the space first: cells large enough for its
full token labels (up to ``LABELLED_T`` tokens) and for printed values (up to
``VALUES_T``). Its data-flow neighbours come next, at a readable size or as thumbnails;
every other map is a labelled thumbnail below the fold (symbol, shape, miniature; a
click focuses it). Without a focus ("All maps") every map is laid out in data-flow
columns scaled to fill the viewport, alpha the largest; the canvas scrolls only where even
the readable minimum does not fit (``present.all_maps``). The window and the exported
figure both use ``lay_out``, so a picture shows what the window shows.

A map's shape, its box and the arithmetic of its cells and margins are ``present.sizes``'s.
Sizes are in pixels; (x, y) is the top-left corner in canvas coordinates.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..engine import FIELDS
from .all_maps import lay_out_all
from .maps import STAGES, neighbours
from .sizes import (BRACKET_H, EVERY_LABEL_T, LABEL_CELL, LABELLED_T, MAX_CELL, PAD, READABLE_CELL, READABLE_T,
                    SIDE_MIN, SMALLER, SMUDGE_SIDE, STRIP_BAR_W, STRIP_H, THUMB_H, THUMB_W, TOKEN_AXES, VALUE_CELL,
                    VALUE_CELL_H, VALUES_T, FOCUS_TITLE_W, Box, Layout, MapShape, box_for, fit_cells, label_px_for,
                    largest_cell, square_cells)


NEIGHBOUR_CELL = 28.0  # a neighbour's largest cell (times the view's room to grow)
NEIGHBOUR_VALUE_W = 28.0  # a neighbour's cell that holds its values ("-1.6" at 8.5 pt and 4 px)
MIN_GROW, MAX_GROW = 1.05, 2.0  # a view with room for cells this much larger lays them out so (``lay_out``)


def flow_order(maps: list[MapShape]) -> list[MapShape]:
    """``maps`` in data-flow order (``STAGES``), each field's heads together."""
    rank = {f: i for i, f in enumerate(f for _, names, _ in STAGES for f in names)}
    return sorted(maps, key=lambda m: rank.get(m.field, len(rank)))


def _strip(heads: int, groups: list[list[int]] | None, width: float, boxes: dict[str, Box]) -> float:
    """Lay the heads strip out along the top; returns its height (0 without one)."""
    if heads <= 1:
        return 0.0
    grouped = groups is not None and len(groups) < heads
    top = BRACKET_H if grouped else 0.0
    w = max(40.0, min(THUMB_W, (width - STRIP_BAR_W - PAD * (heads + 1)) / heads))
    for i in range(heads):
        boxes[f"strip:{i}"] = Box(PAD + i * (w + PAD), top, w, STRIP_H - top - PAD, thumb=True)
    if groups is not None and grouped:
        for g, members in enumerate(groups):
            first, last = boxes[f"strip:{members[0]}"], boxes[f"strip:{members[-1]}"]
            boxes[f"group:{g}"] = Box(first.x, 0.0, last.right - first.x, BRACKET_H - 1)
    boxes["strip:bar"] = Box(PAD + heads * (w + PAD), top, STRIP_BAR_W, STRIP_H - top - PAD)
    return STRIP_H


def _thumbs(maps: list[MapShape], y: float, width: float, boxes: dict[str, Box]) -> float:
    """Lay ``maps`` out as thumbnails in rows from ``y``; returns the bottom."""
    per_row = max(1, int((width - PAD) // (THUMB_W + PAD)))
    bottom = y
    for i, m in enumerate(maps):
        r, c = divmod(i, per_row)
        box = Box(PAD + c * (THUMB_W + PAD), y + r * (THUMB_H + PAD), THUMB_W, THUMB_H, thumb=True)
        boxes[m.id] = box
        bottom = box.bottom
    return bottom


def lay_out(maps: list[MapShape], focus: str | None, width: float, height: float, heads: int = 1,
            groups: list[list[int]] | None = None) -> Layout:
    """Place ``maps`` in a ``width`` x ``height`` viewport, ``focus`` (a field; None: all maps) first.

    Parameters
    ----------
    maps : list of MapShape
        Every map the canvas shows (per-head fields: the selected head's only).
    focus : str or None
        The field shown large; None lays every map out in data-flow order (scrolling).
    width, height : float
        The viewport in pixels.
    heads : int
        Heads of the result: with more than one, a strip of each head's alpha goes on top.
    groups : list of list of int, optional
        Query heads sharing a key/value head (grouped-query attention): a bracket above each.

    Returns
    -------
    Layout
        A box per map id; the focused map's lies inside the viewport.
    """
    boxes: dict[str, Box] = {}
    top = _strip(heads, groups, width, boxes)
    present = tuple(m.field for m in flow_order(maps))
    main_field = focus if focus in present else "weights"  # every other map shows its brief title
    maps = [m if m.field == main_field else replace(m, title_words=m.brief_words) for m in maps]
    if focus is None or focus not in present:
        return lay_out_all(flow_order(maps), top, width, height, boxes)
    layout = _focused(maps, focus, present, top, width, height, dict(boxes), 1.0)
    grow = _room_to_grow(layout, present, top, width, height)
    for g in (grow, 1 + (grow - 1) / 2) if grow > MIN_GROW else ():  # a large view: the maps grow to fill it
        larger = _focused(maps, focus, present, top, width, height, dict(boxes), g)
        if larger.width <= width + 0.5 and larger.height <= height + 0.5:
            return larger
    return layout


def _room_to_grow(layout: Layout, present: tuple[str, ...], top: float, width: float, height: float) -> float:
    """By how much the cells of the focused map and its neighbours may grow (at most ``MAX_GROW``) for them and
    the thumbnails below to fill the viewport: 1 where they fill it already or scroll. The margins do not grow
    with the cells, so cells this much larger lay out within the viewport, labels of the same size aside."""
    shown = [b for mid, b in layout.boxes.items() if not b.thumb and not mid.startswith(("strip:", "group:"))]
    if not shown or layout.height > height + 0.5:
        return 1.0
    right, bottom = max(b.right for b in shown), max(b.bottom for b in shown)
    below = max(b.bottom for b in layout.boxes.values()) + PAD - bottom  # the thumbnails' rows and their pad
    return max(1.0, min(MAX_GROW, (width - PAD) / right, (height - top - below) / max(1.0, bottom - top)))


def _focused(maps: list[MapShape], focus: str, present: tuple[str, ...], top: float, width: float, height: float,
             boxes: dict[str, Box], grow: float) -> Layout:
    """``focus``'s map large, its neighbours beside it, every other map a thumbnail below; each cell at most
    ``grow`` times its usual largest (``lay_out``)."""
    by_field = {m.field: m for m in maps}
    before, after = neighbours(focus, present, 2)
    main = by_field[focus]
    side_w = SIDE_MIN * (bool(before) + bool(after))
    room_h = height - top - PAD
    cw, ch, px = fit_cells(main, width - side_w - 2 * PAD, room_h, largest_cell(main) * grow, square_cells(main))
    if max(main.rows, main.cols) <= VALUES_T and min(cw, ch) < VALUE_CELL:  # too low for square cells
        wide = fit_cells(main, width - side_w - 2 * PAD, room_h, largest_cell(main), False)  # with values:
        narrow = max(VALUE_CELL, wide[1])  # its title wraps over these cells, perhaps in one line more than over wide's
        tall = min(wide[1], (room_h - box_for(main, 0.0, 0.0, narrow, 0.0, wide[2]).h) / main.rows)
        if wide[0] >= VALUE_CELL and tall >= VALUE_CELL_H:  # cells as wide as a value, as tall as fits
            cw, ch, px = narrow, tall, wide[2]
    cw, ch, px = _readable(main, cw, ch, px)  # a short view scrolls rather than make the main map a smudge
    focus_box = box_for(main, 0.0, top, cw, ch, px)
    # the neighbours share what is left beside it; the focused map stays in the middle
    left_w = (width - focus_box.w - 2 * PAD) / 2 if before and after else 0.0
    if before and not after:
        left_w = width - focus_box.w - PAD
    x0 = left_w + PAD if before else 0.0
    boxes[main.id] = Box(x0, top, focus_box.w, focus_box.h, cw, ch, px)
    right_x = boxes[main.id].right + PAD
    shown = {main.id}
    for names, x, w, side in ((before, 0.0, left_w, "left"), (after, right_x, width - right_x, "right")):
        y = top
        share = room_h / max(1, len(names))
        for name in names:
            m = by_field[name]
            box = _neighbour(m, x, y, w, share - PAD, SMALLER * focus_box.w * focus_box.h, NEIGHBOUR_CELL * grow)
            if side == "left":  # next to the focused map, not at the canvas's edge
                box = Box(x0 - PAD - box.w, box.y, box.w, box.h, box.cell_w, box.cell_h, box.label_px, box.thumb)
            boxes[m.id] = box
            shown.add(m.id)
            y = box.bottom + PAD
    shift = min(b.x for mid, b in boxes.items() if mid in shown)  # what the left column left unused
    for mid in shown:
        b = boxes[mid]
        boxes[mid] = Box(b.x - shift, b.y, b.w, b.h, b.cell_w, b.cell_h, b.label_px, b.thumb)
    rest = [m for m in flow_order(maps) if m.id not in shown]
    bottom = max(b.bottom for b in boxes.values())
    bottom = _thumbs(rest, bottom + PAD, width, boxes) if rest else bottom  # below the fold where it must
    return Layout(boxes, max(width, max(b.right for b in boxes.values())), max(height, bottom + PAD))


def _readable(m: MapShape, cw: float, ch: float, px: int) -> tuple[float, float, int]:
    """The focused map's cells (``cw``, ``ch``) and label size ``px`` raised where a short or narrow view made them
    smaller than its labels need (a token axis up to ``LABELLED_T``), and its cells at least as wide in all as
    ``FOCUS_TITLE_W``, so that its title does not wrap a word a line."""
    info = FIELDS.get(m.field)
    for n, axis in ((m.rows, "rows"), (m.cols, "cols")):
        if info is None or getattr(info, axis) not in TOKEN_AXES:
            continue
        least = LABEL_CELL if n <= EVERY_LABEL_T else SMUDGE_SIDE / n  # past it every k-th label
        if axis == "rows" and ch < least:
            ch, px = least, min(px, label_px_for(least))
        if axis == "cols" and cw < least:
            cw, px = least, min(px, label_px_for(least))
    return max(cw, min(MAX_CELL, FOCUS_TITLE_W / m.cols)), ch, px


def _neighbour(m: MapShape, x: float, y: float, w: float, h: float, most: float = math.inf,
               largest: float = 28.0) -> Box:
    """A neighbour of the focused map: readable in ``w`` x ``h``, cells up to ``largest``, and no larger than
    ``most`` (the focused map's area), else a thumbnail. Where square cells would be too narrow for its values
    (up to ``VALUES_T`` a side) and cells wider than tall hold them, it gets those."""
    cw, ch, px = fit_cells(m, w, h, largest, square_cells(m))
    if max(m.rows, m.cols) <= VALUES_T and cw < NEIGHBOUR_VALUE_W:
        wide = fit_cells(m, w, h, largest, False)
        if wide[0] >= NEIGHBOUR_VALUE_W and wide[1] >= VALUE_CELL_H:
            cw, ch, px = NEIGHBOUR_VALUE_W, min(wide[1], NEIGHBOUR_VALUE_W), wide[2]
    area = box_for(m, x, y, cw, ch, px).w * box_for(m, x, y, cw, ch, px).h
    if area > most:  # smaller, by the ratio of the areas (twice: the margins do not shrink with the cells)
        for _ in range(2):
            shrink = math.sqrt(most / area) * 0.97
            cw, ch, px = fit_cells(m, w * shrink, h * shrink, largest, square_cells(m))
            box = box_for(m, x, y, cw, ch, px)
            area = box.w * box.h
            if area <= most:
                break
        if area > most:
            return Box(x, y, min(w, THUMB_W), THUMB_H, thumb=True)
    token_cell = ch if m.cols > LABELLED_T else min(cw, ch)  # a long d axis may be narrow; token rows may not
    if token_cell < READABLE_CELL and min(m.rows, m.cols) <= READABLE_T or min(cw, ch) < 2:
        return Box(x, y, min(w, THUMB_W), THUMB_H, thumb=True)
    return box_for(m, x, y, cw, ch, px)

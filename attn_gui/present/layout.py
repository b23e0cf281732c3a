"""Where each map goes on the one canvas, by importance (pure Python, no Qt).

The focused map (alpha by default) gets the space first: cells large enough for its
full token labels (up to ``LABELLED_T`` tokens) and for printed values (up to
``VALUES_T``). Its data-flow neighbours come next, at a readable size or as thumbnails;
every other map is a labelled thumbnail below the fold (symbol, shape, miniature; a
click focuses it). Without a focus ("All maps") every map is laid out in data-flow
columns scaled to fill the viewport, alpha the largest; the canvas scrolls only where even
the readable minimum does not fit. The window and the exported
figure both use ``lay_out``, so a picture shows what the window shows.

Sizes are in pixels; (x, y) is the top-left corner in canvas coordinates.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace

from ..engine import FIELDS
from .frame import Frame
from .maps import STAGES, MapData, map_data, map_id, neighbours, not_captured_data, tick_label

TITLE_H = 34  # a title of up to two lines at 9 pt
TITLE_LINE = 16  # a title line's height at 9 pt
TITLE_ONE = 24  # a title of one line, with the text item's margins
TITLE_CHAR_W = 7.0  # a title character's width at 9 pt (with some slack)
TITLE_BAR_W = 75  # the colour bar's width that the title leaves (render.heatmap)
BAR_W = 62  # the colour bar and its tick labels
PAD = 6  # between boxes
CHAR_W = 0.62  # a label character's width, per pixel of font size
LABEL_PX = 11  # the label font's pixel size when there is room
MIN_LABEL_PX = 7  # smaller labels are thinned (every k-th) instead
LABEL_CELL = 10.2  # the least cell of a map that names every token: a 7 px label's line (8.1 px) and 1 px, and
# the 2 to 10 px by which a map's margins drawn (title, column labels) exceed those laid out here, shared by its rows
LINE = 1.3  # a text line's height per pixel of font size
LABELLED_T = 64  # up to this many rows, every row of the focused map carries its label
VALUES_T = 16  # up to this many rows and columns, values are written in its cells
VALUE_CELL = 24  # a cell that holds a printed value ("0.64") at 8.5 pt
VALUE_CELL_H = 15  # the least cell height for a value: a line at 8.5 pt is 12.8 px, and 1 (render.cells)
MAX_CELL = 48
READABLE_CELL = 12  # neighbours and "All maps": at least this, for T <= READABLE_T
READABLE_T = 32
THUMB_W, THUMB_H = 104, 92  # a thumbnail: title line and miniature
STRIP_H = 80  # the heads strip (alpha of each head)
BRACKET_H = 16  # "K/V g: heads a-b" above grouped heads
STRIP_BAR_W = 48  # the strip's shared 0-1 colour bar
ALL_MAPS_SIDE = 420  # "All maps": a long axis is about this many pixels at scale 1
ALL_MAPS_MIN_SCALE, ALL_MAPS_MAX_SCALE = 0.3, 6.0  # "All maps" scales its cells within these to fill the view
ALL_MAPS_MIN_CELL = 10  # "All maps": the least cell of a token axis up to READABLE_T (labels at 7 px)
TOKEN_AXES = ("token", "key", "source")  # FieldInfo.rows / cols that run over tokens
ALPHA_SHARE = 1.7  # "All maps": alpha's cells are this much larger than the others' at one scale
SMALLER = 0.95  # "All maps": every other map's area is at most this share of alpha's
ALPHA_WIDTH_SHARE = 0.5  # "All maps": alpha grows as tall as the view, up to this share of its width
SIDE_MIN = 190  # a column of neighbours beside the focused map
EVERY_LABEL_T = 48  # up to this many tokens, the focused map keeps every label however short the view (it scrolls)
SMUDGE_SIDE = 200  # longer: its cells span at least this, labels thinned
FOCUS_TITLE_W = 120  # the focused map's cells span at least this: its title wraps in a few lines, not a word each
MAX_CHARS = 14  # longer labels end in an ellipsis (render.axes cuts them there)


@dataclass(frozen=True)
class MapShape:
    """A map to place: its id (``present.maps.map_id``), field, displayed shape, longest labels."""

    id: str
    field: str
    rows: int
    cols: int
    row_chars: int = 6
    col_chars: int = 6
    title_words: tuple[tuple[int, ...], ...] = ()  # characters of each word of each line of its title
    brief_words: tuple[tuple[int, ...], ...] = ()  # the same of its brief title (beside the main map)


@dataclass(frozen=True)
class Box:
    """Where one item goes.

    Attributes
    ----------
    x, y, w, h : float
        The item's rectangle on the canvas.
    cell_w, cell_h : float
        A cell's size in pixels (0 for thumbnails and the strip's parts).
    label_px : int
        The pixel size of its row and column labels (0: no labels).
    thumb : bool
        Drawn as a labelled thumbnail: title, miniature, no axes or colour bar.
    """

    x: float
    y: float
    w: float
    h: float
    cell_w: float = 0.0
    cell_h: float = 0.0
    label_px: int = 0
    thumb: bool = False

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    def overlaps(self, other: Box) -> bool:
        return self.x < other.right and other.x < self.right and self.y < other.bottom and other.y < self.bottom

    def inside(self, width: float, height: float) -> bool:
        return self.x >= 0 and self.y >= 0 and self.right <= width + 0.5 and self.bottom <= height + 0.5


@dataclass(frozen=True)
class Layout:
    """Every item's box (maps by map id; ``strip:<i>``, ``group:<g>`` and ``strip:bar`` for the
    heads strip) and the canvas's full size (larger than the viewport where it scrolls)."""

    boxes: dict[str, Box]
    width: float
    height: float


def shape_of(map_id: str, data: MapData) -> MapShape:
    """The MapShape of a map showing ``data`` (longest labels cut as the axes cut them)."""
    R, C = data.matrix.shape
    row = max((len(tick_label(data.row_labels, data.row_blocks, i)) for i in range(R)), default=1)
    col = max((len(tick_label(data.col_labels, data.col_blocks, j)) for j in range(C)), default=1)
    return MapShape(map_id, data.field, R, C, min(row, MAX_CHARS), min(col, MAX_CHARS), _words(data.title),
                    _words(data.brief_title or data.title))


def _words(title: str) -> tuple[tuple[int, ...], ...]:
    """The characters of each word of each line of ``title`` (rich text: tags left out)."""
    return tuple(tuple(len(w) for w in re.sub(r"<[^>]+>", "", line).split(" ") if w) for line in title.split("<br>"))


def _title_lines(words: tuple[tuple[int, ...], ...], width: float) -> int:
    """How many lines a title of ``words`` takes, wrapped between words within ``width`` pixels."""
    lines = 0
    for line in words:
        lines, used = lines + 1, 0.0
        for n in line:
            need = n * TITLE_CHAR_W + (TITLE_CHAR_W / 2 if used else 0.0)
            if used and used + need > width:
                lines, used = lines + 1, n * TITLE_CHAR_W
            else:
                used += need
    return lines


def label_px_for(cell: float) -> int:
    """The label font's pixel size for cells ``cell`` pixels apart: a line fits in a cell."""
    return max(MIN_LABEL_PX, min(LABEL_PX, int(cell / LINE)))


def _margins(m: MapShape, cell_w: float, px: int) -> tuple[float, float]:
    """(left + right, top + bottom) around the cells of ``m``: labels, title, colour bar.

    The title wraps within the cells' width (``render.heatmap``): a long one over narrow cells
    takes more than ``TITLE_H``."""
    left = m.row_chars * CHAR_W * px + 8
    side_by_side = m.col_chars * CHAR_W * px + 6 <= cell_w
    top = (LINE * px if side_by_side else m.col_chars * CHAR_W * px) + 8
    lines = _title_lines(m.title_words, max(50.0, m.cols * cell_w - (TITLE_BAR_W - BAR_W)))
    return left + BAR_W, (TITLE_ONE if lines == 1 else max(TITLE_H, lines * TITLE_LINE + 4)) + top


def _fit(m: MapShape, width: float, height: float, largest: float, square: bool) -> tuple[float, float, int]:
    """The largest cells (w, h) up to ``largest`` with which ``m`` fits ``width`` x ``height``,
    and the label size that goes with them. Margins depend on the label size: two passes."""
    px, cw = LABEL_PX, largest
    for _ in range(3):
        extra_w, extra_h = _margins(m, cw, px)
        cw = min(largest, max(0.5, (width - extra_w) / m.cols))
        ch = min(largest, max(0.5, (height - extra_h) / m.rows))
        if square:
            cw = ch = min(cw, ch)
        px = label_px_for(min(ch, cw if m.cols <= LABELLED_T else ch))
    return cw, ch, px


def _box(m: MapShape, x: float, y: float, cw: float, ch: float, px: int) -> Box:
    extra_w, extra_h = _margins(m, cw, px)
    return Box(x, y, extra_w + m.cols * cw, extra_h + m.rows * ch, cw, ch, px)


def _square(m: MapShape) -> bool:
    """Square cells unless one axis is long (a d_model axis beside a short token axis)."""
    return max(m.rows, m.cols) <= 4 * min(m.rows, m.cols) or max(m.rows, m.cols) <= LABELLED_T


def _largest(m: MapShape) -> float:
    return MAX_CELL if max(m.rows, m.cols) <= VALUES_T else 28.0


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
        return _all_maps(flow_order(maps), top, width, height, boxes)
    by_field = {m.field: m for m in maps}
    before, after = neighbours(focus, present, 2)
    main = by_field[focus]
    side_w = SIDE_MIN * (bool(before) + bool(after))
    room_h = height - top - PAD
    cw, ch, px = _fit(main, width - side_w - 2 * PAD, room_h, _largest(main), _square(main))
    if max(main.rows, main.cols) <= VALUES_T and min(cw, ch) < VALUE_CELL:  # too low for square cells
        wide = _fit(main, width - side_w - 2 * PAD, room_h, _largest(main), False)  # with values:
        if wide[0] >= VALUE_CELL and wide[1] >= VALUE_CELL_H:  # cells as wide as a value, as tall as fits
            cw, ch, px = max(VALUE_CELL, wide[1]), wide[1], wide[2]
    cw, ch, px = _readable(main, cw, ch, px)  # a short view scrolls rather than make the main map a smudge
    focus_box = _box(main, 0.0, top, cw, ch, px)
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
            box = _neighbour(m, x, y, w, share - PAD, SMALLER * focus_box.w * focus_box.h)
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
    return Layout(boxes, width, max(height, bottom + PAD))


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


def _neighbour(m: MapShape, x: float, y: float, w: float, h: float, most: float = math.inf) -> Box:
    """A neighbour of the focused map: readable in ``w`` x ``h`` and no larger than ``most`` (the focused map's
    area), else a thumbnail."""
    cw, ch, px = _fit(m, w, h, 28.0, _square(m))
    area = _box(m, x, y, cw, ch, px).w * _box(m, x, y, cw, ch, px).h
    if area > most:  # smaller, by the ratio of the areas (twice: the margins do not shrink with the cells)
        for _ in range(2):
            shrink = math.sqrt(most / area) * 0.97
            cw, ch, px = _fit(m, w * shrink, h * shrink, 28.0, _square(m))
            box = _box(m, x, y, cw, ch, px)
            area = box.w * box.h
            if area <= most:
                break
        if area > most:
            return Box(x, y, min(w, THUMB_W), THUMB_H, thumb=True)
    token_cell = ch if m.cols > LABELLED_T else min(cw, ch)  # a long d axis may be narrow; token rows may not
    if token_cell < READABLE_CELL and min(m.rows, m.cols) <= READABLE_T or min(cw, ch) < 2:
        return Box(x, y, min(w, THUMB_W), THUMB_H, thumb=True)
    return _box(m, x, y, cw, ch, px)


def _all_maps(maps: list[MapShape], top: float, width: float, height: float, boxes: dict[str, Box]) -> Layout:
    """Every map, a column per stage of the data flow, alpha in a column of its own, scaled to fill the viewport.

    Alpha is sized first: as tall as the viewport allows (within ``ALPHA_WIDTH_SHARE`` of its width), smaller
    only where the other columns would not fit beside it even at the least scale. Each other column's cells
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

    def scales(a: float) -> list[float]:
        """Each column's scale beside alpha at ``a``: the others fill the width left, none larger than alpha."""
        box = alpha_box(a)
        room = width - box.w - PAD
        s = _bisect(lambda s: _columns(others, top, [min(s, t) for t in tall], {})[0] <= room)
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
    a = max(_bisect(fits), least)
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


def _bisect(fits, hi: float = ALL_MAPS_MAX_SCALE) -> float:
    """The largest scale in [``ALL_MAPS_MIN_SCALE``, ``hi``] that ``fits`` (the least if none)."""
    lo = ALL_MAPS_MIN_SCALE
    if fits(hi):
        return hi
    for _ in range(10):
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
        largest = _largest(m) * share
        info = FIELDS.get(m.field)
        floor_c = _floor(m.cols, info is not None and info.cols in TOKEN_AXES)
        floor_r = _floor(m.rows, info is not None and info.rows in TOKEN_AXES)
        cw = _cell(m.cols, scale * share, largest, floor_c)
        ch = _cell(m.rows, scale * share, largest, floor_r)
        if max(m.rows, m.cols) <= 4 * min(m.rows, m.cols):  # square cells unless one axis is long; a token
            cw, ch = max(min(cw, ch), floor_c), max(min(cw, ch), floor_r)  # axis keeps its labels' least cell
        box = _box(m, 0.0, y, cw, ch, label_px_for(min(cw, ch) if m.cols <= LABELLED_T else ch))
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


def frame_shapes(frame: Frame, head: int = 0, hidden: tuple[int, ...] = (),
                 scales: dict[str, str] | None = None) -> dict[str, tuple[MapShape, MapData]]:
    """Every map of ``frame`` the canvas shows (per-head fields: head ``head``), by map id,
    with the MapData it draws (each field on its colour scale in ``scales``, default "auto")."""
    out = {}
    for name in frame.result.fields():
        h = head if FIELDS[name].per_head else None
        data = map_data(frame, name, h, hidden, (scales or {}).get(name, "auto"))
        out[map_id(name, h)] = (shape_of(map_id(name, h), data), data)
    for name in frame.result.not_captured:  # a model read through transformers: what its hooks cannot see
        h = head if FIELDS[name].per_head else None
        data = not_captured_data(frame, name, h)
        out[map_id(name, h)] = (shape_of(map_id(name, h), data), data)
    return out

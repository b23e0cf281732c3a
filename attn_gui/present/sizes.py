"""The sizes of the canvas's maps (pure Python, no Qt): what a map to place is, its box, and the
arithmetic of its cells, labels and margins.

``present.layout`` places maps with these (``present.all_maps`` for "All maps"); the canvas
(``render.canvas``) and the exported figure draw each map at its box. Sizes are in pixels;
(x, y) is the top-left corner in canvas coordinates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..engine import FIELDS
from .frame import Frame
from .maps import MapData, map_data, map_id, not_captured_data, tick_label

TITLE_H = 34  # a title of up to two lines at 9 pt
TITLE_LINE = 16  # a title line's height at 9 pt
TITLE_ONE = 24  # a title of one line, with the text item's margins
TITLE_CHAR_W = 7.0  # a title character's width at 9 pt (with some slack)
TITLE_WORD_W = 2.0  # and each word's more: a one-letter symbol is wider (Z, V: 8.2 px; =: 10 px)
TITLE_BAR_W = 75  # the colour bar's width that the title leaves (render.heatmap)
TITLE_MARGIN = 4  # the title's text document's margin on each side (QTextDocument.documentMargin's default)
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
TOKEN_AXES = ("token", "key", "source")  # FieldInfo.rows / cols that run over tokens
SMALLER = 0.95  # "All maps": every other map's area is at most this share of alpha's
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
            need = n * TITLE_CHAR_W + TITLE_WORD_W + (TITLE_CHAR_W / 2 if used else 0.0)
            if used and used + need > width:
                lines, used = lines + 1, n * TITLE_CHAR_W + TITLE_WORD_W
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
    lines = _title_lines(m.title_words, max(50.0, m.cols * cell_w - (TITLE_BAR_W - BAR_W)) - 2 * TITLE_MARGIN)
    return left + BAR_W, (TITLE_ONE if lines == 1 else max(TITLE_H, lines * TITLE_LINE + 4)) + top


def fit_cells(m: MapShape, width: float, height: float, largest: float, square: bool) -> tuple[float, float, int]:
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


def box_for(m: MapShape, x: float, y: float, cw: float, ch: float, px: int) -> Box:
    extra_w, extra_h = _margins(m, cw, px)
    return Box(x, y, extra_w + m.cols * cw, extra_h + m.rows * ch, cw, ch, px)


def square_cells(m: MapShape) -> bool:
    """Square cells unless one axis is long (a d_model axis beside a short token axis)."""
    return max(m.rows, m.cols) <= 4 * min(m.rows, m.cols) or max(m.rows, m.cols) <= LABELLED_T


def largest_cell(m: MapShape) -> float:
    return MAX_CELL if max(m.rows, m.cols) <= VALUES_T else 28.0



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

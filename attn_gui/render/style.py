"""Colours and pyqtgraph's global options, set once for every map."""

from __future__ import annotations

import os

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

pg.setConfigOptions(imageAxisOrder="row-major", background="w", foreground="k", antialias=False)
# Qt's raster engine hands each fill of 96 scanlines and more to a pool of threads and waits for them: a map's
# scaled image, its colour bar. On 2 shared cores the GUI thread waited 1.0-1.5 ms a map for 0.06-0.1 ms of work
# (issue 48). Read when the pool is first made, at the first such paint: set unless the person set it.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")

WEIGHTS_CMAP = "viridis"
SIGNED_CMAP = "CET-D1A"  # blue - white - red, centred on zero
MASK_FILL = QtGui.QColor(225, 225, 225)
MASK_HATCH = QtGui.QColor(120, 120, 120)
HIGHLIGHT = QtGui.QColor(255, 140, 0)
MARK = QtGui.QColor(220, 0, 120)  # a lesson's cells: magenta, apart from the followed row's orange


_STATIC_TEXTS: dict[tuple[str, str], QtGui.QStaticText] = {}  # (font, text) -> the text laid out in it
STATIC_TEXTS_KEPT = 4096  # cell values and labels repeat from frame to frame; past this many, start again


def static_text(text: str, font: QtGui.QFont) -> QtGui.QStaticText:
    """``text`` laid out once in ``font``, for ``QPainter.drawStaticText``: ``drawText`` lays its text out on
    every call, which was most of a map's paint (a cell's value, an axis label). Draw it with the painter's
    font set to ``font``; its top left is where ``drawText`` in a rectangle would put it, ``size()`` its size."""
    key = (font.key(), text)
    laid_out = _STATIC_TEXTS.get(key)
    if laid_out is None:
        if len(_STATIC_TEXTS) >= STATIC_TEXTS_KEPT:
            _STATIC_TEXTS.clear()
        laid_out = QtGui.QStaticText(text)
        laid_out.setTextFormat(QtCore.Qt.TextFormat.PlainText)
        laid_out.prepare(QtGui.QTransform(), font)
        _STATIC_TEXTS[key] = laid_out
    return laid_out


def highlight_rect(colour: QtGui.QColor = HIGHLIGHT) -> QtWidgets.QGraphicsRectItem:
    """The orange outline that marks the followed token's row (or the chosen head); ``colour`` for others."""
    rect = QtWidgets.QGraphicsRectItem()
    pen = QtGui.QPen(colour)
    pen.setWidthF(2.5)
    pen.setCosmetic(True)  # the same width at every zoom
    rect.setPen(pen)
    rect.setZValue(20)
    return rect


def no_pen() -> QtGui.QPen:
    return QtGui.QPen(QtCore.Qt.PenStyle.NoPen)


HATCH_STEP = 7.0  # pixels between the hatching's diagonal lines


class Hatch(pg.GraphicsObject):
    """Diagonal lines over masked cells, drawn as lines in screen pixels.

    Not a pattern brush: Qt's SVG generator writes a pattern in the item's own units,
    which a map's scale blows up into grey blocks in a browser. Lines read the same in
    the window, a PNG and an SVG.
    """

    def __init__(self):
        super().__init__()
        self._rects: list[QtCore.QRectF] = []
        self._path = QtGui.QPainterPath()
        self._pen = QtGui.QPen(MASK_HATCH)
        self._pen.setWidthF(1.0)
        self._pen.setCosmetic(True)

    def setPath(self, path: QtGui.QPainterPath, rects: list[QtCore.QRectF] | None = None) -> None:
        self.prepareGeometryChange()
        self._path, self._rects = path, list(rects or [])
        self.update()

    def path(self) -> QtGui.QPainterPath:
        return self._path

    def boundingRect(self) -> QtCore.QRectF:
        return self._path.boundingRect()

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        if not self._rects:
            return
        t = painter.transform()
        painter.save()
        painter.resetTransform()
        painter.setPen(self._pen)
        lines = []
        for rect in self._rects:
            r = t.mapRect(rect)
            # lines x + y = c rising to the right, every HATCH_STEP pixels, cut to the rectangle
            c = (np.floor((r.left() + r.top()) / HATCH_STEP) + 1) * HATCH_STEP
            while c < r.right() + r.bottom():
                x1, y1 = max(r.left(), c - r.bottom()), min(r.bottom(), c - r.left())
                x2, y2 = min(r.right(), c - r.top()), max(r.top(), c - r.right())
                lines.append(QtCore.QLineF(x1, y1, x2, y2))
                c += HATCH_STEP
        painter.drawLines(lines)
        painter.restore()


def mask_items() -> tuple[QtWidgets.QGraphicsPathItem, Hatch]:
    """The light grey fill and the diagonal hatching drawn over masked cells (z 5 and 6)."""
    fill, hatch = QtWidgets.QGraphicsPathItem(), Hatch()
    fill.setBrush(MASK_FILL)
    fill.setPen(no_pen())
    items: tuple[QtWidgets.QGraphicsItem, ...] = (fill, hatch)
    for i, item in enumerate(items):
        item.setZValue(5 + i)
    return fill, hatch


def mask_rects(mask: np.ndarray, x0: float = -0.5, y0: float = -0.5) -> list[QtCore.QRectF]:
    """One rectangle per run of True cells in each row of ``mask`` (R, C).

    Cell (r, c) spans [x0 + c, x0 + c + 1) x [y0 + r, y0 + r + 1).
    """
    rects: list[QtCore.QRectF] = []
    for r in np.flatnonzero(mask.any(axis=1)):
        edges = np.flatnonzero(np.diff(np.concatenate(([0], mask[r].astype(np.int8), [0]))))
        runs = zip(edges[::2], edges[1::2], strict=True)
        rects.extend(QtCore.QRectF(x0 + start, y0 + r, end - start, 1) for start, end in runs)
    return rects


def set_mask(items, rects: list[QtCore.QRectF]) -> None:
    """Cover ``rects`` with the mask ``items``; hidden when there are none (an empty path is invalid SVG)."""
    path = QtGui.QPainterPath()
    for rect in rects:
        path.addRect(rect)
    fill, hatch = items
    fill.setPath(path)
    hatch.setPath(path, rects)
    for item in items:
        item.setVisible(bool(rects))


class Marks(pg.GraphicsObject):
    """Outlines around chosen cells of a map (a lesson points at them), in screen pixels.

    ``set_cells([(row, col), ...])``: a col of None outlines the whole row.
    """

    def __init__(self):
        super().__init__()
        self._cells: list[tuple[int, int | None]] = []
        self._shape = (0, 0)
        self._pen = QtGui.QPen(QtGui.QColor(230, 0, 120))
        self._pen.setWidthF(3.0)
        self._pen.setCosmetic(True)
        self.setZValue(21)  # above the followed row's outline

    def set_shape(self, rows: int, cols: int) -> None:
        if (rows, cols) != self._shape:
            self.prepareGeometryChange()
            self._shape = (rows, cols)

    def set_cells(self, cells) -> None:
        self._cells = [(int(r), None if c is None else int(c)) for r, c in cells]
        self.update()

    def rects(self) -> list[QtCore.QRectF]:
        """The outlined rectangles, in the map's cell coordinates (cells of the shown shape only)."""
        R, C = self._shape
        return [QtCore.QRectF(-0.5 if c is None else c - 0.5, r - 0.5, C if c is None else 1, 1)
                for r, c in self._cells if 0 <= r < R and (c is None or 0 <= c < C)]

    def boundingRect(self) -> QtCore.QRectF:
        R, C = self._shape
        return QtCore.QRectF(-1, -1, C + 1, R + 1)

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        painter.setPen(self._pen)
        painter.setBrush(QtCore.Qt.BrushStyle.NoBrush)
        for rect in self.rects():
            painter.drawRect(rect)

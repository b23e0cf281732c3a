"""Every cell's value and the grid lines, painted in one pass in screen pixels."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from ..present.formats import CELL_FORMATS, cell_formats
from .style import static_text

MAX_VALUE_CELLS = 900  # beyond this many cells values are never written


class CellValues(pg.GraphicsObject):
    """Paints every cell's value and the grid lines in one pass, in screen pixels.

    Drawing in device coordinates keeps text crisp and unstretched at any zoom;
    when a cell is narrower than its text, no values are drawn at all.
    """

    def __init__(self):
        super().__init__()
        self._matrix = np.zeros((0, 0))
        self._colors: np.ndarray | None = None
        self._texts: dict = {}  # format -> (cell strings, widest in pixels), made once per matrix
        self._formats = CELL_FORMATS
        self.show_values = True
        self.setZValue(10)
        self._font = QtGui.QFont()
        self._font.setPointSizeF(8.5)
        self._metrics = QtGui.QFontMetricsF(self._font)
        self._white, self._dark = QtGui.QColor("white"), QtGui.QColor(20, 20, 20)
        self._grid = QtGui.QPen(QtGui.QColor(255, 255, 255, 160))
        self._grid.setWidthF(1.0)

    def set_data(self, matrix: np.ndarray, colors: np.ndarray | None) -> None:
        if matrix.shape != self._matrix.shape:
            self.prepareGeometryChange()
        self._matrix = matrix
        self._colors = colors  # (R, C) bool: True where the text should be white
        self._texts = {}
        finite = np.abs(matrix[np.isfinite(matrix)]) if matrix.size else matrix
        self._formats = cell_formats(float(finite.max())) if finite.size else CELL_FORMATS  # its scale's digits
        self.update()

    def boundingRect(self) -> QtCore.QRectF:
        R, C = self._matrix.shape if self._matrix.ndim == 2 else (0, 0)
        return QtCore.QRectF(-0.5, -0.5, C, R)

    def _strings(self, fmt):
        if fmt not in self._texts:
            # a cell with no number (a step not captured) stays blank rather than printing NaN
            strings = ["" if v != v else fmt(float(v)) for v in self._matrix.ravel()]
            widest = max((self._metrics.horizontalAdvance(t) for t in set(strings)), default=0.0)
            self._texts[fmt] = (strings, widest)
        return self._texts[fmt]

    def value_format(self, painter_transform: QtGui.QTransform | None = None):
        """The first cell-text format whose widest value fits a cell, or None: values hidden."""
        R, C = self._matrix.shape
        if not self.show_values or R * C == 0 or R * C > MAX_VALUE_CELLS:
            return None
        if painter_transform is None:  # asked outside a paint: as the item's view shows it now
            views = self.scene().views() if self.scene() is not None else []
            if not views:
                return None
            painter_transform = self.deviceTransform(views[0].viewportTransform())
        t = painter_transform
        cell_w = abs(t.m11()) + abs(t.m21())
        cell_h = abs(t.m22()) + abs(t.m12())
        if cell_h < self._metrics.height() + 1:
            return None
        return next((fmt for fmt in self._formats if cell_w >= self._strings(fmt)[1] + 4), None)

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        R, C = self._matrix.shape if self._matrix.ndim == 2 else (0, 0)
        if R * C == 0:
            return
        t = painter.transform()
        painter.save()
        painter.resetTransform()
        cell_w = abs(t.m11()) + abs(t.m21())
        c00 = t.map(QtCore.QPointF(0, 0))  # centre of cell (0, 0); then one step per column and row
        dx, dy = t.map(QtCore.QPointF(1, 0)) - c00, t.map(QtCore.QPointF(0, 1)) - c00
        if cell_w >= 6 and R <= 256 and C <= 256:
            painter.setPen(self._grid)
            for r in range(1, R):
                start = c00 + dy * (r - 0.5) - dx * 0.5
                painter.drawLine(QtCore.QLineF(start, start + dx * C))
            for c in range(1, C):
                start = c00 + dx * (c - 0.5) - dy * 0.5
                painter.drawLine(QtCore.QLineF(start, start + dy * R))
        fmt = self.value_format(t)
        if fmt is not None:
            strings = self._strings(fmt)[0]
            painter.setFont(self._font)
            white = self._colors.ravel() if self._colors is not None else np.zeros(R * C, dtype=bool)
            half_h = self._metrics.height() / 2  # centred in its cell, as drawText centres a line in a rectangle
            for pen, cells in ((self._dark, np.flatnonzero(~white)), (self._white, np.flatnonzero(white))):
                painter.setPen(pen)
                for i in cells.tolist():
                    r, c = divmod(i, C)
                    centre = c00 + dx * c + dy * r
                    text = static_text(strings[i], self._font)
                    painter.drawStaticText(QtCore.QPointF(centre.x() - text.size().width() / 2, centre.y() - half_h),
                                           text)
        painter.restore()


class CellRects(pg.GraphicsObject):
    """The cells of an image as one filled rectangle each, for pictures whose readers smooth images.

    Qt's SVG renderer (and some browsers) blur a scaled image; rectangles stay crisp in
    every reader. Each overlaps its right and lower neighbour by a hair so that no
    seam of background shows between them.
    """

    OVERLAP = 0.02  # of a cell

    def __init__(self, rgba: np.ndarray):
        super().__init__()
        self._rgba = rgba  # (R, C, 4) uint8, the colours the image shows
        self.setZValue(-1)

    def boundingRect(self) -> QtCore.QRectF:
        R, C = self._rgba.shape[:2]
        return QtCore.QRectF(-0.5, -0.5, C, R)

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        R, C = self._rgba.shape[:2]
        size = 1 + self.OVERLAP
        for r in range(R):
            for c in range(C):
                red, green, blue, alpha = (int(v) for v in self._rgba[r, c])
                painter.fillRect(QtCore.QRectF(c - 0.5, r - 0.5, size if c < C - 1 else 1, size if r < R - 1 else 1),
                                 QtGui.QColor(red, green, blue, alpha))

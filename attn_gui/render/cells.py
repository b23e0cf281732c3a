"""Every cell's value and the grid lines, painted in one pass in screen pixels."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from ..present.formats import CELL_FORMATS

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
        self.show_values = True
        self.setZValue(10)
        self._font = QtGui.QFont()
        self._font.setPointSizeF(8.5)

    def set_data(self, matrix: np.ndarray, colors: np.ndarray | None) -> None:
        self.prepareGeometryChange()
        self._matrix = matrix
        self._colors = colors  # (R, C) bool: True where the text should be white
        self.update()

    def boundingRect(self) -> QtCore.QRectF:
        R, C = self._matrix.shape if self._matrix.ndim == 2 else (0, 0)
        return QtCore.QRectF(-0.5, -0.5, C, R)

    def value_format(self, painter_transform: QtGui.QTransform | None = None):
        """The first cell-text format whose widest value fits a cell, or None: values hidden."""
        R, C = self._matrix.shape
        if not self.show_values or R * C == 0 or R * C > MAX_VALUE_CELLS:
            return None
        t = painter_transform if painter_transform is not None else self.deviceTransform()
        if t is None:
            return None
        cell_w = abs(t.m11()) + abs(t.m21())
        cell_h = abs(t.m22()) + abs(t.m12())
        metrics = QtGui.QFontMetricsF(self._font)
        if cell_h < metrics.height() + 1:
            return None
        for fmt in CELL_FORMATS:
            widest = max(metrics.horizontalAdvance(fmt(float(v))) for v in self._matrix.ravel())
            if cell_w >= widest + 4:
                return fmt
        return None

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        R, C = self._matrix.shape if self._matrix.ndim == 2 else (0, 0)
        if R * C == 0:
            return
        t = painter.transform()
        painter.save()
        painter.resetTransform()
        cell_w = abs(t.m11()) + abs(t.m21())
        if cell_w >= 6 and R <= 256 and C <= 256:
            pen = QtGui.QPen(QtGui.QColor(255, 255, 255, 160))
            pen.setWidthF(1.0)
            painter.setPen(pen)
            for r in range(1, R):
                painter.drawLine(t.map(QtCore.QPointF(-0.5, r - 0.5)), t.map(QtCore.QPointF(C - 0.5, r - 0.5)))
            for c in range(1, C):
                painter.drawLine(t.map(QtCore.QPointF(c - 0.5, -0.5)), t.map(QtCore.QPointF(c - 0.5, R - 0.5)))
        fmt = self.value_format(t)
        if fmt is not None:
            painter.setFont(self._font)
            cell_h = abs(t.m22()) + abs(t.m12())
            for r in range(R):
                for c in range(C):
                    centre = t.map(QtCore.QPointF(c, r))
                    white = self._colors is not None and bool(self._colors[r, c])
                    painter.setPen(QtGui.QColor("white") if white else QtGui.QColor(20, 20, 20))
                    rect = QtCore.QRectF(centre.x() - cell_w / 2, centre.y() - cell_h / 2, cell_w, cell_h)
                    painter.drawText(rect, QtCore.Qt.AlignmentFlag.AlignCenter, fmt(float(self._matrix[r, c])))
        painter.restore()

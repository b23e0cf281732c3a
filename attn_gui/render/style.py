"""Colours and pyqtgraph's global options, set once for every map."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

pg.setConfigOptions(imageAxisOrder="row-major", background="w", foreground="k", antialias=False)

WEIGHTS_CMAP = "viridis"
SIGNED_CMAP = "CET-D1A"  # blue - white - red, centred on zero
MASK_FILL = QtGui.QColor(225, 225, 225)
MASK_HATCH = QtGui.QColor(120, 120, 120)
HIGHLIGHT = QtGui.QColor(255, 140, 0)


def highlight_rect() -> QtWidgets.QGraphicsRectItem:
    """The orange outline that marks the followed token's row (or the chosen head)."""
    rect = QtWidgets.QGraphicsRectItem()
    pen = QtGui.QPen(HIGHLIGHT)
    pen.setWidthF(2.5)
    pen.setCosmetic(True)  # the same width at every zoom
    rect.setPen(pen)
    rect.setZValue(20)
    return rect


def no_pen() -> QtGui.QPen:
    return QtGui.QPen(QtCore.Qt.PenStyle.NoPen)


def mask_items() -> tuple[QtWidgets.QGraphicsPathItem, QtWidgets.QGraphicsPathItem]:
    """The light grey fill and the diagonal hatching drawn over masked cells (z 5 and 6)."""
    fill, hatch = QtWidgets.QGraphicsPathItem(), QtWidgets.QGraphicsPathItem()
    fill.setBrush(MASK_FILL)
    hatch.setBrush(QtGui.QBrush(MASK_HATCH, QtCore.Qt.BrushStyle.BDiagPattern))
    for i, item in enumerate((fill, hatch)):
        item.setPen(no_pen())
        item.setZValue(5 + i)
    return fill, hatch


def add_mask_cells(path: QtGui.QPainterPath, mask: np.ndarray, x0: float = -0.5, y0: float = -0.5) -> None:
    """Add one rectangle per run of True cells in each row of ``mask`` (R, C) to ``path``.

    Cell (r, c) spans [x0 + c, x0 + c + 1) x [y0 + r, y0 + r + 1) in the path's coordinates.
    """
    for r in np.flatnonzero(mask.any(axis=1)):
        edges = np.flatnonzero(np.diff(np.concatenate(([0], mask[r].astype(np.int8), [0]))))
        for start, end in zip(edges[::2], edges[1::2]):
            path.addRect(QtCore.QRectF(x0 + start, y0 + r, end - start, 1))


def set_mask_path(items, path: QtGui.QPainterPath) -> None:
    """Give the mask ``items`` ``path``; hidden when empty (an empty path would export as invalid SVG)."""
    for item in items:
        item.setPath(path)
        item.setVisible(not path.isEmpty())

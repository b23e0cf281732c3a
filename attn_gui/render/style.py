"""Colours and pyqtgraph's global options, set once for every map."""

from __future__ import annotations

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

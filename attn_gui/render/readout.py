"""The hover read-out: the small frameless window beside a hovered cell, and where it goes.

``ReadoutHost`` gives a graphics view one (``Canvas`` and ``HeatmapView`` mix it in).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6 import QtCore, QtWidgets

if TYPE_CHECKING:  # a mixin of pyqtgraph's graphics views: type-checked as one
    from pyqtgraph import GraphicsView as _View
else:
    _View = object

GAP_PX = 6  # between a hovered cell and its read-out


class Readout(QtWidgets.QLabel):
    """The hover read-out: a small frameless window that stays until told to hide."""

    def __init__(self, owner: QtWidgets.QWidget):
        super().__init__(owner, QtCore.Qt.WindowType.ToolTip | QtCore.Qt.WindowType.FramelessWindowHint)
        self.setObjectName("hoverReadout")
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_ShowWithoutActivating, True)
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.setStyleSheet("QLabel { background: #fffbe6; color: #111; border: 1px solid #998; padding: 2px 5px; }")
        self.hide()


def readout_position(cell: QtCore.QRect, size: QtCore.QSize, screen: QtCore.QRect) -> QtCore.QPoint:
    """Top-left corner of a read-out of ``size`` beside ``cell`` (both in screen pixels).

    Right of the cell and centred on its row; left of it where the screen ends there;
    above or below the row where neither side has room. Never on the cell itself.
    """
    y = min(max(cell.center().y() - size.height() // 2, screen.top()), screen.bottom() - size.height())
    if cell.right() + GAP_PX + size.width() <= screen.right():
        return QtCore.QPoint(cell.right() + GAP_PX, y)
    if cell.left() - GAP_PX - size.width() >= screen.left():
        return QtCore.QPoint(cell.left() - GAP_PX - size.width(), y)
    x = min(max(cell.left(), screen.left()), screen.right() - size.width())
    above = cell.top() - GAP_PX - size.height()
    return QtCore.QPoint(x, above if above >= screen.top() else cell.bottom() + GAP_PX)


class ReadoutHost(_View):
    """The hover read-out of a graphics view (mixed into ``Canvas`` and ``HeatmapView``): made on
    first use (most maps are never hovered), hidden when the pointer leaves or the view hides."""

    _readout: Readout | None = None

    @property
    def readout(self) -> Readout:
        """The hover read-out (a frameless window beside the hovered cell)."""
        if self._readout is None:
            self._readout = Readout(self)
        return self._readout

    def place_readout(self, text: str, cell: QtCore.QRect) -> None:
        """Show ``text`` beside ``cell`` (viewport pixels), never on it (see ``readout_position``)."""
        self.readout.setText(text)
        self.readout.adjustSize()
        self.readout.move(readout_position(cell.translated(self.viewport().mapToGlobal(QtCore.QPoint(0, 0))),
                                           self.readout.size(), self.screen().availableGeometry()))
        self.readout.show()

    def hide_readout(self) -> None:
        if self._readout is not None:
            self._readout.hide()

    def leaveEvent(self, ev) -> None:
        self.hide_readout()
        super().leaveEvent(ev)

    def hideEvent(self, ev) -> None:
        self.hide_readout()
        super().hideEvent(ev)


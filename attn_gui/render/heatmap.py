"""One heatmap in a widget of its own: a ``MapItem`` with its hover read-out (docks, pictures, exports).

The item (``render.map_item``) draws the matrix, labels, colour bar and values; the read-out is
``render.readout``'s.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from ..present.maps import MapData, full_row
from .map_item import MapItem
from .readout import Readout, ReadoutHost


class HeatmapView(ReadoutHost, pg.GraphicsLayoutWidget):
    """One MapItem in a widget of its own, with the hover read-out (docks, pictures, exports).

    The item's drawing attributes (``data``, ``image``, ``plot``, ``colorbar``, ``values``,
    ``set_data``, ``set_highlight``, ...) are read through the view.

    Signals
    -------
    rowClicked(int)
        A row was clicked; the argument is the index on the full (unreduced) row axis.
    doubleClicked()
        The map was double-clicked.
    """

    rowClicked = QtCore.Signal(int)
    doubleClicked = QtCore.Signal()

    def __init__(self, name: str = "", parent: QtWidgets.QWidget | None = None, compact: bool = False):
        super().__init__(parent=parent)
        self.setObjectName(name)
        self.item = MapItem(name, compact)
        self.ci.layout.setContentsMargins(0, 0, 0, 0)
        self.ci.addItem(self.item)
        self.setMinimumSize(120, 110)
        self._hover: tuple[int, int] | None = None
        self._readout: Readout | None = None  # made on the first hover: most maps are never hovered
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)

    def __getattr__(self, name: str):
        if name == "item":  # not made yet (Qt asks for attributes while constructing)
            raise AttributeError(name)
        return getattr(self.item, name)

    @property
    def axis_titles(self) -> bool:
        return self.item.axis_titles

    @axis_titles.setter
    def axis_titles(self, value: bool) -> None:
        self.item.axis_titles = value

    def set_data(self, data: MapData) -> None:
        """Show ``data`` (see ``MapItem.set_data``); a read-out on screen follows the new value."""
        self.item.set_data(data)
        R, C = data.matrix.shape
        if self._readout is not None and self._readout.isVisible():  # the pointer rests on a cell: new value
            self.show_readout(self._hover if self._hover and self._hover[0] < R and self._hover[1] < C else None)
        self.ci.layout.activate()

    def cell_rect(self, r: int, c: int) -> QtCore.QRect:
        """Display cell (r, c) as a rectangle in the viewport's pixels."""
        return self.mapFromScene(self.item.cell_scene_rect(r, c)).boundingRect()

    def _on_mouse_moved(self, scene_pos) -> None:
        self.show_readout(self.item.cell_at(scene_pos))

    def show_readout(self, cell: tuple[int, int] | None) -> None:
        """Show the read-out of display ``cell`` beside it (None hides it).

        It stays while the pointer is on the cell (a tooltip vanishes after a while) and
        sits beside the cell, never on it: right of it, or left where the screen ends.
        """
        self._hover = cell
        if cell is None or self.item.data is None:
            self.hide_readout()
            return
        self.place_readout(self.item.describe(*cell), self.cell_rect(*cell))

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        if event.double():
            self.doubleClicked.emit()
            return
        cell = self.item.cell_at(event.scenePos())
        if cell is None or self.item.data is None:
            return
        self.rowClicked.emit(full_row(self.item.data, cell[0]))

"""The head-metrics grid: one cell per layer (rows) and head (columns), coloured by one metric."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ..present.maps import MapData
from .heatmap import HeatmapView


class MetricsGrid(HeatmapView):
    """A heatmap of one metric over every head; clicking a cell picks that head.

    Signals
    -------
    headPicked(int, int)
        Row (the layer's index in the grid) and head, both 0-based.
    """

    headPicked = QtCore.Signal(int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__("metricsGrid", parent)
        self.setMinimumSize(200, 110)
        self.scene().sigMouseClicked.connect(self._on_cell_clicked)

    def set_data(self, data: MapData, levels: tuple[float, float] = (0.0, 1.0)) -> None:
        """Show ``data`` on the colour scale ``levels`` (entropy in nats and distances exceed 1)."""
        super().set_data(data)
        if levels != (0.0, 1.0):
            self.image.setLevels(levels)
            self.colorbar.setLevels(levels)
            self._last["levels"] = levels

    def _on_cell_clicked(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            self.headPicked.emit(*cell)

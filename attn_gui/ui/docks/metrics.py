"""The Head metrics dock: every head's metrics as a grid and a table.

It shows a frame and a view state (``show_frame``) and emits what the person asked for
(``headPicked``); ``ui.docks.host.DockHost`` passes that request on to the window.
"""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from ...engine import METRICS
from ...present.frame import DISPLAY_MAX, Frame
from ...present.insight import metric_help, metric_label, metric_levels, metrics_map, metrics_table
from ...present.state import ViewState
from ...render.metrics_grid import MetricsGrid
from .. import map_menu
from . import DockPanel


def labelled_combo(name: str, items) -> QtWidgets.QComboBox:
    combo = QtWidgets.QComboBox()
    combo.setObjectName(name)
    for label, data in items:
        combo.addItem(label, data)
    return combo


class MetricsPanel(DockPanel, QtWidgets.QWidget):
    """A grid of every head coloured by one metric, and a table of every metric, sortable by column.

    Signals
    -------
    headPicked(object, int)
        A head was clicked: its layer (None with random weights) and head, 0-based.
    """

    headPicked = QtCore.Signal(object, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.table_data = None
        self._key = None
        self.metricCombo = labelled_combo("metricCombo", [(metric_label(m), m) for m in METRICS])
        self.metricCombo.setCurrentIndex(METRICS.index("previous"))
        for i, m in enumerate(METRICS):
            self.metricCombo.setItemData(i, metric_help(m), QtCore.Qt.ItemDataRole.ToolTipRole)
        self.grid = MetricsGrid()
        map_menu.install(self.grid)
        self.table = QtWidgets.QTableWidget()
        self.table.setObjectName("metricsTable")
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.setToolTip("Click a column header to sort; click a row to open that head")
        top = QtWidgets.QHBoxLayout()
        top.addWidget(QtWidgets.QLabel("colour by"))
        top.addWidget(self.metricCombo)
        top.addStretch(1)
        splitter = QtWidgets.QSplitter()
        splitter.addWidget(self.grid)
        splitter.addWidget(self.table)
        splitter.setSizes([420, 420])
        self.splitter = splitter
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        self.metricCombo.currentIndexChanged.connect(self._draw_grid)
        self.grid.headPicked.connect(self._on_grid_click)
        self.table.cellClicked.connect(self._on_table_click)

    @property
    def metric(self) -> str:
        return self.metricCombo.currentData()

    def show_frame(self, frame: Frame, state: ViewState) -> None:
        if self._key == frame.request_id:
            return
        self._key = frame.request_id
        self.table_data = metrics_table(frame.result)
        self.grid.setVisible(self.table_data is not None)
        if self.table_data is None:  # a long input keeps its weights only pooled for the screen
            self.table.clear()
            self.table.setRowCount(0)
            self.table.setColumnCount(1)
            self.table.setHorizontalHeaderLabels([f"head metrics need every weight: inputs up to "
                                                  f"{DISPLAY_MAX} tokens (export the data for longer ones)"])
            self.table.resizeColumnsToContents()
            return
        self._draw_grid()
        self._fill_table()

    def _draw_grid(self) -> None:
        if self.table_data is not None:
            self.grid.set_data(metrics_map(self.table_data, self.metric), metric_levels(self.table_data, self.metric))

    def _fill_table(self) -> None:
        rows = self.table_data.rows()
        layered = self.table_data.layers is not None
        headers = (["layer"] if layered else []) + ["head"] + [metric_label(m) for m in METRICS]
        self.table.setSortingEnabled(False)
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        for c, m in enumerate(METRICS, start=len(headers) - len(METRICS)):
            self.table.horizontalHeaderItem(c).setToolTip(metric_help(m))
        self.table.setRowCount(len(rows))
        for r, (layer, head, values) in enumerate(rows):
            # layers and heads counted from 1, as on every map; the row keeps the 0-based pair
            cells = ([layer + 1] if layered else []) + [head + 1] + [round(values[m], 4) for m in METRICS]
            for c, value in enumerate(cells):
                item = QtWidgets.QTableWidgetItem()
                item.setData(QtCore.Qt.ItemDataRole.DisplayRole, value if np.isfinite(value) else "–")
                item.setData(QtCore.Qt.ItemDataRole.UserRole, (layer, head))
                self.table.setItem(r, c, item)
        self.table.setSortingEnabled(True)
        self.table.resizeColumnsToContents()
        # the table whole where the dock is wide enough (at 1366 px it was cut), the grid the rest
        need = (sum(self.table.columnWidth(c) for c in range(self.table.columnCount()))
                + self.table.verticalScrollBar().sizeHint().width() + 2 * self.table.frameWidth() + 2)
        total = sum(self.splitter.sizes())
        if total > need + 200:
            self.splitter.setSizes([total - need, need])

    def _on_grid_click(self, row: int, head: int) -> None:
        layers = self.table_data.layers
        self.headPicked.emit(None if layers is None else layers[row], head)

    def _on_table_click(self, row: int, _column: int) -> None:
        layer, head = self.table.item(row, 0).data(QtCore.Qt.ItemDataRole.UserRole)
        self.headPicked.emit(layer, head)

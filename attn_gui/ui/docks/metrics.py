"""The insight panels: head metrics and attention rollout (difference maps and why scaling have
files of their own).

Each panel shows a frame and a view state (``show``) and emits what the person asked
for; ``ui.insight.InsightDocks`` passes those requests on as its own signals.
"""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from ..engine import METRICS
from ..engine.rollout import FUSIONS
from ..present.frame import DISPLAY_MAX, Frame
from ..present.insight import (metric_help, metric_label, metric_levels, metrics_map, metrics_table, rollout_arrays,
                               rollout_map)
from ..present.state import ViewState
from ..render.heatmap import HeatmapView
from ..render.metrics_grid import MetricsGrid
from . import map_menu


def labelled_combo(name: str, items) -> QtWidgets.QComboBox:
    combo = QtWidgets.QComboBox()
    combo.setObjectName(name)
    for label, data in items:
        combo.addItem(label, data)
    return combo


class MetricsPanel(QtWidgets.QWidget):
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


class RolloutPanel(QtWidgets.QWidget):
    """Attention rollout of a model, one layer at a time (a slider), fusion and residual as chosen."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.frame: Frame | None = None
        self.hidden: tuple[int, ...] = ()
        self._cache: tuple | None = None
        self.fusionCombo = labelled_combo("fusionCombo", [(f"{f} of heads", f) for f in FUSIONS])
        self.residualCheck = QtWidgets.QCheckBox("residual: ½A + ½I")
        self.residualCheck.setObjectName("residualCheck")
        self.residualCheck.setChecked(True)
        self.residualCheck.setToolTip("Add the identity for the residual path, as Abnar & Zuidema (2020) do")
        self.layerSlider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.layerSlider.setObjectName("rolloutLayerSlider")
        self.layerSlider.setTickPosition(QtWidgets.QSlider.TickPosition.TicksBelow)
        self.layerLabel = QtWidgets.QLabel()
        self.map = HeatmapView("heatmap:rollout")
        map_menu.install(self.map)
        self.message = QtWidgets.QLabel("Attention rollout needs a model: choose weights → MiniLM-L6 "
                                        "under Source. Row i: how much token i after layer l draws on each "
                                        "input token, through every layer below (Abnar & Zuidema, 2020).")
        self.message.setWordWrap(True)
        self.message.setObjectName("rolloutMessage")
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(self.fusionCombo)
        bar.addWidget(self.residualCheck)
        bar.addWidget(QtWidgets.QLabel("after layer"))
        bar.addWidget(self.layerSlider, 1)
        bar.addWidget(self.layerLabel)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(bar)
        layout.addWidget(self.message)
        layout.addWidget(self.map, 1)
        self.fusionCombo.currentIndexChanged.connect(self._draw)
        self.residualCheck.toggled.connect(self._draw)
        self.layerSlider.valueChanged.connect(self._draw)

    def show_frame(self, frame: Frame, state: ViewState, hidden: tuple[int, ...] = ()) -> None:
        first = self.frame is None or self.frame.result.layer_weights is None
        self.frame, self.hidden = frame, hidden
        lw = frame.result.layer_weights
        if lw is not None:
            self.layerSlider.setRange(0, lw.size(0) - 1)
            if first:
                self.layerSlider.setValue(lw.size(0) - 1)
        self._draw()

    def maps(self) -> np.ndarray:
        key = (self.frame.request_id, self.fusionCombo.currentData(), self.residualCheck.isChecked())
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, rollout_arrays(self.frame.result, key[1], key[2]))
        return self._cache[1]

    def _draw(self) -> None:
        model = self.frame is not None and self.frame.result.layer_weights is not None
        for w in (self.map, self.fusionCombo, self.residualCheck, self.layerSlider, self.layerLabel):
            w.setEnabled(model)
        self.map.setVisible(model)
        self.message.setVisible(not model)
        if not model:
            return
        layer = self.layerSlider.value()
        self.layerLabel.setText(str(layer + 1))  # counted from 1, as the title says
        self.map.set_data(rollout_map(self.frame, self.maps(), layer, self.fusionCombo.currentData(),
                                      self.residualCheck.isChecked(), self.hidden))

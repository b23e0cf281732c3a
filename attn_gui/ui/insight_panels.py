"""The insight panels: head metrics, difference maps, attention rollout, why scaling.

Each panel shows a frame and a view state (``show``) and emits what the person asked
for; ``ui.insight.InsightDocks`` turns those requests into window calls.
"""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from ..engine import FIELDS, METRICS, UserError, entropy_vs_dk
from ..engine.metrics import causal_visible, head_metrics
from ..engine.rollout import FUSIONS
from ..engine.scaling import EntropySweep, sweep_cost, sweep_d_ks
from ..present.difference import (comparable_fields, head_difference, layer_difference, per_head_fields,
                                  pinned_difference)
from ..present.frame import DISPLAY_MAX, Frame
from ..present.insight import (SaturationNote, metric_help, metric_label, metric_levels, metrics_map,
                               metrics_table, query_softmax, rollout_arrays, rollout_map)
from ..present.state import ViewState
from ..render.heatmap import HeatmapView
from ..render.metrics_grid import MetricsGrid
from ..render.scaling_plot import ScalingPlot
from . import map_menu

SWEEP_BUDGET = 300_000_000  # multiply-adds: about a tenth of a second on a laptop core


def _combo(name: str, items) -> QtWidgets.QComboBox:
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
        self.metricCombo = _combo("metricCombo", [(metric_label(m), m) for m in METRICS])
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
            cells = ([layer] if layered else []) + [head + 1] + [round(values[m], 4) for m in METRICS]
            for c, value in enumerate(cells):
                item = QtWidgets.QTableWidgetItem()
                item.setData(QtCore.Qt.ItemDataRole.DisplayRole, value if np.isfinite(value) else "–")
                item.setData(QtCore.Qt.ItemDataRole.UserRole, (layer, head))
                self.table.setItem(r, c, item)
        self.table.setSortingEnabled(True)
        self.table.resizeColumnsToContents()

    def _on_grid_click(self, row: int, head: int) -> None:
        layers = self.table_data.layers
        self.headPicked.emit(None if layers is None else layers[row], head)

    def _on_table_click(self, row: int, _column: int) -> None:
        layer, head = self.table.item(row, 0).data(QtCore.Qt.ItemDataRole.UserRole)
        self.headPicked.emit(layer, head)


class DifferencePanel(QtWidgets.QWidget):
    """Pin a result, then see any map as now minus pinned; or head minus head, layer minus layer."""

    MODES = (("now − pinned", "pinned"), ("head − head", "heads"), ("layer − layer (α)", "layers"))

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.frame: Frame | None = None
        self.pinned: Frame | None = None
        self.state: ViewState | None = None
        self.pinButton = QtWidgets.QPushButton("Pin this result")
        self.pinButton.setObjectName("pinButton")
        self.pinButton.setToolTip("Keep the result shown now; later results with the same number of tokens "
                                  "show their difference from it")
        self.pinnedLabel = QtWidgets.QLabel("nothing pinned")
        self.pinnedLabel.setObjectName("pinnedLabel")
        self.pinnedLabel.setWordWrap(True)
        self.modeCombo = _combo("differenceModeCombo", self.MODES)
        self.fieldCombo = _combo("differenceFieldCombo", [])
        self.headA, self.headB = QtWidgets.QSpinBox(), QtWidgets.QSpinBox()
        self.layerA, self.layerB = QtWidgets.QSpinBox(), QtWidgets.QSpinBox()
        for name, spin in (("headASpin", self.headA), ("headBSpin", self.headB),
                           ("layerASpin", self.layerA), ("layerBSpin", self.layerB)):
            spin.setObjectName(name)
        self.map = HeatmapView("heatmap:difference")
        map_menu.install(self.map)
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("differenceMessage")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color:#556")
        self.fieldCombo.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.labelA, self.labelB, self.labelLayer = QtWidgets.QLabel("A"), QtWidgets.QLabel("− B"), QtWidgets.QLabel("layer")
        bar = QtWidgets.QHBoxLayout()  # two rows, so the panel fits a side dock
        for w in (self.pinButton, self.modeCombo, self.fieldCombo):
            bar.addWidget(w)
        bar.addStretch(1)
        pick = QtWidgets.QHBoxLayout()
        for w in (self.labelA, self.headA, self.labelLayer, self.layerA, self.labelB, self.headB, self.layerB):
            pick.addWidget(w)
        pick.addStretch(1)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(bar)
        layout.addLayout(pick)
        layout.addWidget(self.pinnedLabel)
        layout.addWidget(self.message)
        layout.addWidget(self.map, 1)
        self.pinButton.clicked.connect(self.pin)
        for signal in (self.modeCombo.currentIndexChanged, self.fieldCombo.currentIndexChanged,
                       self.headA.valueChanged, self.headB.valueChanged, self.layerA.valueChanged,
                       self.layerB.valueChanged):
            signal.connect(self._draw)

    def pin(self) -> None:
        """Pin the frame shown now."""
        if self.frame is None:
            return
        self.pinned = self.frame
        cfg = self.pinned.result.config
        words = f"“{cfg.sentence[:40]}”, T = {self.pinned.result.seq_len}"
        self.pinnedLabel.setText(f"pinned: {words}")
        self._draw()

    def show_frame(self, frame: Frame, state: ViewState, hidden: tuple[int, ...] = ()) -> None:
        self.frame, self.state, self.hidden = frame, state, hidden
        result = frame.result
        model = result.layer_weights is not None
        self.modeCombo.model().item(2).setEnabled(model)
        if not model and self.mode == "layers":
            self.modeCombo.setCurrentIndex(0)
        for spin in (self.headA, self.headB):
            spin.setRange(1, result.heads)
        if self.headB.value() == self.headA.value() and result.heads > 1:
            self.headB.setValue(2 if self.headA.value() == 1 else 1)
        L = result.layer_weights.size(0) if model else 1
        for spin in (self.layerA, self.layerB):
            spin.setRange(0, L - 1)
        self._draw()

    @property
    def mode(self) -> str:
        return self.modeCombo.currentData()

    def _fields(self) -> list[str]:
        if self.mode == "pinned":
            return [] if self.pinned is None else comparable_fields(self.frame.result, self.pinned.result)
        if self.mode == "heads":
            return per_head_fields(self.frame.result)
        return ["weights"]

    def _set_fields(self, names: list[str]) -> None:
        current = self.fieldCombo.currentData() or "weights"
        if [self.fieldCombo.itemData(i) for i in range(self.fieldCombo.count())] != names:
            self.fieldCombo.blockSignals(True)
            self.fieldCombo.clear()
            for n in names:
                self.fieldCombo.addItem(f"{FIELDS[n].symbol}  ({n})", n)
            self.fieldCombo.blockSignals(False)
        index = self.fieldCombo.findData(current)
        self.fieldCombo.setCurrentIndex(index if index >= 0 else self.fieldCombo.findData("weights"))

    def _draw(self) -> None:
        if self.frame is None:
            return
        mode, result = self.mode, self.frame.result
        self.labelA.setText("head" if mode == "layers" else "A")
        self.labelA.setVisible(mode != "pinned")
        self.labelB.setVisible(mode != "pinned")
        self.headA.setVisible(mode in ("heads", "layers"))
        self.headB.setVisible(mode == "heads")
        self.layerA.setVisible(mode == "layers")
        self.labelLayer.setVisible(mode == "layers")
        self.labelB.setText("−" if mode == "layers" else "− B")
        self.layerB.setVisible(mode == "layers")
        self.fieldCombo.setVisible(mode != "layers")
        names = self._fields()
        self._set_fields(names)
        name = self.fieldCombo.currentData()
        if not names or name is None:
            if self.pinned is None:
                text = "Pin a result, then change anything (a seed, the temperature, the mask, a word): " \
                       "every map then shows now − pinned."
            else:
                text = (f"The pinned result has {self.pinned.result.seq_len} tokens and this one "
                        f"{result.seq_len}: differences need the same number of tokens.")
            self.message.setText(text)
            self.message.show()
            self.map.hide()
            return
        self.message.hide()
        self.map.show()
        head = min(self.state.head, result.heads - 1)
        if mode == "pinned":
            data = pinned_difference(self.frame, self.pinned, name, head if FIELDS[name].per_head else None,
                                     self.hidden)
        elif mode == "heads":
            data = head_difference(self.frame, name, self.headA.value() - 1, self.headB.value() - 1, self.hidden)
        else:
            data = layer_difference(self.frame, self.layerA.value(), self.layerB.value(), self.headA.value() - 1,
                                    self.hidden)
        self.map.set_data(data)


class RolloutPanel(QtWidgets.QWidget):
    """Attention rollout of a model, one layer at a time (a slider), fusion and residual as chosen."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.frame: Frame | None = None
        self.hidden: tuple[int, ...] = ()
        self._cache: tuple | None = None
        self.fusionCombo = _combo("fusionCombo", [(f"{f} of heads", f) for f in FUSIONS])
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
        self.layerLabel.setText(str(layer))
        self.map.set_data(rollout_map(self.frame, self.maps(), layer, self.fusionCombo.currentData(),
                                      self.residualCheck.isChecked(), self.hidden))


class ScalingPanel(QtWidgets.QWidget):
    """Seed 004's "why scaling" on the current numbers, and the saturation note with its fix.

    Signals
    -------
    fixRequested(dict)
        The note's one-click fix: the config change to apply.
    """

    fixRequested = QtCore.Signal(dict)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self._sweep_key = None
        self.sweep: EntropySweep | None = None
        self.reference: EntropySweep | None = None
        self._fix: dict | None = None
        self.plot = ScalingPlot()
        self.note = QtWidgets.QLabel()
        self.note.setObjectName("scalingNote")
        self.note.setWordWrap(True)
        self.fixButton = QtWidgets.QPushButton()
        self.fixButton.setObjectName("scalingFixButton")
        self.fixButton.clicked.connect(lambda: self._fix and self.fixRequested.emit(dict(self._fix)))
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.note, 1)
        row.addWidget(self.fixButton)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(row)
        layout.addWidget(self.plot, 1)

    def show_frame(self, frame: Frame, state: ViewState, note: SaturationNote | None) -> None:
        result, cfg = frame.result, frame.result.config
        token = state.token if state.token is not None and state.token < result.seq_len else 0
        head = min(state.head, result.heads - 1)
        self.plot.set_query(query_softmax(result, head, token), head)
        self._fix = note.fix if note else None
        self.fixButton.setVisible(note is not None)
        if note is not None:
            self.fixButton.setText(note.fix_label)
            self.note.setText(f"<b style='color:#b00020'>⚠</b> {note.text}")
        else:
            self.note.setText("The softmax is soft here: fewer than half the rows put 0.99 or more on one key. "
                              "Turn scaling off or raise d_k, d_model to watch it turn one-hot.")
        mask = causal_visible(result.seq_len, result.q.device) if cfg.causal and not result.streamed else None
        # a long input keeps its weights pooled only: its point is left off the plot
        current = None if result.streamed else float(head_metrics(result.weights, mask)["entropy_norm"].mean())
        d_k = result.q.size(-1)
        if cfg.model is not None or not cfg.projections:
            why = "a model's d_k is fixed" if cfg.model is not None else "without projections d_k = d_model"
            self.plot.set_sweep(None, d_k, cfg.scale, current, f"no d_k sweep: {why}")
            return
        # The curves show how this initialisation behaves as d_k grows: they do not depend on
        # d_k or the scale switch, and the seeds only jitter them, so a new seed (typing a
        # number, Re-roll) keeps the curves it has and the star moves.
        key = cfg.replace(d_k=1, scale=True, seed=0, weight_seed=None)
        if key != self._sweep_key:
            d_ks = sweep_d_ks(cfg.d_k)
            self.sweep = self.reference = None
            uniform = cfg.init == "uniform"  # then the scaled-normal curve shows what the fix does
            if sweep_cost(cfg, result.seq_len, d_ks) * (2 if uniform else 1) <= SWEEP_BUDGET:
                try:
                    self.sweep = entropy_vs_dk(cfg, d_ks)
                    self.reference = entropy_vs_dk(cfg.replace(init="scaled_normal"), d_ks) if uniform else None
                except UserError:  # a device gone or out of memory: the panel just has no curves
                    pass
            self._sweep_key = key
        message = "" if self.sweep is not None else "too large to sweep d_k here"
        self.plot.set_sweep(self.sweep, d_k, cfg.scale, current, message, self.reference)

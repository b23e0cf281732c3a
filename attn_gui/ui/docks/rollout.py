"""The Attention rollout dock: a model's rollout, one layer at a time."""

from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets

from ...engine.analysis.rollout import FUSIONS
from ...present.maps import special_tokens
from ...present.frame import Frame
from ...present.insight import rollout_arrays, rollout_map
from ...present.state import ViewState
from ...render.heatmap import HeatmapView
from .. import map_menu
from . import DockPanel
from .metrics import labelled_combo


class RolloutPanel(DockPanel, QtWidgets.QWidget):
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

    def show_frame(self, frame: Frame, state: ViewState, hidden: tuple[int, ...] | None = None) -> None:
        if hidden is None:  # the tokens the window leaves out of the maps
            hidden = special_tokens(frame.result) if state.hide_special else ()
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

"""Difference maps: pin a result, then see any map as now minus pinned; or head minus head."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ...engine import FIELDS
from ...present.difference import (comparable_fields, head_difference, layer_difference, per_head_fields,
                                  pinned_difference, shift_note)
from ...present.maps import special_tokens
from ...present.frame import Frame
from ...present.state import ViewState
from ...render.heatmap import HeatmapView
from .. import map_menu
from . import DockPanel
from .metrics import labelled_combo


class DifferencePanel(DockPanel, QtWidgets.QWidget):
    """Pin a result, then see any map as now minus pinned; or head minus head, layer minus layer.

    Signals
    -------
    editRequested(dict)
        "Pin, then shift one position" was pressed: the sentence moves one position on (a config change).
    """

    editRequested = QtCore.Signal(dict)
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
        self.shiftButton = QtWidgets.QPushButton("Pin, then shift one position")
        self.shiftButton.setObjectName("shiftButton")
        self.shiftButton.setToolTip("Pin this result and move the whole sentence one position on (position "
                                    "offset + 1): RoPE's and ALiBi's scores stay, sinusoidal ones change")
        self.shiftButton.clicked.connect(self.shift_positions)
        self.pinnedLabel = QtWidgets.QLabel("nothing pinned")
        self.pinnedLabel.setObjectName("pinnedLabel")
        self.pinnedLabel.setWordWrap(True)
        self.modeCombo = labelled_combo("differenceModeCombo", self.MODES)
        self.fieldCombo = labelled_combo("differenceFieldCombo", [])
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
        self.labelA, self.labelB = QtWidgets.QLabel("A"), QtWidgets.QLabel("− B")
        self.labelLayer = QtWidgets.QLabel("layer")
        bar = QtWidgets.QHBoxLayout()  # two rows, so the panel fits a side dock
        for w in (self.pinButton, self.shiftButton, self.modeCombo, self.fieldCombo):
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

    def shift_positions(self) -> None:
        """Pin the result shown now and move the sentence one position on: the dock then shows what depends on
        absolute positions (sinusoidal) and what on i − j only (RoPE, ALiBi)."""
        self.pin()
        self.show_field("scores")
        offset = (self.state or ViewState()).config.position_offset
        self.editRequested.emit({"position_offset": offset + 1})

    def show_frame(self, frame: Frame, state: ViewState, hidden: tuple[int, ...] | None = None) -> None:
        if hidden is None:  # the tokens the window leaves out of the maps
            hidden = special_tokens(frame.result) if state.hide_special else ()
        self.frame, self.state, self.hidden = frame, state, hidden
        result = frame.result
        model = result.layer_weights is not None
        self.shiftButton.setEnabled(result.config.model is None and result.config.positional != "none")
        self.modeCombo.model().item(2).setEnabled(model)
        if not model and self.mode == "layers":
            self.modeCombo.setCurrentIndex(0)
        for spin in (self.headA, self.headB):
            spin.setRange(1, result.heads)
        if self.headB.value() == self.headA.value() and result.heads > 1:
            self.headB.setValue(2 if self.headA.value() == 1 else 1)
        L = result.layer_weights.size(0) if model else 1
        for spin in (self.layerA, self.layerB):  # layers and heads counted from 1, as everywhere on screen
            spin.setRange(1, L)
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
        self.message.setStyleSheet("color:#556")
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
            data = layer_difference(self.frame, self.layerA.value() - 1, self.layerB.value() - 1,
                                    self.headA.value() - 1, self.hidden)
        self.map.set_data(data)
        note = shift_note(self.pinned.result.config, result.config, data) if mode == "pinned" else None
        if note:
            self.message.setText(note)
            self.message.setStyleSheet("color:#1a2b4c; font-weight:600")
            self.message.show()

    def show_field(self, name: str) -> None:
        """Compare field ``name`` (now − pinned) when it is in the list."""
        self.modeCombo.setCurrentIndex(0)
        index = self.fieldCombo.findData(name)
        if index >= 0:
            self.fieldCombo.setCurrentIndex(index)

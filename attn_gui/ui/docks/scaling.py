"""Why scaling: the query's softmax with and without 1/sqrt(d_k), and entropy against d_k."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ...engine import UserError, entropy_vs_dk
from ...engine.analysis.metrics import causal_visible, head_metrics
from ...engine.analysis.scaling import EntropySweep, sweep_cost, sweep_d_ks
from ...present.frame import Frame
from ...present.insight import query_softmax
from ...present.saturation import SaturationNote
from ...present.state import ViewState
from ...render.scaling_plot import ScalingPlot
from . import DockPanel


SWEEP_BUDGET = 300_000_000  # multiply-adds: about a tenth of a second on a laptop core


class SaturationFix(QtWidgets.QPushButton):
    """The saturation note's one-click fix, in the window's status bar: shown with a frame that has a note.

    Signals
    -------
    editRequested(dict)
        The fix, as a config change.
    """

    editRequested = QtCore.Signal(dict)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("saturationFixButton")
        self.hide()
        self.note: SaturationNote | None = None
        self.clicked.connect(lambda: self.note is not None and self.editRequested.emit(dict(self.note.fix)))

    def show_frame(self, frame: Frame) -> None:
        """The window shows ``frame``: the button says its note's fix, or hides."""
        self.note = frame.saturation
        self.setVisible(self.note is not None)
        if self.note is not None:
            self.setText(self.note.fix_label)
            self.setToolTip(self.note.text)


class ScalingPanel(DockPanel, QtWidgets.QWidget):
    """Seed 004's "why scaling" on the current numbers, and the saturation note with its fix.

    Signals
    -------
    editRequested(dict)
        The note's one-click fix: the config change to apply.
    """

    editRequested = QtCore.Signal(dict)

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
        self.fixButton.clicked.connect(lambda: self._fix and self.editRequested.emit(dict(self._fix)))
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.note, 1)
        row.addWidget(self.fixButton)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(row)
        layout.addWidget(self.plot, 1)

    def show_frame(self, frame: Frame, state: ViewState, note: SaturationNote | None = None) -> None:
        note = note if note is not None else frame.saturation
        result, cfg = frame.result, frame.result.config
        token = state.token if state.token is not None and state.token < result.seq_len else 0
        head = min(state.head, result.heads - 1)
        if "scores" in result.not_captured:  # a model read through transformers: no ω to rescale
            self._fix = None
            self.fixButton.setVisible(False)
            self.note.setText(f"The scores ω are not captured for {result.resolved.spec.through}: only α is shown.")
            return
        self.plot.set_query(query_softmax(result, head, token), head)
        self._fix = note.fix if note else None
        self.fixButton.setVisible(note is not None)
        if note is not None:
            self.fixButton.setText(note.fix_label)
            self.note.setText(f"<b style='color:#b00020'>⚠</b> {note.text}")
        else:
            self.note.setText("The softmax is soft here: fewer than half the rows put 0.99 or more on one key. "
                              "Turn scaling off or raise d_k, d_model to watch it turn one-hot.")
        causal = result.resolved.causal and not result.streamed
        mask = causal_visible(result.seq_len, result.q.device) if causal else None
        # a long input keeps its weights pooled only: its point is left off the plot
        cross = result.source_tokens is not None
        entropy = None if result.streamed else head_metrics(result.weights, mask, cross=cross)["entropy_norm"]
        current = None if entropy is None else float(entropy.mean())
        d_k = result.q.size(-1)
        scaled = result.resolved.shown.scale  # as the layer ran: a GPT-2 with scale_attn_weights off does not scale
        if cfg.model is not None or not cfg.projections:
            why = "a model's d_k is fixed" if cfg.model is not None else "without projections d_k = d_model"
            self.plot.set_sweep(None, d_k, scaled, current, f"no d_k sweep: {why}")
            return
        # The curves show how this initialisation behaves as d_k grows: they do not depend on
        # d_k or the scale switch, and the seeds only jitter them, so a new seed (typing a
        # number, Re-roll) keeps the curves it has and the star moves.
        key = {**cfg.to_dict(), "d_k": None, "scale": None, "seed": None, "weight_seed": None}
        if key != self._sweep_key:
            d_ks = sweep_d_ks(cfg.d_k, even=cfg.positional == "rope")
            self.sweep = self.reference = None
            uniform = cfg.drawn_init == "uniform"  # then the scaled-normal curve shows what the fix does
            if sweep_cost(cfg, result.seq_len, d_ks) * (2 if uniform else 1) <= SWEEP_BUDGET:
                try:
                    self.sweep = entropy_vs_dk(cfg, d_ks)
                    self.reference = entropy_vs_dk(cfg.replace(init="scaled_normal"), d_ks) if uniform else None
                except UserError:  # a device gone or out of memory: the panel just has no curves
                    pass
            self._sweep_key = key
        message = "" if self.sweep is not None else "too large to sweep d_k here"
        self.plot.set_sweep(self.sweep, d_k, scaled, current, message, self.reference)

"""The KV-cache dock: decoding step by step, the cache growing, the new query row against it."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ...engine import AttentionConfig
from ...engine.model.plan import plan
from ...present.kv_cache import CacheStep, CacheWalk, cache_maps
from ...present.state import ViewState
from ...render.heatmap import HeatmapView
from ..worker import TaskThread
from . import DockPanel


WIDGET_MAX = 16777215  # Qt's QWIDGETSIZE_MAX: no maximum width
NEEDS_DECODER = ("The KV cache needs a decoder model: it decodes one token at a time, each new query against "
                 "the cached keys and values. Choose SmolLM2-135M under Source → weights.")


class KVCachePanel(DockPanel, QtWidgets.QWidget):
    """Prefill the sentence, then decode one token at a time through the key/value cache.

    Runs on a thread of its own; shows the selected layer's and head's cache (a row per
    position, one more each step) and the newest query row's alpha, with each step's time
    against recomputing the whole sequence.

    Signals
    -------
    stepShown(CacheStep)
        A step was drawn (after Prefill or Step, or when another step is picked).
    """

    stepShown = QtCore.Signal(object)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("kvCachePanel")
        self.config: AttentionConfig | None = None
        self.layer, self.head = 0, 0
        self.walk: CacheWalk | None = None
        self.steps: list[CacheStep] = []
        self.busy = False
        self.worker = TaskThread("attn-gui kv cache", self)
        self.worker.done.connect(self._on_done)

        self.prefillButton = QtWidgets.QPushButton("Prefill")
        self.prefillButton.setObjectName("kvPrefillButton")
        self.prefillButton.setToolTip("Run the model over the whole sentence at once and keep every layer's "
                                      "keys and values: the cache")
        self.prefillButton.clicked.connect(self.prefill)
        self.stepButton = QtWidgets.QPushButton("Decode one token")
        self.stepButton.setObjectName("kvStepButton")
        self.stepButton.setToolTip("Append the most likely token: only its query, key and value are computed, "
                                   "its query against the cached keys (then the whole sequence is recomputed "
                                   "once, to compare the time)")
        self.stepButton.clicked.connect(self.step)
        self.note = QtWidgets.QLabel(NEEDS_DECODER)
        self.note.setObjectName("kvNote")
        self.note.setWordWrap(True)
        self.list = QtWidgets.QListWidget()
        self.list.setObjectName("kvStepList")
        self.list.currentRowChanged.connect(lambda _row: self._draw())
        self.list.setWordWrap(True)
        self.keysView, self.valuesView = HeatmapView("kv:keys"), HeatmapView("kv:values")
        self.alphaView = HeatmapView("kv:alpha")
        self.alphaView.setMaximumHeight(170)

        buttons = QtWidgets.QHBoxLayout()
        buttons.addWidget(self.prefillButton)
        buttons.addWidget(self.stepButton)
        side = QtWidgets.QVBoxLayout()
        side.addLayout(buttons)
        side.addWidget(self.note)
        side.addWidget(self.list, 1)
        left = QtWidgets.QWidget()
        left.setLayout(side)
        left.setMaximumWidth(300)
        self.left = left  # the buttons, the note and the steps: the whole width while the note says what it needs
        maps = QtWidgets.QGridLayout()
        maps.setContentsMargins(0, 0, 0, 0)
        maps.addWidget(self.keysView, 0, 0)
        maps.addWidget(self.valuesView, 0, 1)
        maps.addWidget(self.alphaView, 1, 0, 1, 2)
        maps.setRowStretch(0, 3)
        maps.setRowStretch(1, 1)
        self.maps = (self.list, self.keysView, self.valuesView, self.alphaView)  # hidden until a decoder is chosen
        outer = QtWidgets.QHBoxLayout(self)
        outer.setContentsMargins(2, 2, 2, 2)
        outer.addWidget(left, 1)  # the whole width while the maps are hidden (at most 300 px beside them)
        outer.addLayout(maps, 1)
        for widget in self.maps:
            widget.hide()
        self.left.setMaximumWidth(WIDGET_MAX)
        self._enable()

    def follow(self, state: ViewState) -> None:
        """Follow the window's state: its layer and head are shown; another sentence or model starts over."""
        config = state.config
        decoder = plan(config).can.generate  # a model read through transformers shows next tokens, not a cache walk
        same = (self.config is not None and decoder and
                (config.sentence, config.model, config.device, config.dtype) ==
                (self.config.sentence, self.config.model, self.config.device, self.config.dtype))
        self.config = config if decoder else None
        if not same and self.steps:
            self.walk, self.steps = None, []
            self.list.clear()
        self.layer, self.head = config.layer, state.head
        for widget in self.maps:  # no empty axes or colour bars: the note says what the dock needs
            widget.setVisible(decoder)
        self.left.setMaximumWidth(300 if decoder else WIDGET_MAX)
        if self.config is None:
            self.note.setText(NEEDS_DECODER)
        elif not self.steps:
            self.note.setText("Prefill: the sentence at once; then decode one token at a time through the cache.")
        self._enable()
        self._draw()

    def prefill(self) -> None:
        """Start over from the sentence: the prefill, on the panel's thread."""
        if self.config is None or self.busy:
            return
        config = self.config
        self._start("prefill", lambda: CacheWalk(config))

    def step(self) -> None:
        """One decode step after the last one."""
        if self.walk is None or self.busy:
            return
        walk = self.walk
        self._start("step", walk.step)

    def _start(self, what: str, function) -> None:
        self.busy = True
        self.note.setText("prefilling…" if what == "prefill" else "decoding one token…")
        self._enable()
        self.worker.start((what, self.config), function)

    def _on_done(self, token, outcome) -> None:
        what, config = token
        self.busy = False
        if config != self.config and (self.config is None or config.sentence != self.config.sentence
                                      or config.model != self.config.model):
            self._enable()
            return  # the sentence changed meanwhile: this walk is no longer the window's
        if isinstance(outcome, Exception):
            self.note.setText(f"⚠ {str(outcome).splitlines()[0]}")
            self._enable()
            return
        if what == "prefill":
            self.walk, self.steps = outcome, [outcome.steps[0]]
            self.list.clear()
        else:
            self.steps.append(outcome)
        self.list.addItem(self.steps[-1].describe())
        self.note.setText(f"cache of {len(self.steps[-1].tokens)} positions; the newest row is outlined")
        self._enable()
        self.list.setCurrentRow(len(self.steps) - 1)  # draws it

    def _enable(self) -> None:
        self.prefillButton.setEnabled(self.config is not None and not self.busy)
        self.stepButton.setEnabled(self.walk is not None and not self.busy)

    def _draw(self) -> None:
        row = self.list.currentRow()
        if not self.steps or not 0 <= row < len(self.steps):
            return
        step = self.steps[row]
        L, h, _ = step.alpha.shape
        maps = cache_maps(step, min(self.layer, L - 1), min(self.head, h - 1))
        for view, name in ((self.keysView, "keys"), (self.valuesView, "values"), (self.alphaView, "alpha")):
            view.set_data(maps[name])
        newest = len(step.tokens) - 1
        self.keysView.set_highlight(newest)
        self.valuesView.set_highlight(newest)
        self.stepShown.emit(step)

    def shutdown(self) -> None:
        self.worker.shutdown()

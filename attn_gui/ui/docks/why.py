"""The Why dock: which heads write the answer, why a head attends where it does, what it copies.

Shows ``engine.attribution`` for the window's decoder and sentence, computed on a ``TaskThread``
(never on the GUI thread): the layer x head direct logit attribution on a diverging scale (hover
for values, click to open that head), one score's attribution matrix (click a cell of alpha in
the window, or pick query and key here), the logit lens as a layer x position table (and beside a
fitted Jacobian lens in the Lenses view), the QK and OV circuits of the shown head with every head's
copying score, and the head detector's labels.
Like the Interventions dock it holds signals and view state only: the window calls ``follow`` and
``show_score`` and listens to ``headPicked`` (also sent by a click in the Lenses view: ``lens_view``).
"""

from __future__ import annotations

from html import escape

from PySide6 import QtCore, QtWidgets

from ...engine import AttentionConfig
from ...engine.analysis.attribution.logit import LogitAttribution, LogitLens, direct_logit_attribution, logit_lens
from ...engine.analysis.attribution.trace import Trace, trace
from ...engine.analysis.attribution.qkov import circuits, copying_scores
from ...engine.analysis.attribution.heads import detect_heads
from ...engine.analysis.attribution.score import score_attribution
from ...engine.model.plan import plan
from ...present import attribution as P
from ...present.state import ViewState
from ...render.heatmap import HeatmapView
from ..worker import TaskThread
from . import DockPanel
from .lens_view import LensView


def _map(name: str) -> HeatmapView:
    view = HeatmapView(name)
    view.setObjectName(name)
    view.setMinimumSize(240, 180)
    return view


NEEDS_DECODER = ("Why needs a decoder model: it splits the next token's logit into each head's and MLP's share, "
                 "the scores into their terms, and reads the logit lens and the circuits, all of which a decoder's "
                 "language-model head defines. Choose SmolLM2-135M, a decoder folder, a .gguf file or a trained "
                 "checkpoint under Source → weights.")


class WhyPanel(DockPanel, QtWidgets.QWidget):
    """Direct logit attribution, score attribution, logit lens, circuits and head labels of the shown model.

    Signals
    -------
    headPicked(int, int)
        A cell of the DLA or copying grid was clicked: open that layer and head (0-based) in the main view.
    shown(str)
        A result was drawn: "dla", "lens", "detector", "score", "circuits" or "copying" (tests wait on it).
    modelColours(object, str)
        The (layers, heads) values the model view should show beside its thumbnails, and their name
        ("Colour the model view by DLA" on and a DLA drawn), or None and "" (off).
    """

    headPicked = QtCore.Signal(int, int)
    shown = QtCore.Signal(str)
    modelColours = QtCore.Signal(object, str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.config: AttentionConfig | None = None
        self.head = 0
        self.traced: tuple[AttentionConfig, Trace] | None = None  # the trace of a config, once computed
        self.pending = 0  # tasks started and not yet done
        self.last_dla: LogitAttribution | None = None
        self._build_controls()
        self._build_maps()
        layout = QtWidgets.QHBoxLayout(self)
        layout.addLayout(self._lay_out_controls(), 1)
        layout.addWidget(self._build_tabs(), 3)
        self._connect()
        self._follow(None, 0)

    def _build_controls(self) -> None:
        """The token to explain, the explain button and the model view's colouring, the messages and the head
        detector's labels."""
        self.tokenBox = QtWidgets.QLineEdit()
        self.tokenBox.setObjectName("whyToken")
        self.tokenBox.setPlaceholderText("top next token")
        self.tokenBox.setToolTip("The next token whose logit is split, as typed (' Paris' with its space) "
                                 "or as the maps show it (␣Paris); empty: the model's top next token")
        self.againstBox = QtWidgets.QLineEdit()
        self.againstBox.setObjectName("whyAgainst")
        self.againstBox.setPlaceholderText("optional: ' London'")
        self.againstBox.setToolTip("Split logit(token) - logit(this token) instead")
        self.explainButton = QtWidgets.QPushButton("Explain")
        self.explainButton.setObjectName("explainButton")
        self.colourBox = QtWidgets.QCheckBox("Colour the model view by DLA")
        self.colourBox.setObjectName("colourModelView")
        self.colourBox.setToolTip("The model view shows each head's DLA beside its thumbnails, in place of the "
                                  "sink mass (models with more layers than heads)")
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("whyMessage")
        self.message.setWordWrap(True)
        self.summary = QtWidgets.QLabel()
        self.summary.setObjectName("whySummary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.labels = QtWidgets.QPlainTextEdit()
        self.labels.setObjectName("detectorLabels")
        self.labels.setReadOnly(True)
        self.labels.setToolTip("The head detector on this input: previous-token (α on the token before), "
                               "duplicate-token (α on earlier copies of the same token), induction (α on the "
                               "token after an earlier copy), sink (α on the first token); a head is labelled "
                               "with its highest mean at or above 0.4")

    def _build_maps(self) -> None:
        """The attribution maps and tables of the tabs, with their own controls."""
        self.dla = _map("dlaGrid")
        self.score = _map("scoreAttribution")
        self.queryBox = QtWidgets.QSpinBox()
        self.queryBox.setObjectName("scoreQuery")
        self.keyBox = QtWidgets.QSpinBox()
        self.keyBox.setObjectName("scoreKey")
        for box in (self.queryBox, self.keyBox):
            box.setMinimum(1)
        self.scoreText = QtWidgets.QLabel()
        self.scoreText.setObjectName("scoreText")
        self.scoreText.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.scoreButton = QtWidgets.QPushButton("Split this score")
        self.scoreButton.setObjectName("scoreButton")
        self.lens = QtWidgets.QTableWidget()
        self.lens.setObjectName("logitLens")
        self.lenses = LensView()  # the logit lens beside a fitted Jacobian lens
        self.lenses.setObjectName("lensView")
        self.qk = _map("qkCircuit")
        self.ov = _map("ovCircuit")
        self.copying = _map("copyingGrid")
        self.copyingButton = QtWidgets.QPushButton("Copying score of every head")
        self.copyingButton.setObjectName("copyingButton")
        self.copyingButton.setToolTip("The eigenvalues of each head's W_U W_OV W_E (a few seconds per layer "
                                      "on SmolLM2)")

    def _lay_out_controls(self) -> QtWidgets.QVBoxLayout:
        """The left column: what needs a decoder (hidden without one), the messages, the head detector."""
        self.tools = QtWidgets.QWidget()  # what needs a decoder: hidden without one, the message says so
        form = QtWidgets.QFormLayout()
        form.addRow("Token", self.tokenBox)
        form.addRow("against", self.againstBox)
        controls = QtWidgets.QVBoxLayout(self.tools)
        controls.setContentsMargins(0, 0, 0, 0)
        controls.addLayout(form)
        controls.addWidget(self.explainButton)
        controls.addWidget(self.colourBox)
        self.detector = QtWidgets.QWidget()
        detector = QtWidgets.QVBoxLayout(self.detector)
        detector.setContentsMargins(0, 0, 0, 0)
        detector.addWidget(QtWidgets.QLabel("<b>Head detector</b>"))
        detector.addWidget(self.labels, 1)
        left = QtWidgets.QVBoxLayout()
        left.addWidget(self.tools)
        left.addWidget(self.message)
        left.addWidget(self.summary)
        left.addWidget(self.detector, 1)
        left.addStretch(0)
        return left

    def _build_tabs(self) -> QtWidgets.QTabWidget:
        """The tabs: logit attribution, score attribution, the logit lens and the circuits."""
        score_tab = QtWidgets.QWidget()
        pick = QtWidgets.QHBoxLayout()
        pick.addWidget(QtWidgets.QLabel("query"))
        pick.addWidget(self.queryBox)
        pick.addWidget(QtWidgets.QLabel("key"))
        pick.addWidget(self.keyBox)
        pick.addWidget(self.scoreButton)
        pick.addStretch(1)
        pick.addWidget(QtWidgets.QLabel("or click a cell of α"))
        box = QtWidgets.QVBoxLayout(score_tab)
        box.addLayout(pick)
        box.addWidget(self.scoreText)
        box.addWidget(self.score, 1)
        circuits_tab = QtWidgets.QWidget()
        grids = QtWidgets.QHBoxLayout()
        grids.addWidget(self.qk, 1)
        grids.addWidget(self.ov, 1)
        copy = QtWidgets.QVBoxLayout()
        copy.addWidget(self.copyingButton)
        copy.addWidget(self.copying, 1)
        grids.addLayout(copy, 1)
        circuits_tab.setLayout(grids)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setObjectName("whyTabs")
        self.tabs.addTab(self.dla, "Logit attribution")
        self.tabs.addTab(score_tab, "Score attribution")
        self.tabs.addTab(self.lens, "Logit lens")
        self.tabs.addTab(self.lenses, "Lenses")
        self.tabs.addTab(circuits_tab, "Circuits")
        return self.tabs

    def _connect(self) -> None:
        """The buttons, boxes and maps to what they do."""
        self.tasks = TaskThread("attn-gui why", self)
        self.tasks.done.connect(self._on_done)
        self.explainButton.clicked.connect(self.explain)
        self.tokenBox.returnPressed.connect(self.explain)
        self.againstBox.returnPressed.connect(self.explain)
        self.scoreButton.clicked.connect(lambda: self.show_score(self.head, self.queryBox.value() - 1,
                                                                 self.keyBox.value() - 1))
        self.copyingButton.clicked.connect(self.run_copying)
        self.lenses.layerPicked.connect(lambda layer: self.headPicked.emit(layer, self.head))
        self.lenses.shown.connect(lambda kind: kind == "fitted" and self.tabs.setCurrentWidget(self.lenses))
        self.colourBox.toggled.connect(lambda _: self._emit_colours())
        self.dla.scene().sigMouseClicked.connect(lambda event: self._pick(self.dla, event))
        self.copying.scene().sigMouseClicked.connect(lambda event: self._pick(self.copying, event))

    # what the window calls -------------------------------------------------------------------

    def follow(self, state: ViewState) -> None:
        """Follow the window's view state: its config and head."""
        self._follow(state.config, state.head)

    def behind(self, state: ViewState) -> None:
        """The window's state changed while the dock is out of sight (``input_changed``)."""
        self.input_changed(state.config)

    def _follow(self, config: AttentionConfig | None, head: int) -> None:
        """Show ``config`` (None, or not a decoder: say what is needed); a new model, sentence or struck heads
        start the attribution on the thread, a new head or layer redraws its circuits."""
        decoder = config is not None and plan(config).can.intervene
        for w in (self.explainButton, self.scoreButton, self.copyingButton):
            w.setEnabled(decoder)
        for w in (self.tools, self.summary, self.detector, self.tabs):  # no blank panel: the message says why
            w.setVisible(decoder)
        self.lenses.follow(config if decoder else None)
        if not decoder:
            self.config = self.last_dla = None
            self._emit_colours()
            self.message.setText(NEEDS_DECODER)
            return
        changed = self.config is None or (config.model, config.sentence, config.ablate) != (
            self.config.model, self.config.sentence, self.config.ablate)
        moved = changed or (config.layer, head) != (self.config.layer, self.head)
        self.config, self.head = config, head
        if changed:
            self.traced = self.last_dla = None
            self._emit_colours()
            self.explain()
        elif moved:
            self._start("circuits", lambda: circuits(config, head))

    def input_changed(self, config: AttentionConfig) -> None:
        """The window's input changed while the dock is out of sight: a DLA shown in the model view no longer holds."""
        if self.last_dla is not None and self.config is not None and (config.model, config.sentence, config.ablate) \
                != (self.config.model, self.config.sentence, self.config.ablate):
            self.last_dla = None
            self._emit_colours()

    def show_score(self, head: int, query: int, key: int) -> None:
        """Split alpha's cell (query, key) (0-based positions) of ``head`` of the shown layer into its terms."""
        if self.config is None:
            return
        config = self.config
        self.queryBox.setValue(query + 1)
        self.keyBox.setValue(key + 1)
        self.tabs.setCurrentIndex(1)
        self._start("score", lambda: score_attribution(config, head, query, key, self._trace(config)))

    def explain(self) -> None:
        """Direct logit attribution of the token in the box (or the top one), the logit lens and the detector."""
        if self.config is None:
            return
        config, head = self.config, self.head
        token, against = self.tokenBox.text() or None, self.againstBox.text() or None
        self.message.setText("computing…")
        self._start("dla", lambda: direct_logit_attribution(config, token, against, self._trace(config)))
        self._start("lens", lambda: logit_lens(config, traced=self._trace(config)))
        self._start("detector", lambda: detect_heads(config, self._trace(config)))
        self._start("circuits", lambda: circuits(config, head))

    def run_copying(self) -> None:
        if self.config is not None:
            config = self.config
            self.message.setText("computing every head's copying score…")
            self._start("copying", lambda: copying_scores(config))

    def shutdown(self) -> None:
        """Stop the threads (the window closes)."""
        self.tasks.shutdown()
        self.lenses.shutdown()

    # the thread ------------------------------------------------------------------------------

    def _trace(self, config: AttentionConfig) -> Trace:
        """The trace of ``config``, computed once (on the thread) and shared by the views of that config."""
        traced = self.traced
        if traced is None or traced[0] != config:
            traced = self.traced = (config, trace(config))
        return traced[1]

    @property
    def busy(self) -> bool:
        """Whether a task is in flight or queued."""
        return self.pending > 0

    def _start(self, kind: str, function) -> None:
        self.pending += 1
        self.tasks.start((kind, self.config, self.head), function)

    @QtCore.Slot(object, object)
    def _on_done(self, token, outcome) -> None:
        kind, config, head = token
        self.pending -= 1
        if self.config is None or config.replace(layer=0) != self.config.replace(layer=0):
            return  # a result of an input no longer shown
        if isinstance(outcome, Exception):  # a UserError names what is wrong; the last good result stays
            self.message.setText(str(outcome).splitlines()[0])
            return
        model = plan(config).source
        name = model.token_text
        if kind == "dla":
            self._show_dla(outcome, name)
        elif kind == "lens":
            self._show_lens(outcome, model.tokenize(config.sentence).tokens)
        elif kind == "detector":
            self.labels.setPlainText("\n".join(P.detector_lines(outcome)))
        elif kind == "score":
            if config != self.config:
                return
            self.score.set_data(P.score_map(outcome, list(model.tokenize(config.sentence).tokens)))
            self.scoreText.setText("\n".join(P.score_lines(outcome)))
            self.message.setText("")
        elif kind == "circuits":
            if (config.layer, head) != (self.config.layer, self.head):
                return
            qk, ov = P.circuit_maps(outcome)
            self.qk.set_data(qk)
            self.ov.set_data(ov)
        elif kind == "copying":
            self.copying.set_data(P.copying_map(outcome.numpy()))
            self.message.setText("")
        self.shown.emit(kind)

    def _show_dla(self, a: LogitAttribution, name) -> None:
        self.dla.set_data(P.dla_map(a, name))
        self.last_dla = a
        self._emit_colours()
        best = ", ".join(f"{h} ({v:+.2f})" for h, v in P.top_heads(a.heads.numpy(), 5))
        values = dict(zip(a.names, a.values.tolist(), strict=True))
        mlps = sum(v for k, v in values.items() if k.endswith("mlp"))
        self.summary.setText(f"{escape(P.what_dla(a, name))} = <b>{a.logit:.3f}</b><br>"
                             f"heads {float(a.heads.sum()):+.2f}, MLPs {mlps:+.2f}, embeddings "
                             f"{values['embed'] + values.get('positions', 0.0):+.2f}<br>largest heads: {best}")
        self.message.setText("")

    def _show_lens(self, lens: LogitLens, tokens) -> None:
        layers, n, _ = lens.probs.shape
        self.lens.setRowCount(layers)
        self.lens.setColumnCount(n)
        self.lens.setHorizontalHeaderLabels([f"{i + 1} {t}" for i, t in enumerate(tokens)])
        self.lens.setVerticalHeaderLabels([f"into layer {i + 1}" for i in range(layers - 1)] + ["output"])
        for layer in range(layers):
            for pos in range(n):
                top = lens.tokens[layer][pos]
                cell = QtWidgets.QTableWidgetItem(f"{top[0]} {lens.probs[layer, pos, 0]:.2f}")
                cell.setToolTip("\n".join(f"{t}  {p:.3f}" for t, p in zip(top, lens.probs[layer, pos].tolist(),
                                                                            strict=True)))
                self.lens.setItem(layer, pos, cell)
        self.lens.resizeColumnsToContents()
        self.lens.scrollToBottom()  # the last layers, where the answer forms

    def _emit_colours(self) -> None:
        a = self.last_dla
        if self.colourBox.isChecked() and a is not None and self.config is not None:
            name = plan(self.config).source.token_text
            label = f"DLA {name(a.token)}" + ("" if a.against is None else f" − {name(a.against)}")
            self.modelColours.emit(a.heads.numpy(), label)
        else:
            self.modelColours.emit(None, "")

    def _pick(self, view: HeatmapView, event) -> None:
        cell = view.item.cell_at(event.scenePos())
        if cell is not None and view.item.data is not None:
            self.headPicked.emit(*cell)

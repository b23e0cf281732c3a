"""The Circuit dock: which heads talk to which (``engine.circuits``), found off the GUI thread and drawn as the
layered graph of its top k edges (``present.circuits``) beside the faithfulness curve.

The dock reads the view state's model only; it asks the window to open a head (``headPicked``) when one is clicked,
so the maps and the Why dock follow the one truth. An edge clicked is looked at closely in the Edge tab
(``engine.circuits.composition``): the writer head's and the reader head's α on the task's first clean prompt side
by side, the edge's score and its composition score (Elhage et al. 2021). A run can be cancelled between its
forwards; a failed run says why in one line and leaves the last circuit shown. A run and its circuit belong to the
model they started on: when the view's model changes, the circuit shown is dropped and a run under way is cancelled
(its result, should it still come, is dropped), so no head of another model is ever offered.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtSvgWidgets import QSvgWidget

from ...engine import AttentionConfig
from ...engine.analysis.circuits import BUILT_IN, GRADIENT_AT, METHODS, Cancelled, Circuit, circuit, prepare
from ...engine.analysis.circuits.composition import EdgeLook, look
from ...engine.analysis.circuits.split import Split
from ...engine.model.plan import plan
from ...present.state import ViewState
from ...present.circuits import (alpha_svg, curve_estimate, faithfulness_svg, graph_svg, pick_edge, pick_writer,
                                 readable_size, top_edges)
from ..worker import TaskThread
from . import DockPanel

DEFAULT_K = 20
ASK = "Click an edge of the graph to see its two heads' α and how their weights compose."
DEFAULT_PAIRS = 20  # a run of a few seconds on SmolLM2; the CLI's default is 50


class _Picture(QSvgWidget):
    """An SVG drawn at the widget's own size (re-made on resize by ``make``), telling where it was clicked."""

    clicked = QtCore.Signal(float, float)

    def __init__(self, make=None, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.make = make  # (width, height) -> SVG text, or None for an empty picture
        self.zoom, self.readable = 1.0, (0, 0)

    def redraw(self) -> None:
        svg = self.make(self.width(), self.height()) if self.make is not None else None
        self.load(QtCore.QByteArray((svg or '<svg xmlns="http://www.w3.org/2000/svg"/>').encode("utf-8")))

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self.redraw()

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 (Qt's name)
        self.clicked.emit(event.position().x(), event.position().y())

    def set_readable(self, width: int, height: int) -> None:
        """Draw at ``width`` x ``height`` at least (times the zoom; its scroll area scrolls)."""
        self.readable = (width, height)
        self.setMinimumSize(round(width * self.zoom), round(height * self.zoom))

    def wheelEvent(self, event: QtGui.QWheelEvent) -> None:  # noqa: N802 (Qt's name)
        """Ctrl + wheel zooms (from half to four times the readable size); the wheel alone scrolls."""
        if not event.modifiers() & QtCore.Qt.KeyboardModifier.ControlModifier or not event.angleDelta().y():
            super().wheelEvent(event)
            return
        self.zoom = min(4.0, max(0.5, self.zoom * (1.25 if event.angleDelta().y() > 0 else 0.8)))
        self.set_readable(*self.readable)
        event.accept()


class CircuitPanel(DockPanel, QtWidgets.QWidget):
    """Task, method and pairs; Run and Cancel; the graph with its k slider; the faithfulness curve.

    Signals
    -------
    headPicked(int, int)
        A head of the graph was clicked: open that layer and head (0-based) in the main view.
    edgeShown(str, str)
        An edge clicked is shown in the Edge tab (its writer's and reader's names), or why it cannot be.
    circuitDone()
        A run ended: shown, failed (the message says why) or cancelled.
    curveEstimated(str)
        The edges are scored and the faithfulness curve's first point measured: what the rest should take, shown in
        the message.
    """

    headPicked = QtCore.Signal(int, int)
    edgeShown = QtCore.Signal(str, str)
    circuitDone = QtCore.Signal()
    curveEstimated = QtCore.Signal(str)
    _progress = QtCore.Signal(int, int, str)
    _estimated = QtCore.Signal(float, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.config: AttentionConfig | None = None
        self.found: Circuit | None = None
        self.seen: EdgeLook | None = None  # the edge shown in the Edge tab
        self._prompt: tuple[Split, tuple[int, ...], list[str]] | None = None  # the found circuit's first clean prompt
        self._running = False
        self._cancel = False
        self._found_model: str | None = None  # the model the circuit shown was found on
        self._run_model: str | None = None  # the model the run under way started on
        self._build_run_controls()
        self._build_views()
        self._lay_out()
        self._connect()
        self._follow(None)
        self._show_k()

    def _build_run_controls(self) -> None:
        """The task, the method and the pairs, the run and cancel buttons, the progress and the message."""
        self.taskBox = QtWidgets.QComboBox()
        self.taskBox.setObjectName("circuitTask")
        self.taskBox.setEditable(True)  # a built-in task or the path of a JSONL file of pairs
        self.taskBox.addItems(list(BUILT_IN))
        self.taskBox.setToolTip("A built-in task, or the path of a .jsonl file of pairs "
                                '({"clean": ..., "corrupt": ..., "answer": ..., "wrong": ...} a line)')
        self.methodBox = QtWidgets.QComboBox()
        self.methodBox.setObjectName("circuitMethod")
        self.methodBox.addItems(list(METHODS))
        self.gradientBox = QtWidgets.QComboBox()  # where EAP takes its gradient (EAP-IG: the line; routes: none)
        self.gradientBox.setObjectName("circuitGradientAt")
        for at in GRADIENT_AT:
            self.gradientBox.addItem(f"gradient at {at}", at)
        self.gradientBox.setToolTip("Where EAP takes dm/d(input): on the clean prompt (Syed et al., Hanna et al.; "
                                    "the default) or on the corrupted one (TransformerLens' attribution patching). "
                                    "EAP-IG averages it over the line between them.")
        self.methodBox.currentTextChanged.connect(lambda m: self.gradientBox.setEnabled(m == "eap"))
        self.pairsBox = QtWidgets.QSpinBox()
        self.pairsBox.setObjectName("circuitPairs")
        self.pairsBox.setRange(1, 1000)
        self.pairsBox.setValue(DEFAULT_PAIRS)
        self.pairsBox.setPrefix("pairs ")
        self.runButton = QtWidgets.QPushButton("Find the circuit")
        self.runButton.setObjectName("circuitRun")
        self.cancelButton = QtWidgets.QPushButton("Cancel")
        self.cancelButton.setObjectName("circuitCancel")
        self.cancelButton.setEnabled(False)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName("circuitProgress")
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("circuitMessage")
        self.message.setWordWrap(True)

    def _build_views(self) -> None:
        """The circuit's views: the edges kept (k), the graph, the faithfulness curve and the edge shown."""
        self.kSlider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.kSlider.setObjectName("circuitK")
        self.kSlider.setRange(1, DEFAULT_K)
        self.kSlider.setValue(DEFAULT_K)
        self.kLabel = QtWidgets.QLabel()
        self.edgesLabel = QtWidgets.QLabel()
        self.edgesLabel.setObjectName("circuitEdges")
        self.edgesLabel.setStyleSheet("font-family: monospace")
        self.edgesLabel.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.graph = _Picture(self._graph_svg)
        self.graph.setObjectName("circuitGraph")
        self.graph.set_readable(320, 220)
        self.graphScroll = QtWidgets.QScrollArea()  # a large model's graph at a readable size, scrolled
        self.graphScroll.setObjectName("circuitGraphScroll")
        self.graphScroll.setWidgetResizable(True)  # at least the view's size; a circuit found asks for its own
        self.graphScroll.setWidget(self.graph)
        self.curve = _Picture(self._curve_svg)
        self.curve.setObjectName("circuitCurve")
        self.curve.setMinimumSize(260, 150)
        self.edgeInfo = QtWidgets.QLabel(ASK)
        self.edgeInfo.setObjectName("circuitEdgeInfo")
        self.edgeInfo.setWordWrap(True)
        self.edgeInfo.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.writerAlpha = _Picture(lambda w, h: self._alpha_svg(w, h, writer=True))
        self.writerAlpha.setObjectName("circuitWriterAlpha")
        self.readerAlpha = _Picture(lambda w, h: self._alpha_svg(w, h, writer=False))
        self.readerAlpha.setObjectName("circuitReaderAlpha")
        for picture in (self.writerAlpha, self.readerAlpha):
            picture.setMinimumSize(140, 140)

    def _lay_out(self) -> None:
        """The run line on top, the message, then the graph beside k and the tabs."""
        run = QtWidgets.QHBoxLayout()
        for w in (self.taskBox, self.methodBox, self.gradientBox, self.pairsBox, self.runButton):
            run.addWidget(w)
        run.addWidget(self.progress, 1)
        run.addWidget(self.cancelButton)
        k = QtWidgets.QHBoxLayout()
        k.addWidget(self.kLabel)
        k.addWidget(self.kSlider, 1)
        edge = QtWidgets.QWidget()
        maps = QtWidgets.QHBoxLayout()
        maps.addWidget(self.writerAlpha)
        maps.addWidget(self.readerAlpha)
        edge_layout = QtWidgets.QVBoxLayout(edge)
        edge_layout.setContentsMargins(0, 0, 0, 0)
        edge_layout.addWidget(self.edgeInfo)
        edge_layout.addLayout(maps, 1)
        self.tabs = QtWidgets.QTabWidget()
        self.tabs.setObjectName("circuitTabs")
        self.tabs.addTab(self.curve, "Faithfulness")
        self.tabs.addTab(edge, "Edge")
        side = QtWidgets.QVBoxLayout()
        side.addLayout(k)
        side.addWidget(self.tabs, 1)
        side.addWidget(self.edgesLabel)
        body = QtWidgets.QHBoxLayout()
        body.addWidget(self.graphScroll, 3)
        body.addLayout(side, 2)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(run)
        layout.addWidget(self.message)
        layout.addLayout(body, 1)

    def _connect(self) -> None:
        """The task thread, the buttons, the slider and the graph to what they do."""
        self.tasks = TaskThread("attn-gui circuit", self)
        self.tasks.done.connect(self._on_done)
        self._progress.connect(self._on_progress)
        self._estimated.connect(self._on_estimate)
        self.runButton.clicked.connect(self.run)
        self.cancelButton.clicked.connect(self.cancel)
        self.kSlider.valueChanged.connect(self._show_k)
        self.graph.clicked.connect(self._on_graph_click)

    def follow(self, state: ViewState) -> None:
        """Follow the window's view state: its model and sentence."""
        self._follow(state.config)

    def _follow(self, config: AttentionConfig | None) -> None:
        """Take the view state's model; a model that is not a decoder disables Run and says why."""
        decoder = config is not None and plan(config).can.intervene
        self.config = config if decoder else None
        model = self.config.model if self.config is not None else None
        if self._running and model != self._run_model:  # its circuit would belong to another model
            self._cancel = True
        if self.found is not None and model != self._found_model:
            self._drop()
            self.message.setText("The model changed; the circuit of the last one is dropped.")
        self.runButton.setEnabled(decoder and not self._running)
        if not decoder:
            self.message.setText("Circuits need a decoder model: they patch what each head writes into what each "
                                 "later head and the logits read. Choose SmolLM2-135M under Source → weights, "
                                 "or a checkpoint of attn-gui train.")
        elif self.message.text().startswith("Circuits need"):
            self.message.setText("")

    def run(self) -> None:
        """Find the circuit of the view's model on the chosen task, off the GUI thread."""
        if self.config is None or self._running:
            return
        config = self.config  # its plan's source reads the task's tokens
        model, task, method, pairs = (config.model, self.taskBox.currentText().strip(),
                                      self.methodBox.currentText(), self.pairsBox.value())
        assert model is not None  # follow keeps a config only with a decoder model
        at = self.gradientBox.currentData() if method == "eap" else "clean"
        self._running, self._cancel, self._run_model = True, False, model
        self.runButton.setEnabled(False)
        self.cancelButton.setEnabled(True)
        self.progress.setRange(0, 0)
        self.message.setText(f"Finding the circuit of {task} by {method} over {pairs} pairs …")

        def work():
            try:
                prepared = prepare(model, task, pairs=pairs)
                found = circuit(model, task, method, pairs=pairs, progress=self._progress.emit,
                                cancelled=lambda: self._cancel, prepared=prepared, estimate=self._estimated.emit,
                                gradient_at=at)
            except Cancelled:
                return None
            ids = prepared.task.pairs[0].clean
            vocab = plan(config).source.tokenize("").vocab
            return found, (prepared.split, ids, [vocab[i] if i < len(vocab) else str(i) for i in ids])
        self.tasks.start(("circuit", model), work)

    def cancel(self) -> None:
        """Stop the run after the forward in work: while the edges are scored the last circuit stays shown; once they
        are, they are shown with the faithfulness curve's points measured so far."""
        self._cancel = True

    @QtCore.Slot(float, int)
    def _on_estimate(self, seconds: float, points: int) -> None:
        if not self._running:
            return
        text = f"Edges found; {curve_estimate(seconds, points)}. Cancel keeps the edges and the points measured."
        self.message.setText(text)
        self.curveEstimated.emit(text)

    @QtCore.Slot(int, int, str)
    def _on_progress(self, done: int, total: int, what: str) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat(f"{what} %v/%m")

    @QtCore.Slot(object, object)
    def _on_done(self, token, outcome) -> None:
        if token[0] != "circuit":
            self._on_edge(token, outcome)
            return
        model = self.config.model if self.config is not None else None
        self._running = False
        self.runButton.setEnabled(self.config is not None)
        self.cancelButton.setEnabled(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")
        if token[1] != model:  # the model changed during the run: its circuit is not this model's
            self.message.setText("The model changed during the run; its circuit is dropped.")
        elif outcome is None:
            self.message.setText("Cancelled; the last circuit stays.")
        elif isinstance(outcome, Exception):  # a UserError names what is wrong; the last good circuit stays
            self.message.setText(str(outcome).splitlines()[0])
        else:
            found, self._prompt = outcome
            self.show_circuit(found)
            f = found.faithfulness
            if f is not None and not f.complete:
                self.message.setText(f"Cancelled: the edges found are shown, with the faithfulness curve's "
                                     f"{len(f.ks)} points measured by then (no smallest circuit searched).")
        self.circuitDone.emit()

    def show_circuit(self, found: Circuit) -> None:
        """Draw ``found``: the slider runs over its edges (at most 200), the curve beside."""
        self.found, self.seen = found, None
        self._found_model = None if self.config is None else self.config.model  # the view's model found it
        f = found.faithfulness
        small = "" if f is None else (f"; {f.smallest} edges recover {f.target:.0%}" if f.smallest is not None
                                      else f"; no circuit recovers {f.target:.0%}")
        at = f" (gradient at the {found.gradient_at} prompt)" if found.method == "eap" else ""
        self.message.setText(f"{found.method}{at} on {found.task}, {found.pairs} pairs: {found.metric} "
                             f"{found.clean:.3g} clean, {found.corrupt:.3g} corrupted{small}. Click a head to "
                             f"open its maps.")
        self.kSlider.blockSignals(True)
        self.kSlider.setRange(1, max(1, min(200, found.graph.n_edges)))
        self.kSlider.setValue(min(DEFAULT_K, self.kSlider.maximum()))
        self.kSlider.blockSignals(False)
        self.graph.set_readable(*readable_size(found.graph))  # its nodes and labels apart: the view scrolls
        self._show_k()
        self.curve.redraw()
        self.edgeInfo.setText(ASK)
        self.writerAlpha.redraw()
        self.readerAlpha.redraw()

    def _drop(self) -> None:
        """Show no circuit (the one shown belongs to a model the view left)."""
        self.found, self.seen, self._prompt, self._found_model = None, None, None, None
        self.edgesLabel.setText("")
        self.edgeInfo.setText(ASK)
        for picture in (self.graph, self.curve, self.writerAlpha, self.readerAlpha):
            picture.redraw()

    def _show_k(self) -> None:
        k = self.kSlider.value()
        self.kLabel.setText(f"top {k} edges")
        if self.found is not None:
            rows = top_edges(self.found, min(k, 5))
            self.edgesLabel.setText("\n".join(f"{e.score:+9.3g}  {e.writer} → {e.reader}" for e in rows))
        self.graph.redraw()

    def _graph_svg(self, width: int, height: int) -> str | None:
        if self.found is None:
            return None
        seen, g = self.seen, self.found.graph
        chosen = None if seen is None else (g.find_writer(seen.writer), g.find_reader(seen.reader))
        return graph_svg(self.found, self.kSlider.value(), width, height, short=True, chosen=chosen)

    def _curve_svg(self, width: int, height: int) -> str | None:
        f = None if self.found is None else self.found.faithfulness
        return None if f is None else faithfulness_svg(f, width, height, title="Recovered over k")

    def _on_graph_click(self, x: float, y: float) -> None:
        if self.found is None:
            return
        g = self.found.graph
        edge = pick_edge(self.found, self.kSlider.value(), x, y, self.graph.width(), self.graph.height())
        # over an edge, only a node's middle opens its head: an edge's click opened the head under it
        u = pick_writer(g, x, y, self.graph.width(), self.graph.height(), middle=edge is not None)
        head = None if u is None else g.writer_head(u)
        if u is not None and head is not None:
            self.headPicked.emit(g.writer_layer(u), head)
        elif edge is not None:
            self.show_edge(*edge)

    def show_edge(self, writer: int, reader: int) -> None:
        """Look at edge ``writer`` -> ``reader`` (graph indices) of the circuit shown, off the GUI thread: the Edge
        tab comes to the front and ``edgeShown`` follows."""
        if self.found is None or self._prompt is None:
            return
        found, (split, ids, _) = self.found, self._prompt
        g = found.graph
        self.tabs.setCurrentIndex(1)
        self.edgeInfo.setText(f"Looking at {g.writer_names[writer]} → {g.reader_names[reader]} …")
        self.tasks.start(("edge", found), lambda: look(split, found.scores, writer, reader, ids))

    def _on_edge(self, token, outcome) -> None:
        if token[1] is not self.found:  # a look at the circuit shown before this one
            return
        if isinstance(outcome, Exception):
            self.edgeInfo.setText(str(outcome).splitlines()[0])
            self.edgeShown.emit("", "")
            return
        seen: EdgeLook = outcome
        self.seen = seen
        found = self.found
        assert found is not None
        lines = [f"<b>{seen.writer} → {seen.reader}</b>: {found.method.upper()} score {seen.score:+.4g} "
                 f"({found.metric}; rank {found.rank(seen.writer, seen.reader)} of {found.graph.n_edges})."]
        if seen.composition:
            heads = ", ".join(f"H{h + 1} {c:.3f}" for h, c in zip(seen.heads, seen.composition, strict=True))
            lines.append(f"{seen.kind}-composition (Elhage et al. 2021, from the weights): "
                         f"{heads if len(seen.heads) > 1 else f'{seen.composition[0]:.3f}'} "
                         "(0: the reader's input ignores what the writer writes; 1 at most).")
        else:
            lines.append("A composition score needs a head at both ends (into a query, key or value).")
        self.edgeInfo.setText("<br>".join(lines))
        self.writerAlpha.redraw()
        self.readerAlpha.redraw()
        self.graph.redraw()
        self.edgeShown.emit(seen.writer, seen.reader)

    def _alpha_svg(self, width: int, height: int, writer: bool) -> str | None:
        seen = self.seen
        if seen is None or self._prompt is None:
            return None
        alpha, head = (seen.writer_alpha, seen.writer_head) if writer else (seen.reader_alpha, seen.reader_head)
        if alpha is None or head is None:
            return None
        role = "writer" if writer else "reader"
        return alpha_svg(alpha.tolist(), self._prompt[2], f"{role} L{head[0] + 1}H{head[1] + 1}: α", width, height)

    def shutdown(self) -> None:
        """Stop the thread (the window closes)."""
        self._cancel = True
        self.tasks.shutdown()

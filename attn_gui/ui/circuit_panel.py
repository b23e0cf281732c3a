"""The Circuit dock: which heads talk to which (``engine.circuits``), found off the GUI thread and drawn as the
layered graph of its top k edges (``present.circuits``) beside the faithfulness curve.

The dock reads the view state's model only; it asks the window to open a head (``headPicked``) when one is clicked,
so the maps and the Why dock follow the one truth. A run can be cancelled between its forwards; a failed run says
why in one line and leaves the last circuit shown.
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtSvgWidgets import QSvgWidget

from ..engine import AttentionConfig
from ..engine.circuits import BUILT_IN, METHODS, Cancelled, Circuit, circuit
from ..engine.sources import source
from ..present.circuits import faithfulness_svg, graph_svg, pick_writer, top_edges
from .worker import TaskThread

DEFAULT_K = 20
DEFAULT_PAIRS = 20  # a run of a few seconds on SmolLM2; the CLI's default is 50


class _Picture(QSvgWidget):
    """An SVG drawn at the widget's own size (re-made on resize by ``make``), telling where it was clicked."""

    clicked = QtCore.Signal(float, float)

    def __init__(self, make=None, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.make = make  # (width, height) -> SVG text, or None for an empty picture

    def redraw(self) -> None:
        svg = self.make(self.width(), self.height()) if self.make is not None else None
        self.load(QtCore.QByteArray((svg or '<svg xmlns="http://www.w3.org/2000/svg"/>').encode("utf-8")))

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self.redraw()

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 (Qt's name)
        self.clicked.emit(event.position().x(), event.position().y())


class CircuitPanel(QtWidgets.QWidget):
    """Task, method and pairs; Run and Cancel; the graph with its k slider; the faithfulness curve.

    Signals
    -------
    headPicked(int, int)
        A head of the graph was clicked: open that layer and head (0-based) in the main view.
    circuitDone()
        A run ended: shown, failed (the message says why) or cancelled.
    """

    headPicked = QtCore.Signal(int, int)
    circuitDone = QtCore.Signal()
    _progress = QtCore.Signal(int, int, str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.config: AttentionConfig | None = None
        self.found: Circuit | None = None
        self._running = False
        self._cancel = False
        self.taskBox = QtWidgets.QComboBox()
        self.taskBox.setObjectName("circuitTask")
        self.taskBox.setEditable(True)  # a built-in task or the path of a JSONL file of pairs
        self.taskBox.addItems(list(BUILT_IN))
        self.taskBox.setToolTip("A built-in task, or the path of a .jsonl file of pairs "
                                '({"clean": ..., "corrupt": ..., "answer": ..., "wrong": ...} a line)')
        self.methodBox = QtWidgets.QComboBox()
        self.methodBox.setObjectName("circuitMethod")
        self.methodBox.addItems(list(METHODS))
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
        self.graph.setMinimumSize(320, 220)
        self.curve = _Picture(self._curve_svg)
        self.curve.setObjectName("circuitCurve")
        self.curve.setMinimumSize(260, 150)

        run = QtWidgets.QHBoxLayout()
        for w in (self.taskBox, self.methodBox, self.pairsBox, self.runButton):
            run.addWidget(w)
        run.addWidget(self.progress, 1)
        run.addWidget(self.cancelButton)
        k = QtWidgets.QHBoxLayout()
        k.addWidget(self.kLabel)
        k.addWidget(self.kSlider, 1)
        side = QtWidgets.QVBoxLayout()
        side.addLayout(k)
        side.addWidget(self.curve, 1)
        side.addWidget(self.edgesLabel)
        body = QtWidgets.QHBoxLayout()
        body.addWidget(self.graph, 3)
        body.addLayout(side, 2)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(run)
        layout.addWidget(self.message)
        layout.addLayout(body, 1)

        self.tasks = TaskThread("attn-gui circuit", self)
        self.tasks.done.connect(self._on_done)
        self._progress.connect(self._on_progress)
        self.runButton.clicked.connect(self.run)
        self.cancelButton.clicked.connect(self.cancel)
        self.kSlider.valueChanged.connect(self._show_k)
        self.graph.clicked.connect(self._on_graph_click)
        self.follow(None)
        self._show_k()

    def follow(self, config: AttentionConfig | None) -> None:
        """Take the view state's model; a model that is not a decoder disables Run and says why."""
        decoder = config is not None and config.model is not None and hasattr(source(config.model), "decoder")
        self.config = config if decoder else None
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
        model, task, method, pairs = (self.config.model, self.taskBox.currentText().strip(),
                                      self.methodBox.currentText(), self.pairsBox.value())
        assert model is not None  # follow keeps a config only with a decoder model
        self._running, self._cancel = True, False
        self.runButton.setEnabled(False)
        self.cancelButton.setEnabled(True)
        self.progress.setRange(0, 0)
        self.message.setText(f"Finding the circuit of {task} by {method} over {pairs} pairs …")

        def work():
            try:
                return circuit(model, task, method, pairs=pairs, progress=self._progress.emit,
                               cancelled=lambda: self._cancel)
            except Cancelled:
                return None
        self.tasks.start("circuit", work)

    def cancel(self) -> None:
        """Stop the run after the forward in work; the last circuit stays shown."""
        self._cancel = True

    @QtCore.Slot(int, int, str)
    def _on_progress(self, done: int, total: int, what: str) -> None:
        self.progress.setRange(0, total)
        self.progress.setValue(done)
        self.progress.setFormat(f"{what} %v/%m")

    @QtCore.Slot(object, object)
    def _on_done(self, token, outcome) -> None:
        self._running = False
        self.runButton.setEnabled(self.config is not None)
        self.cancelButton.setEnabled(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")
        if outcome is None:
            self.message.setText("Cancelled; the last circuit stays.")
        elif isinstance(outcome, Exception):  # a UserError names what is wrong; the last good circuit stays
            self.message.setText(str(outcome).splitlines()[0])
        else:
            self.show_circuit(outcome)
        self.circuitDone.emit()

    def show_circuit(self, found: Circuit) -> None:
        """Draw ``found``: the slider runs over its edges (at most 200), the curve beside."""
        self.found = found
        f = found.faithfulness
        small = "" if f is None else (f"; {f.smallest} edges recover {f.target:.0%}" if f.smallest is not None
                                      else f"; no circuit recovers {f.target:.0%}")
        self.message.setText(f"{found.method} on {found.task}, {found.pairs} pairs: {found.metric} "
                             f"{found.clean:.3g} clean, {found.corrupt:.3g} corrupted{small}. Click a head to "
                             f"open its maps.")
        self.kSlider.blockSignals(True)
        self.kSlider.setRange(1, max(1, min(200, found.graph.n_edges)))
        self.kSlider.setValue(min(DEFAULT_K, self.kSlider.maximum()))
        self.kSlider.blockSignals(False)
        self._show_k()
        self.curve.redraw()

    def _show_k(self) -> None:
        k = self.kSlider.value()
        self.kLabel.setText(f"top {k} edges")
        if self.found is not None:
            rows = top_edges(self.found, min(k, 5))
            self.edgesLabel.setText("\n".join(f"{e.score:+9.3g}  {e.writer} → {e.reader}" for e in rows))
        self.graph.redraw()

    def _graph_svg(self, width: int, height: int) -> str | None:
        return None if self.found is None else graph_svg(self.found, self.kSlider.value(), width, height, short=True)

    def _curve_svg(self, width: int, height: int) -> str | None:
        f = None if self.found is None else self.found.faithfulness
        return None if f is None else faithfulness_svg(f, width, height, title="Recovered over k")

    def _on_graph_click(self, x: float, y: float) -> None:
        if self.found is None:
            return
        g = self.found.graph
        u = pick_writer(g, x, y, self.graph.width(), self.graph.height())
        head = None if u is None else g.writer_head(u)
        if u is not None and head is not None:
            self.headPicked.emit(g.writer_layer(u), head)

    def shutdown(self) -> None:
        """Stop the thread (the window closes)."""
        self._cancel = True
        self.tasks.shutdown()

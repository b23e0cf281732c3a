"""The Train dock: train a tiny decoder on a toy task off the GUI thread and watch its heads form.

A ``TaskThread`` owns the ``Trainer`` (``TrainRun``) and runs a few steps per task; the
panel queues the next task when one is done, so Pause takes effect within a few steps and
the GUI thread only draws what each task returns: loss and accuracy, every head's alpha on the
task's fixed probe sequence (one image, layers as rows and heads as columns), and each
layer's best previous-token and induction score against the step.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from ...engine.base.errors import UserError
from ...engine.train.tasks import TASKS
from ...engine.train.loop import Trainer, head_scores
from ...engine.train.model import TrainConfig
from ...present.formats import time_left
from ..worker import TaskThread
from . import DockPanel

PROBE_EVERY = 10  # steps between redraws of the heads and their scores
BATCH_OF_STEPS = 5  # steps per task on the thread (one report each)
LEGEND_MARGIN = 6  # pixels between the scores' legend and 1


class TrainRun:
    """The run the worker thread owns: every method is called there, one after another."""

    def __init__(self):
        self.trainer: Trainer | None = None

    def reset(self, config: TrainConfig) -> tuple:
        self.trainer = Trainer(config)
        return [], self.probe()

    def steps(self, n: int, last: bool) -> tuple:
        """``n`` steps: their records, and the heads when a redraw is due or this is the ``last`` chunk."""
        records = list(self.trainer.run(n))
        due = last or records[-1].step % PROBE_EVERY < n
        return records, self.probe() if due else None

    def probe(self) -> tuple:
        batch, alphas = self.trainer.probe()
        scores = {name: v.numpy() for name, v in head_scores(alphas, batch).items()}
        return self.trainer.steps, alphas.numpy(), scores


def head_mosaic(alphas: np.ndarray, gap: int = 1) -> np.ndarray:
    """alpha (L, h, T, T) as one image: layer l's head i at row block l, column block i, NaN gaps."""
    L, h, T, _ = alphas.shape
    out = np.full((L * (T + gap) - gap, h * (T + gap) - gap), np.nan, dtype=np.float32)
    for layer in range(L):
        for head in range(h):
            r, c = layer * (T + gap), head * (T + gap)
            out[r:r + T, c:c + T] = alphas[layer, head]
    return out


class TrainPanel(DockPanel, QtWidgets.QWidget):
    """Controls, curves and heads of one training run."""

    stopped = QtCore.Signal()  # a Start or Step came to its end or was paused
    openRequested = QtCore.Signal(str, str)  # a saved checkpoint's folder and the probe as a sentence

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QtWidgets.QHBoxLayout(self)
        layout.addLayout(self._build_controls())
        layout.addWidget(self._build_plots(), 1)

        self._steps: list[int] = []
        self._loss: list[float] = []
        self._acc: list[float] = []
        self._scores: dict[tuple[str, int], tuple[list[int], list[float], pg.PlotDataItem]] = {}
        self.running = False
        self.step_count = 0
        self.run_state = TrainRun()
        self.tasks = TaskThread("attn-gui train", self)
        self.tasks.done.connect(self._on_done)
        self.pause = False
        self._left = 0  # steps still to run for this Start or Step
        self._fresh = False  # the thread holds a run made from the controls
        self._pace: tuple[float, int] | None = None  # when this Start began, and at which step
        self.folder: Path | None = None  # this run's checkpoints (its own temporary folder: made on first save)
        self.start.clicked.connect(self._start)
        self.stepButton.clicked.connect(lambda: self._run(1))
        self.pauseButton.clicked.connect(self._pause)
        self.resetButton.clicked.connect(self.reset)
        self.openButton.clicked.connect(self.open_in_explorer)

    def _build_controls(self) -> QtWidgets.QVBoxLayout:
        """The left column: the run's settings two pairs a row, the buttons and the message."""
        self.task = QtWidgets.QComboBox()
        self.task.addItems(TASKS)
        self.task.setCurrentText("induction")
        self.layers, self.heads = self._spin(1, 4, 2), self._spin(1, 8, 2)
        self.d_model, self.symbols = self._spin(16, 256, 32), self._spin(2, 64, 8)
        self.length, self.seed = self._spin(4, 128, 16), self._spin(0, 2**31 - 1, 0)
        self.target = self._spin(1, 10_000_000, 2000)
        self.target.setToolTip("Start trains up to this step; the message under the buttons says the time left")
        self.lr = QtWidgets.QDoubleSpinBox(decimals=4, minimum=0.0001, maximum=1.0, singleStep=0.001, value=0.01)
        self.mlp = QtWidgets.QCheckBox("MLP")
        self.positions = QtWidgets.QComboBox()
        for text, value, tip in (("RoPE (Llama)", "rope", "rotary positions; saved as a Llama checkpoint"),
                                 ("learned (GPT-2)", "learned", "learned position embeddings, LayerNorm, biases, "
                                                                "tied head; saved as a GPT-2 checkpoint")):
            self.positions.addItem(text, value)
            self.positions.setItemData(self.positions.count() - 1, tip, QtCore.Qt.ItemDataRole.ToolTipRole)
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("trainMessage")
        self.message.setWordWrap(True)
        form = QtWidgets.QGridLayout()  # two pairs a row: the dock fits 768 px screens without scrolling
        pairs = (("Task", self.task), ("Positions", self.positions), ("Layers", self.layers), ("Heads", self.heads),
                 ("d_model", self.d_model), ("Symbols", self.symbols), ("Length", self.length),
                 ("Learning rate", self.lr), ("Seed", self.seed), ("Steps", self.target), ("", self.mlp))
        for i, (label, widget) in enumerate(pairs):
            form.addWidget(QtWidgets.QLabel(label), i // 2, 2 * (i % 2))
            form.addWidget(widget, i // 2, 2 * (i % 2) + 1)
        self.timeLeft = QtWidgets.QLabel()  # beside MLP: in sight on a 768 px screen, where the message is not
        self.timeLeft.setObjectName("trainTimeLeft")
        form.addWidget(self.timeLeft, len(pairs) // 2, 2, 1, 2)
        buttons = QtWidgets.QGridLayout()
        self.start, self.pauseButton = QtWidgets.QPushButton("Start"), QtWidgets.QPushButton("Pause")
        self.stepButton, self.resetButton = QtWidgets.QPushButton("Step"), QtWidgets.QPushButton("Reset")
        self.openButton = QtWidgets.QPushButton("Open in the explorer")
        for i, b in enumerate((self.start, self.pauseButton, self.stepButton, self.resetButton)):
            buttons.addWidget(b, 0, i)
        buttons.addWidget(self.openButton, 1, 0, 1, 4)
        left = QtWidgets.QVBoxLayout()
        left.addLayout(form)
        left.addLayout(buttons)
        left.addWidget(self.message)
        left.addStretch(1)
        return left

    def _build_plots(self) -> QtWidgets.QSplitter:
        """The loss and accuracy curves, α of every head on the probe, and the heads' scores by step."""
        self.curves = pg.PlotWidget(title="loss (blue), accuracy (orange)")
        self.curves.setLabel("bottom", "step")
        self.lossCurve = self.curves.plot(pen=pg.mkPen("#1f77b4", width=2))
        self.accCurve = self.curves.plot(pen=pg.mkPen("#ff7f0e", width=2))
        self.metrics = pg.PlotWidget(title="previous (solid), induction (dashed)")
        self.metrics.setLabel("bottom", "step")
        self.metrics.setYRange(0, 1, padding=0)
        # which colour is which layer: a legend in two columns, in a band above 1 that no score reaches
        self.metrics.addLegend(offset=(4, 1), labelTextSize="8pt", colCount=2, verSpacing=-8)
        self.metrics.getAxis("left").setTicks([[(v / 5, f"{v / 5:g}") for v in range(6)]])  # 0 ... 1
        self.metrics.getPlotItem().vb.sigResized.connect(self._fit_legend)
        self.heads_view = pg.PlotWidget(title="α on the probe: layer ↓ head →")
        self.heads_view.invertY(True)
        self.heads_view.setAspectLocked(True)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(pg.colormap.get("viridis").getLookupTable(0, 1, 256))
        self.heads_view.addItem(self.image)
        plots = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        for w in (self.curves, self.heads_view, self.metrics):
            plots.addWidget(w)
        return plots

    @staticmethod
    def _spin(low: int, high: int, value: int) -> QtWidgets.QSpinBox:
        return QtWidgets.QSpinBox(minimum=low, maximum=high, value=value)

    def config(self) -> TrainConfig:
        return TrainConfig(task=self.task.currentText(), symbols=self.symbols.value(), length=self.length.value(),
                           layers=self.layers.value(), heads=self.heads.value(), d_model=self.d_model.value(),
                           mlp=self.mlp.isChecked(), lr=self.lr.value(), seed=self.seed.value(), batch=64,
                           positions=self.positions.currentData())

    def reset(self) -> None:
        """A fresh run from the controls' settings (a bad setting is said, the old run kept)."""
        if self.running:
            self.message.setText("Pause before resetting.")
            return
        try:
            config = self.config()
        except UserError as exc:
            self.message.setText(str(exc))
            return
        self.message.setText("")
        self.timeLeft.setText("")
        self._steps, self._loss, self._acc = [], [], []
        self.lossCurve.setData([], [])
        self.accCurve.setData([], [])
        for _, _, item in self._scores.values():
            self.metrics.removeItem(item)
        self._scores = {}
        self._fit_legend()
        self.step_count = 0
        self.folder = None  # a new run saves into a folder of its own
        self.tasks.start("reset", lambda: self.run_state.reset(config))
        self._fresh = True

    def _start(self) -> None:
        """Train up to the Steps box's step (Pause stops sooner; Start again goes on)."""
        if self._fresh and self.step_count >= self.target.value():
            self.message.setText(f"The run is at step {self.step_count:,}: raise Steps to train on.")
            return
        self._run(self.target.value() - (self.step_count if self._fresh else 0))

    def _run(self, steps: int) -> None:
        if self.running:
            return
        if not self._fresh:
            self.reset()
            if not self._fresh:
                return
        self.running, self.pause, self._left = True, False, steps
        self._pace = (time.perf_counter(), self.step_count) if steps > 1 else None
        self._next_chunk()

    def _next_chunk(self) -> None:
        n = min(BATCH_OF_STEPS, self._left)
        self._left -= n
        last = self._left == 0
        self.tasks.start("steps", lambda: self.run_state.steps(n, last))

    def _pause(self) -> None:
        self.pause = True

    @QtCore.Slot(object, object)
    def _on_done(self, token, outcome) -> None:
        if isinstance(outcome, Exception):
            self.message.setText(str(outcome).splitlines()[0])
            self.running = False
            self.stopped.emit()
            return
        if token == "save":
            self.openRequested.emit(*outcome)
            return
        records, probe = outcome
        if records:
            self._on_records(records)
        if probe is not None:
            self._on_probe(*probe)
        if token == "steps":
            if self._left > 0 and not self.pause:
                self._next_chunk()
            else:
                self.running = False
                self.timeLeft.setText("")
                self.stopped.emit()

    def open_in_explorer(self) -> None:
        """Save the current checkpoint into this run's temporary folder (``folder``: one per run, so that two
        windows never write into each other's); the window opens it as its model, on the probe sequence written
        as a sentence of the task's words (``openRequested``)."""
        if not self._fresh:
            self.message.setText("Train first: there is no model yet.")
            return
        self.pause = True
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="attn-gui-train-"))
        folder = self.folder / f"step-{self.step_count}"
        run = self.run_state  # read on the worker, as every other use of the run
        self.tasks.start("save", lambda: (str(run.trainer.save(folder)), run.trainer.task.sentence(
            run.trainer.task.probe().inputs[0])))

    def _on_records(self, records) -> None:
        for r in records:
            self._steps.append(r.step)
            self._loss.append(r.loss)
            self._acc.append(r.accuracy)
        self.step_count = records[-1].step
        self.lossCurve.setData(self._steps, self._loss)
        self.accCurve.setData(self._steps, self._acc)
        last = records[-1]
        text = f"step {last.step}: loss {last.loss:.3f}, accuracy {last.accuracy:.2f}"
        if self._pace is not None and last.step > self._pace[1]:  # this Start's pace, the GUI's redraws included
            began, first = self._pace
            elapsed, done = time.perf_counter() - began, last.step - first
            text += f"\n{1000 * elapsed / done:.0f} ms a step"
            left = f"{time_left(elapsed, done, done + self._left)} to step {last.step + self._left:,}"
            text += f"; {left}" if self._left else ""
            self.timeLeft.setText(left.split(" to step")[0] if self._left else "")
            self.timeLeft.setToolTip(left if self._left else "")
        self.message.setText(text)

    def _on_probe(self, step: int, alphas, scores) -> None:
        self.image.setImage(head_mosaic(alphas), levels=(0, 1))
        L, h, T, _ = alphas.shape  # the axes name the blocks (layer, head), not the image's pixels
        self.heads_view.getAxis("left").setTicks([[((T + 1) * i + T / 2, f"layer {i + 1}") for i in range(L)]])
        self.heads_view.getAxis("bottom").setTicks([[((T + 1) * i + T / 2, f"head {i + 1}") for i in range(h)]])
        colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
        for name, style in (("previous", QtCore.Qt.PenStyle.SolidLine), ("induction", QtCore.Qt.PenStyle.DashLine)):
            best = np.nanmax(scores[name], axis=1) if not np.isnan(scores[name]).all() else None
            for layer in range(0 if best is None else len(best)):
                key = (name, layer)
                if key not in self._scores:
                    item = self.metrics.plot(pen=pg.mkPen(colours[layer], width=2, style=style),
                                             name=f"layer {layer + 1} {name}")
                    self._scores[key] = ([], [], item)
                    self._fit_legend()
                xs, ys, item = self._scores[key]
                xs.append(step)
                ys.append(float(best[layer]))
                item.setData(xs, ys)

    def _fit_legend(self) -> None:
        """The scores' plot from 0 to just above its legend's band: the legend's height in pixels over 1, where no
        score (a share of α) reaches, so that it never covers a curve."""
        plot = self.metrics.getPlotItem()
        height, band = plot.vb.height(), plot.legend.boundingRect().height() + LEGEND_MARGIN
        top = 1.0 / (1.0 - band / height) if plot.legend.items and height > 2 * band else 1.0
        plot.setYRange(0, top, padding=0)

    def shutdown(self) -> None:
        """Stop the run and its thread (the window closes)."""
        self.pause = True
        self.tasks.shutdown()

"""The Interventions dock: strike heads (the config's ``ablate``), see the next token before and after,
and fill the layer x head grid of each head's effect off the GUI thread (``engine.interventions``).

The struck heads are the view state's config: the dock only asks the window for a new config
(``ablateRequested``), so the controls' "ablated heads" box, sessions and the CLI stay one truth.
The grid runs on a ``TaskThread`` one layer per task, so Cancel takes effect after the layer in work.
"""

from __future__ import annotations

from html import escape

from PySide6 import QtCore, QtWidgets

from ...engine import AttentionConfig, UserError, format_heads, toggle_head
from ...engine.analysis import interventions as I
from ...engine.model.plan import plan
from ...present.maps import MapData
from ...present.state import ViewState
from ...render.heatmap import HeatmapView
from ..dock_scroll import grid_height
from ..worker import TaskThread
from . import DockPanel



def _bars(tokens: tuple[tuple[str, float], ...]) -> str:
    """The next tokens as text bars, one a line: "␣Paris   77.3 % ██████████"."""
    return "\n".join(f"{text[:12]:<12} {p * 100:5.1f} % {'█' * max(1, round(p * 20))}" for text, p in tokens)


class InterventionsPanel(DockPanel, QtWidgets.QWidget):
    """Strike heads, next tokens before and after, and the grid of every head's effect.

    Signals
    -------
    ablateRequested(tuple)
        The (layer, head) pairs (0-based) the user wants struck: the window puts them in the config.
    headPicked(int, int)
        A grid cell was clicked: open that layer and head (0-based) in the main view.
    gridDone()
        The grid was filled, or stopped by Cancel.
    """

    ablateRequested = QtCore.Signal(tuple)
    headPicked = QtCore.Signal(int, int)
    gridDone = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.config: AttentionConfig | None = None
        self.head = 0
        self.max_layers: int | None = None  # a test hook: stop the grid after this many layers
        self._grid_gen = None
        self._cancel = False
        self._build_controls()
        self._lay_out()
        self._connect()
        self._follow(None, 0)

    def _build_controls(self) -> None:
        """The struck heads, the strike and restore buttons, the bars before and after, the runs over every head
        (effect, patching) with their progress and message, and the grid of their results."""
        self.struckLabel = QtWidgets.QLabel()
        self.struckLabel.setObjectName("struckLabel")
        self.struckLabel.setWordWrap(True)
        self.strikeButton = QtWidgets.QPushButton("Strike the shown head")
        self.strikeButton.setObjectName("strikeButton")
        self.clearButton = QtWidgets.QPushButton("Restore all")
        self.clearButton.setObjectName("restoreButton")
        self.before = QtWidgets.QLabel()
        self.after = QtWidgets.QLabel()
        for label, name in ((self.before, "beforeBars"), (self.after, "afterBars")):
            label.setObjectName(name)
            label.setStyleSheet("font-family: monospace")
            label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.beforeTitle = QtWidgets.QLabel()
        self.afterTitle = QtWidgets.QLabel()
        self.effectButton = QtWidgets.QPushButton("Effect of every head")
        self.effectButton.setObjectName("effectButton")
        self.corruptBox = QtWidgets.QLineEdit()
        self.corruptBox.setObjectName("corruptInput")
        self.corruptBox.setPlaceholderText("A corrupted sentence, as many tokens: The capital of Italy is")
        self.patchButton = QtWidgets.QPushButton("Patch every head")
        self.patchButton.setObjectName("patchButton")
        self.patchButton.setToolTip("Run the corrupted sentence with one head's Z taken from the clean one, "
                                    "for every head: the fraction of the logit difference it recovers")
        self.cancelButton = QtWidgets.QPushButton("Cancel")
        self.cancelButton.setObjectName("cancelButton")
        self.cancelButton.setEnabled(False)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName("effectProgress")
        self.message = QtWidgets.QLabel()
        self.message.setObjectName("interventionMessage")
        self.message.setWordWrap(True)
        self.grid = HeatmapView("effects")
        self.grid.setObjectName("effectGrid")
        self.grid.setMinimumSize(260, 200)

    def _lay_out(self) -> None:
        """The tools on the left (hidden with a model that is not a decoder), the grid on the right."""
        strike = QtWidgets.QHBoxLayout()
        strike.addWidget(self.strikeButton)
        strike.addWidget(self.clearButton)
        bars = QtWidgets.QGridLayout()
        bars.addWidget(self.beforeTitle, 0, 0)
        bars.addWidget(self.afterTitle, 0, 1)
        bars.addWidget(self.before, 1, 0, QtCore.Qt.AlignmentFlag.AlignTop)
        bars.addWidget(self.after, 1, 1, QtCore.Qt.AlignmentFlag.AlignTop)
        run = QtWidgets.QHBoxLayout()
        run.addWidget(self.effectButton)
        run.addWidget(self.progress, 1)
        run.addWidget(self.cancelButton)
        patch = QtWidgets.QHBoxLayout()
        patch.addWidget(self.corruptBox, 1)
        patch.addWidget(self.patchButton)
        self.tools = QtWidgets.QWidget()  # hidden with a model that is not a decoder: the label says why
        tools = QtWidgets.QVBoxLayout(self.tools)
        tools.setContentsMargins(0, 0, 0, 0)
        tools.addLayout(strike)
        tools.addLayout(bars)
        tools.addLayout(patch)
        tools.addLayout(run)
        tools.addWidget(self.message)
        left = QtWidgets.QVBoxLayout()
        left.addWidget(self.struckLabel)
        left.addWidget(self.tools)
        left.addStretch(1)
        layout = QtWidgets.QHBoxLayout(self)
        layout.addLayout(left, 1)
        layout.addWidget(self.grid, 1)

    def _connect(self) -> None:
        """The task thread, the buttons and the grid to what they do."""
        self.tasks = TaskThread("attn-gui interventions", self)
        self.tasks.done.connect(self._on_done)
        self.strikeButton.clicked.connect(self._toggle_shown_head)
        self.clearButton.clicked.connect(lambda: self.ablateRequested.emit(()))
        self.effectButton.clicked.connect(self.run_effects)
        self.patchButton.clicked.connect(self.run_patching)
        self.cancelButton.clicked.connect(self.cancel)
        self.grid.scene().sigMouseClicked.connect(self._on_grid_click)

    def follow(self, state: ViewState) -> None:
        """Follow the window's view state: its config and head."""
        self._follow(state.config, state.head)

    def _follow(self, config: AttentionConfig | None, head: int) -> None:
        """Show ``config``'s struck heads and next tokens (computed on the thread); None: not a decoder."""
        decoder = config is not None and plan(config).can.intervene
        for w in (self.strikeButton, self.clearButton, self.effectButton, self.patchButton):
            w.setEnabled(decoder)
        self.tools.setVisible(decoder)  # no empty axes, bars or colour bar where there is nothing to show
        self.grid.setVisible(decoder)
        if not decoder:
            self.config = None
            self.struckLabel.setText("Interventions need a decoder model: they strike heads and read the next "
                                     "token it predicts. Choose SmolLM2-135M under Source → weights.")
            return
        changed = self.config is None or (config.model, config.sentence, config.ablate) != (
            self.config.model, self.config.sentence, self.config.ablate)
        self.config, self.head = config, head
        verb = "Strike" if (config.layer, head) not in config.ablate else "Restore"
        self.strikeButton.setText(f"{verb} head {config.layer + 1}.{head + 1} (layer {config.layer + 1}, "
                                  f"head {head + 1}: the one shown)")
        self.struckLabel.setText(f"Struck heads (layer.head): {format_heads(config.ablate) or 'none'}")
        if changed:
            self._show_titles("Next token, every head", "With the struck heads")
            self.tasks.start(("bars", config), lambda: self._next_tokens(config))

    def _show_titles(self, before: str, after: str) -> None:
        self.beforeTitle.setText(f"<b>{escape(before)}</b>")
        self.afterTitle.setText(f"<b>{escape(after)}</b>")

    @staticmethod
    def _next_tokens(config: AttentionConfig, other: AttentionConfig | None = None):
        """The top next tokens of ``config`` with no head struck, and of ``other`` (default: its struck heads)."""
        p = plan(config)
        after = I.ablate(p, config.ablate) if other is None else I.ablate(other, [])
        return p.source.top_tokens(I.ablate(p, []).logits), p.source.top_tokens(after.logits)

    def _toggle_shown_head(self) -> None:
        self.ablateRequested.emit(toggle_head(self.config.ablate, (self.config.layer, self.head)))

    def run_effects(self) -> None:
        """Fill the grid of Δ log p(top next token) per head, one layer per task, with progress and Cancel."""
        if self.config is not None:
            p = plan(self.config.replace(ablate=()))
            self._start_grid(I.head_effects(p),
                             lambda grid: f"Δ log p(“{p.source.token_text(grid.target)}”) "
                                          f"when one head is struck", "Δ log p")

    def run_patching(self) -> None:
        """Fill the grid of recovered fractions, patching each head from the clean sentence into the corrupted one.

        The clean and corrupted predictions show side by side; inputs of different token counts
        are refused with one line in the dock, and the last grid stays.
        """
        if self.config is None:
            return
        clean = self.config.replace(ablate=())
        try:
            corrupt = clean.replace(sentence=self.corruptBox.text())
        except UserError as exc:
            self.message.setText(str(exc))
            return
        self._show_titles(f"Clean: {clean.sentence[:40]}", f"Corrupted: {corrupt.sentence[:40]}")
        self.tasks.start(("patch bars", clean), lambda: self._next_tokens(clean, corrupt))
        self._start_grid(I.patch_effects(clean, corrupt),
                         lambda grid: "recovered fraction of the logit difference, one head patched", "recovered")

    def _start_grid(self, grid_gen, title, symbol: str) -> None:
        if self._grid_gen is not None:
            return
        self._grid_gen, self._title, self._symbol = grid_gen, title, symbol
        self._cancel = False
        self.effectButton.setEnabled(False)
        self.patchButton.setEnabled(False)
        self.cancelButton.setEnabled(True)
        self.progress.setRange(0, len(plan(self.config).layers))
        self.progress.setValue(0)
        self.message.setText("")
        self._next_layer()

    def _next_layer(self) -> None:
        gen = self._grid_gen
        self.tasks.start("grid", lambda: next(gen, None))

    def cancel(self) -> None:
        """Stop the grid after the layer in work; the layers done stay shown."""
        self._cancel = True

    def _stop(self, text: str) -> None:
        self._grid_gen = None
        self.effectButton.setEnabled(self.config is not None)
        self.patchButton.setEnabled(self.config is not None)
        self.cancelButton.setEnabled(False)
        self.message.setText(text)
        self.gridDone.emit()

    @QtCore.Slot(object, object)
    def _on_done(self, token, outcome) -> None:
        if isinstance(outcome, Exception):  # a UserError names what is wrong; the last good result stays
            if token == "grid":
                self._stop(str(outcome).splitlines()[0])
            else:
                self.message.setText(str(outcome).splitlines()[0])
            return
        if token != "grid":
            if token[0] == "patch bars" and self.config is not None and token[1] == self.config.replace(ablate=()):
                self.before.setText(_bars(outcome[0]))
                self.after.setText(_bars(outcome[1]))
            elif self.config is not None and token[1] == self.config:
                self.before.setText(_bars(outcome[0]))
                self.after.setText(_bars(outcome[1]) if self.config.ablate else "(no head struck)")
            return
        if outcome is None:
            self._stop("")
            return
        self._show_grid(outcome)
        if self._cancel or (self.max_layers is not None and outcome.done >= self.max_layers):
            self._stop(f"stopped after {outcome.done} of {outcome.total} layers")
        elif outcome.done == outcome.total:
            self._stop("")
        else:
            self._next_layer()

    def _show_grid(self, grid: I.Grid) -> None:
        values = grid.values.numpy()
        self.progress.setValue(grid.done)
        # a row per layer tall enough for its label and its values: the dock scrolls (30 layers: 620 px)
        self.grid.setMinimumHeight(grid_height(values.shape[0]))
        self.grid.set_data(MapData(values, self._title(grid), "signed",
                                   [f"layer {i + 1}" for i in range(values.shape[0])],
                                   [f"head {j + 1}" for j in range(values.shape[1])], symbol=self._symbol))

    def _on_grid_click(self, event) -> None:
        cell = self.grid.item.cell_at(event.scenePos())
        if cell is not None and self.grid.item.data is not None:
            self.headPicked.emit(*cell)

    def shutdown(self) -> None:
        """Stop the thread (the window closes)."""
        self._cancel = True
        self.tasks.shutdown()

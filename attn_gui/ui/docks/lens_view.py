"""The Why dock's Lenses view: the logit lens and the Jacobian lens of the shown sentence side by side.

Two tables, layer by position (``present.lenses``), the window's shown layer marked in both; a click on a cell
selects its position in both tables, marks in bold every cell of either whose top token is the clicked one (a
token followed across depth) and asks the window to show that layer (``layerPicked``; the Why dock passes it on
as it does its other clicks). A lens is loaded (a folder ``attn-gui lens fit`` wrote, or a TransformerLens .pt
file) or fitted here over a corpus, and checked against the shown model (``Lens.check``: a lens of another model
is refused in one line at the top of the view, the last good one stays). Reading, loading and fitting run on
threads of their own (``TaskThread``); a fit reports each shard to a progress bar and stops at Cancel, its
shards kept in the output folder (the same fit again resumes from them: ``engine.analysis.lens.fit``).
"""

from __future__ import annotations

import html

from PySide6 import QtCore, QtGui, QtWidgets

from ...engine import AttentionConfig
from ...engine.analysis.corpus.census import Progress
from ...engine.analysis.corpus.read import read_corpus
from ...engine.analysis.lens import artifact
from ...engine.analysis.lens.artifact import Lens
from ...engine.analysis.lens.fit import Fitted, fit_lens
from ...engine.analysis.lens.jacobian import LensSettings
from ...engine.analysis.lens.readout import LensReadout, read_lens
from ...engine.base.progress import Cancelled, Watch, watching
from ...engine.model.plan import plan
from ...present.lenses import NO_LENS, LensTable, about_lens, lens_tables
from ..worker import TaskThread

SHOWN = QtGui.QColor(255, 214, 102, 110)  # the window's shown layer: a row tinted in both tables


def _table(name: str) -> QtWidgets.QTableWidget:
    table = QtWidgets.QTableWidget()
    table.setObjectName(name)
    table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectColumns)
    table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
    table.setToolTip("Click a cell: its position is selected in both lenses, its top token is marked in bold "
                     "wherever either lens reads it, and the window shows that layer")
    return table


class LensView(QtWidgets.QWidget):
    """Both lenses of the shown sentence, the lens's load and fit controls, and the fit's progress.

    Signals
    -------
    layerPicked(int)
        A cell was clicked: show that layer (0-based) in the window.
    shown(str)
        "read" (the tables were drawn), "loaded", "fitted", "cancelled" or "refused" (the message says why).
    progressed(int, int)
        Passages done, of the corpus's, as each shard of a fit is kept (emitted on the fit's thread).
    """

    layerPicked = QtCore.Signal(int)
    shown = QtCore.Signal(str)
    progressed = QtCore.Signal(int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.config: AttentionConfig | None = None
        self.lens: Lens | None = None
        self.about = ""  # where the lens came from, one line
        self.readout: LensReadout | None = None
        self.tables: tuple[LensTable, LensTable] | None = None
        self.picked: tuple[int, int, int] | None = None  # (table, row, position) clicked
        self.watch: Watch | None = None  # the fit in progress
        self.loadButton = QtWidgets.QPushButton("Load lens…")
        self.loadButton.setObjectName("loadLensButton")
        self.loadButton.setToolTip("A folder written by attn-gui lens fit, or a lens .pt file (TransformerLens' "
                                   "JacobianLens.save format)")
        self.fitButton = QtWidgets.QPushButton("Fit on a corpus…")
        self.fitButton.setObjectName("fitLensButton")
        self.fitButton.setToolTip("Fit the shown model's Jacobian lens over a text file (one passage a line), "
                                  "JSONL or Parquet into a new or empty folder; a stopped fit resumes there")
        self.cancelButton = QtWidgets.QPushButton("Cancel")
        self.cancelButton.setObjectName("cancelFitButton")
        self.bar = QtWidgets.QProgressBar()
        self.bar.setObjectName("lensFitProgress")
        self.bar.setFormat("%v of %m passages")
        self.bar.setMinimumWidth(220)  # its text whole
        self.message = QtWidgets.QLabel(NO_LENS)
        self.message.setObjectName("lensMessage")
        self.message.setWordWrap(True)
        self.message.setAlignment(QtCore.Qt.AlignmentFlag.AlignTop | QtCore.Qt.AlignmentFlag.AlignLeft)  # no table
        self.message.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.logit, self.jacobian = _table("logitLensTable"), _table("jacobianLensTable")
        self.logitTitle, self.jacobianTitle = QtWidgets.QLabel("<b>Logit lens</b>"), QtWidgets.QLabel(
            "<b>Jacobian lens</b>")
        self._lay_out()
        self.reads = TaskThread("attn-gui lens", self)
        self.reads.done.connect(self._on_read)
        self.fits = TaskThread("attn-gui lens fit", self)
        self.fits.done.connect(self._on_fit)
        self.progressed.connect(self._on_progress)
        menu = QtWidgets.QMenu(self.loadButton)
        menu.addAction("A fit's folder…", self._choose_folder)
        menu.addAction("A lens .pt file…", self._choose_file)
        self.loadButton.setMenu(menu)
        self.fitButton.clicked.connect(self._choose_fit)
        self.cancelButton.clicked.connect(self.cancel)
        for table in (self.logit, self.jacobian):
            table.cellClicked.connect(self.pick)
        for a, b in ((self.logit, self.jacobian), (self.jacobian, self.logit)):  # the same positions in sight
            a.horizontalScrollBar().valueChanged.connect(b.horizontalScrollBar().setValue)
            a.verticalScrollBar().valueChanged.connect(b.verticalScrollBar().setValue)
        self._fitting(False)
        self._show_tables(False)

    def _lay_out(self) -> None:
        top = QtWidgets.QHBoxLayout()
        for w in (self.loadButton, self.fitButton, self.bar, self.cancelButton):
            top.addWidget(w)
        top.addStretch(1)
        grids = QtWidgets.QHBoxLayout()
        for title, table in ((self.logitTitle, self.logit), (self.jacobianTitle, self.jacobian)):
            column = QtWidgets.QVBoxLayout()
            column.addWidget(title)
            column.addWidget(table, 1)
            grids.addLayout(column, 1)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.message)
        layout.addLayout(grids, 1)

    def _show_tables(self, shown: bool) -> None:
        for w in (self.logit, self.jacobian, self.logitTitle, self.jacobianTitle):
            w.setVisible(shown)

    def _fitting(self, fitting: bool) -> None:
        self.bar.setVisible(fitting)
        self.cancelButton.setVisible(fitting)
        self.fitButton.setEnabled(not fitting)

    # what the dock calls ---------------------------------------------------------------------

    def follow(self, config: AttentionConfig | None) -> None:
        """Follow the window's config: a new model or sentence is read again, a new layer marked."""
        before, self.config = self.config, config
        if config is None:
            return
        if before is None or (config.model, config.sentence) != (before.model, before.sentence):
            self._read()
        elif config.layer != before.layer:
            self._mark()

    def load(self, path: str) -> None:
        """Load the lens at ``path`` and check it against the shown model, on the thread; a lens that does not
        fit is refused in one line (``shown("refused")``), the last good one stays."""
        if self.config is None:
            return
        config = self.config
        self.message.setText(f"loading {html.escape(path)}…")
        self.reads.start(("load", config, path), lambda: artifact.load(path).check(plan(config)))

    def fit(self, corpus: str, out: str, **options) -> None:
        """Fit the shown model's lens over ``corpus`` into folder ``out`` on the fit thread (``options``:
        ``LensSettings``'s, TransformerLens' defaults otherwise); progress, Cancel, and the lens read when done."""
        if self.config is None or self.config.model is None or self.watch is not None:
            return
        config, model, watch = self.config, self.config.model, Watch()
        self.watch = watch
        self.bar.setRange(0, 0)  # busy until the first shard is kept
        self._fitting(True)
        self.message.setText(f"fitting the Jacobian lens of {html.escape(model)} over "
                             f"{html.escape(corpus)} into {html.escape(out)}; the bar moves as each shard of "
                             f"{options.get('shard_size', LensSettings.shard_size)} passages is kept…")

        def report(p: Progress) -> None:
            self.progressed.emit(p.done, p.total)
            if watch.cancelled:  # the shard just kept stays; the next fit resumes after it
                raise Cancelled

        def run() -> Fitted | Cancelled:
            settings = LensSettings(model=model, device=config.device, **options)
            try:
                with watching(watch):  # a cancel also stops within a shard, at its next prompt's forward
                    return fit_lens(read_corpus(corpus), out, settings, progress=report)
            except Cancelled as stopped:
                return stopped

        self.fits.start(("fit", config, out), run)

    def cancel(self) -> None:
        """Stop the fit in progress (the shards kept stay in its folder)."""
        if self.watch is not None:
            self.watch.cancel()
            self.message.setText("cancelling the fit after the prompt in progress…")

    def shutdown(self) -> None:
        self.cancel()
        self.reads.shutdown()
        self.fits.shutdown()

    # the threads -----------------------------------------------------------------------------

    def _read(self) -> None:
        lens, config = self.lens, self.config
        if lens is None or config is None:
            return
        self.reads.start(("read", config, lens), lambda: read_lens(config, lens))

    def _current(self, config: AttentionConfig) -> bool:
        return self.config is not None and (config.model, config.sentence) == (self.config.model,
                                                                               self.config.sentence)

    @QtCore.Slot(object, object)
    def _on_read(self, token, outcome) -> None:
        kind, config, what = token
        if isinstance(outcome, Exception):
            if kind == "load" or self._current(config):
                self._refuse(str(outcome), clear=kind == "read")
            return
        if kind == "load":
            self.lens, self.about = outcome, about_lens(outcome.metadata, outcome.n_prompts, f"from {what}")
            self.shown.emit("loaded")
            self._read()
        elif self._current(config) and what is self.lens:
            self._draw(outcome)

    def _refuse(self, text: str, clear: bool) -> None:
        self.message.setText(html.escape((text.splitlines() or ["?"])[0]))
        if clear:  # a readout of this model no longer stands: no table of another's
            self.readout = self.tables = None
            self._show_tables(False)
        self.shown.emit("refused")

    @QtCore.Slot(int, int)
    def _on_progress(self, done: int, total: int) -> None:
        self.bar.setRange(0, total)
        self.bar.setValue(done)

    @QtCore.Slot(object, object)
    def _on_fit(self, token, outcome) -> None:
        _, config, out = token
        self.watch = None
        self._fitting(False)
        if isinstance(outcome, Cancelled):
            self.message.setText(f"Fit cancelled; its shards are kept in {html.escape(out)}: fit there again to "
                                 f"resume.")
            self.shown.emit("cancelled")
            return
        if isinstance(outcome, Exception):
            self._refuse(str(outcome), clear=False)
            return
        self.lens = outcome.lens
        self.about = about_lens(outcome.lens.metadata, outcome.lens.n_prompts, f"fitted into {out}")
        self.shown.emit("fitted")
        self._read()

    # drawing ---------------------------------------------------------------------------------

    def _draw(self, r: LensReadout) -> None:
        self.readout, self.tables, self.picked = r, lens_tables(r), None
        for table, data in zip((self.logit, self.jacobian), self.tables, strict=True):
            table.clear()
            table.setRowCount(len(data.rows))
            table.setColumnCount(len(data.columns))
            table.setHorizontalHeaderLabels(data.columns)
            table.setVerticalHeaderLabels(data.rows)
            for row, cells in enumerate(data.cells):
                for pos, cell in enumerate(cells):
                    item = QtWidgets.QTableWidgetItem(cell.text)
                    item.setToolTip(cell.tooltip)
                    table.setItem(row, pos, item)
            table.resizeColumnsToContents()
        for pos in range(len(self.tables[0].columns)):  # a column as wide in both: the positions line up
            width = max(self.logit.columnWidth(pos), self.jacobian.columnWidth(pos))
            for table in (self.logit, self.jacobian):
                table.setColumnWidth(pos, width)
        for table in (self.logit, self.jacobian):
            table.scrollToBottom()  # the last layers, where the answer forms
        self.logitTitle.setText(f"<b>{self.tables[0].title}</b>")
        self.jacobianTitle.setText(f"<b>{self.tables[1].title}</b>")
        self.message.setText(html.escape(self.about))
        self._show_tables(True)
        self._mark()
        self.shown.emit("read")

    def _mark(self) -> None:
        """Tint the shown layer's row and bold the picked token's cells, in both tables."""
        if self.tables is None or self.config is None:
            return
        shown = self.tables[0].row_of(self.config.layer)
        token = None
        if self.picked is not None:
            which, row, pos = self.picked
            token = self.tables[which].cells[row][pos].top
        for table, data in zip((self.logit, self.jacobian), self.tables, strict=True):
            for row, cells in enumerate(data.cells):
                label = table.verticalHeaderItem(row)
                if label is not None:
                    label.setText(("▶ " if row == shown else "") + data.rows[row])
                for pos, cell in enumerate(cells):
                    item = table.item(row, pos)
                    if item is None:
                        continue
                    item.setBackground(SHOWN if row == shown else QtGui.QBrush())
                    font = item.font()
                    font.setBold(token is not None and cell.top == token)
                    item.setFont(font)

    def pick(self, row: int, pos: int) -> None:
        """A cell of either table was clicked: select its position in both, follow its token, show its layer."""
        if self.tables is None:
            return
        self.picked = (1 if self.sender() is self.jacobian else 0, row, pos)
        for table in (self.logit, self.jacobian):
            table.selectColumn(pos)
        self._mark()
        self.layerPicked.emit(self.tables[0].layers[row])

    def _choose_folder(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Load a Jacobian lens: a folder attn-gui lens fit "
                                                                "wrote")
        if path:
            self.load(path)

    def _choose_file(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Load a Jacobian lens file", "",
                                                        "Lens files (*.pt);;All files (*)")
        if path:
            self.load(path)

    def _choose_fit(self) -> None:
        corpus, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Fit on a corpus: the passages", "", "Corpora (*.txt *.jsonl *.parquet);;All files (*)")
        if not corpus:
            return
        out = QtWidgets.QFileDialog.getExistingDirectory(self, "The fit's folder: new or empty, or an earlier fit "
                                                               "of the same corpus to resume")
        if out:
            self.fit(corpus, out)

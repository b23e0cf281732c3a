"""The Corpus dock: a census written by ``attn-gui corpus`` as a layer x head grid per statistic;
click a head for its top passages, double-click one to open it in the explorer at that head and query.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtWidgets

from ...engine import UserError
from ...engine.analysis.corpus.outputs import read_examples, read_heads, read_manifest
from ...present.maps import MapData
from ...render.heatmap import HeatmapView
from ..dock_scroll import grid_height
from . import DockPanel

COLUMNS = ("rank", "score", "query → key", "passage")
NO_CENSUS = ("<b>No census open.</b> A census is each head's statistics over many passages, with its top examples. "
             "Write one with <code>attn-gui corpus --model smollm2-135m --corpus passages.txt --out census</code> "
             "(a text file, one passage a line, or JSONL or Parquet), then <b>Open census…</b> here and choose the "
             "folder it wrote.")
SIGNED = frozenset({"dla"})  # statistics of either sign: a diverging map centred on 0


class CorpusPanel(DockPanel, QtWidgets.QWidget):
    """A census folder's grid for the chosen statistic and the clicked head's examples.

    Signals
    -------
    exampleOpened(str, str, int, int, int)
        An example was double-clicked: (model, passage text, layer, head, query), all 0-based;
        the window opens the passage with that model, layer, head and followed query token.
    """

    exampleOpened = QtCore.Signal(str, str, int, int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.folder: Path | None = None
        self.heads: dict[str, np.ndarray] = {}
        self.examples: list[dict] = []
        self.manifest: dict = {}
        self.picked: tuple[int, int] | None = None  # (layer, head), 0-based
        self.openButton = QtWidgets.QPushButton("Open census…")
        self.openButton.setObjectName("openCensusButton")
        self.openButton.setToolTip("A folder written by attn-gui corpus (heads.parquet, examples.parquet, "
                                   "manifest.json)")
        self.statistic = QtWidgets.QComboBox()
        self.statistic.setObjectName("statisticCombo")
        self.statisticLabel = QtWidgets.QLabel("statistic")
        self.about = QtWidgets.QLabel(NO_CENSUS)
        self.about.setObjectName("censusAbout")
        self.about.setWordWrap(True)
        self.about.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)  # the command
        self.grid = HeatmapView("corpus")
        self.grid.setObjectName("censusGrid")
        self.grid.setMinimumSize(260, 200)
        self.pickedLabel = QtWidgets.QLabel("Click a head in the grid for its top passages.")
        self.pickedLabel.setObjectName("pickedHeadLabel")
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("examplesTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setToolTip("Double-click an example to open it in the explorer at this head and query")
        # the grid and the table take the dock's height, at least a labelled row per layer for the grid
        for tall in (self.grid, self.table):
            tall.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Ignored)

        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.openButton)
        top.addWidget(self.statisticLabel)
        top.addWidget(self.statistic, 1)
        top.addStretch(0)  # with no census the button stands alone at the left
        left = QtWidgets.QVBoxLayout()
        left.addLayout(top)
        left.addWidget(self.grid, 1)
        right = QtWidgets.QVBoxLayout()
        right.addWidget(self.about)
        right.addWidget(self.pickedLabel)
        right.addWidget(self.table, 1)
        for column in (left, right):  # with no census, the button and the message stay at the top
            column.addStretch(0)
        layout = QtWidgets.QHBoxLayout(self)
        layout.addLayout(left, 2)
        layout.addLayout(right, 3)
        self._show_census(False)

        self.openButton.clicked.connect(self._choose)
        self.statistic.currentTextChanged.connect(lambda _: self._show())
        self.grid.scene().sigMouseClicked.connect(self._on_grid_click)
        self.table.cellDoubleClicked.connect(self._open_row)

    def _choose(self) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a census folder")
        if folder:
            self.load(folder)

    def load(self, folder: str | Path) -> bool:
        """Show the census in ``folder``; a folder that holds none is said in the dock (the last one stays)."""
        try:
            manifest = read_manifest(folder)
            heads, examples = read_heads(folder), read_examples(folder)
        except (UserError, OSError, ValueError) as exc:  # pyarrow's errors are OSError or ValueError
            self.about.setText(f"Cannot open {folder}: {str(exc).splitlines()[0] if str(exc) else exc}")
            return False
        self.folder, self.manifest, self.heads, self.examples = Path(folder), manifest, heads, examples
        self._show_census(True)
        names = [n for n in heads if n not in ("layer", "head", "pattern_matches")]
        self.picked = None
        with QtCore.QSignalBlocker(self.statistic):
            self.statistic.clear()
            self.statistic.addItems(names)
        self._show()
        return True

    def _show_census(self, shown: bool) -> None:
        """With no census open, the dock says what to do and draws no empty grid, colour bar or table."""
        for widget in (self.statisticLabel, self.statistic, self.grid, self.pickedLabel, self.table):
            widget.setVisible(shown)
        if not shown:  # an empty map's colour bar, drawn with no map (set_data shows it with the first grid)
            self.grid.item.colorbar.setVisible(False)

    def _show(self) -> None:
        name = self.statistic.currentText()
        if name not in self.heads:
            return
        values = self.heads[name]
        m = self.manifest
        # a row per layer tall enough for its label: 30 layers in a short dock were rows of 4.7 px, a label
        # every third layer, the brightest cell read against the wrong one (the dock scrolls instead)
        self.grid.setMinimumHeight(grid_height(values.shape[0]))
        signed = name in SIGNED
        self.grid.set_data(MapData(values, f"{name} over {m.get('passages', 0):,} passages",
                                   "signed" if signed else "weights",
                                   [f"layer {i + 1}" for i in range(values.shape[0])],
                                   [f"head {j + 1}" for j in range(values.shape[1])], symbol=name,
                                   scale="auto" if signed else "max"))
        definition = html.escape(m.get("statistics", {}).get(name, ""))  # "rows i <= T-1": not a tag
        self.about.setText(f"<b>{name}</b>: {definition}<br>{html.escape(m.get('model', ''))}, "
                           f"{m.get('passages', 0):,} passages, {m.get('tokens', 0):,} tokens, {m.get('cut', 0)} cut")
        self._fill_table()

    def _on_grid_click(self, event) -> None:
        cell = self.grid.item.cell_at(event.scenePos())
        if cell is not None and self.grid.item.data is not None:
            self.pick(*cell)

    def pick(self, layer: int, head: int) -> None:
        """Show the examples of ``layer``, ``head`` (0-based) for the chosen statistic."""
        self.picked = (layer, head)
        self._fill_table()

    def shown_examples(self) -> list[dict]:
        """The examples rows of the picked head and the chosen statistic, best first."""
        if self.picked is None:
            return []
        name, (layer, head) = self.statistic.currentText(), self.picked
        rows = [e for e in self.examples if e["statistic"] == name and e["layer"] == layer + 1
                and e["head"] == head + 1]
        return sorted(rows, key=lambda e: e["rank"])

    def _fill_table(self) -> None:
        rows = self.shown_examples()
        self.table.setRowCount(len(rows))
        for r, e in enumerate(rows):
            cells = (str(e["rank"]), f"{e['score']:.4g}",
                     f"{e['query_token']} ({e['query']}) → {e['key_token']} ({e['key']})", e["text"])
            for c, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                item.setToolTip(e["text"] if c == 3 else text)
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        if self.picked is not None:
            layer, head = self.picked
            value = self.heads[self.statistic.currentText()][layer, head]
            self.pickedLabel.setText(f"<b>layer {layer + 1}, head {head + 1}</b> ({value:.4g} over the corpus): its "
                                     f"top {len(rows)} passages; double-click one to open it")

    def _open_row(self, row: int, _column: int = 0) -> None:
        rows = self.shown_examples()
        if 0 <= row < len(rows):
            e = rows[row]
            self.exampleOpened.emit(self.manifest.get("model", ""), e["text"], e["layer"] - 1, e["head"] - 1,
                                    e["query"] - 1)

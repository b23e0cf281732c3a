"""File → Open model…: the models already on this computer (``engine.readers.discover``), to choose one.

The folders are scanned on a thread (headers and config.json only), then listed under each folder
looked in, each model with its size and family; one that cannot be opened here is greyed, its
reason in the last column and as its tooltip. Choosing a model asks the window to open it (the
window checks it whole and says why if it cannot); a folder or a .gguf file elsewhere is one
button away.
"""

from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine.readers.discover import Discovery, discover
from ..export.files import human
from .worker import TaskThread

COLUMNS = ("Model", "Size", "Family", "Opens / why it cannot")
PATH_ROLE = QtCore.Qt.ItemDataRole.UserRole


class ModelsDialog(QtWidgets.QDialog):
    """The models found on disk; the user picks one, or a folder or a GGUF file elsewhere.

    Signals
    -------
    chosen(str)
        The model path to open (``Found.opens``).
    folderRequested(), ggufRequested()
        Browse for a model folder or a .gguf file instead.
    scanned(object)
        The ``Discovery`` now listed.
    """

    chosen = QtCore.Signal(str)
    folderRequested = QtCore.Signal()
    ggufRequested = QtCore.Signal()
    scanned = QtCore.Signal(object)

    def __init__(self, parent: QtWidgets.QWidget | None = None, scan=discover):
        super().__init__(parent)
        self.setObjectName("modelsDialog")
        self.setWindowTitle("Open model")
        self.discovery: Discovery | None = None
        layout = QtWidgets.QVBoxLayout(self)
        self.note = QtWidgets.QLabel("Looking for models in the Hugging Face cache, Ollama and LM Studio…")
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        self.tree = QtWidgets.QTreeWidget()
        self.tree.setObjectName("modelsTree")
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setRootIsDecorated(False)
        self.tree.setItemsExpandable(False)
        self.tree.setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)  # a path's file name stays in sight
        self.tree.setUniformRowHeights(True)
        self.tree.setAlternatingRowColors(True)
        header = self.tree.header()
        header.setStretchLastSection(True)
        header.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Interactive)
        self.tree.itemDoubleClicked.connect(lambda item, _column: self._choose(item))
        self.tree.currentItemChanged.connect(lambda item, _before: self.openButton.setEnabled(
            bool(item is not None and item.data(0, PATH_ROLE))))
        layout.addWidget(self.tree, 1)
        buttons = QtWidgets.QDialogButtonBox()
        self.openButton = buttons.addButton("Open", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.openButton.setEnabled(False)
        self.openButton.clicked.connect(lambda: self._choose(self.tree.currentItem()))
        self.folderButton = buttons.addButton("Folder…", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.folderButton.setToolTip("A Hugging Face model folder elsewhere (config.json, *.safetensors, "
                                     "tokenizer.json)")
        self.folderButton.clicked.connect(self.folderRequested)
        self.ggufButton = buttons.addButton("GGUF file…", QtWidgets.QDialogButtonBox.ButtonRole.ActionRole)
        self.ggufButton.setToolTip("A llama.cpp .gguf file elsewhere")
        self.ggufButton.clicked.connect(self.ggufRequested)
        buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Cancel).clicked.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(960, 520)
        self.tasks = TaskThread("attn-gui models", self)
        self.tasks.done.connect(self._show)
        self.tasks.start(None, scan)

    def items(self) -> list[QtWidgets.QTreeWidgetItem]:
        """The models' rows, in the order listed (the folders' rows left out)."""
        heads = (self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount()))
        return [head.child(j) for head in heads for j in range(head.childCount())]

    def _choose(self, item: QtWidgets.QTreeWidgetItem | None) -> None:
        path = item.data(0, PATH_ROLE) if item is not None else None
        if path:
            self.chosen.emit(path)

    def hideEvent(self, event: QtGui.QHideEvent) -> None:
        self.tasks.shutdown()  # a dialog closed (or its window) while it scans: the scan ends, then its thread
        super().hideEvent(event)

    def _show(self, _token, outcome) -> None:
        self.tasks.shutdown()  # one scan a dialog: its thread ends with it (a thread left running aborts at exit)
        if not isinstance(outcome, Discovery):  # a bug in the scan: said, not raised into Qt's loop
            self.note.setText(f"The models on disk could not be listed: {str(outcome).splitlines()[-1]:.300}")
            return
        self.discovery = outcome
        bold = self.tree.font()
        bold.setBold(True)
        for place, folder in zip(outcome.places, outcome.looked, strict=True):
            mine = [f for f in outcome.found if Path(f.path).is_relative_to(folder)]
            head = QtWidgets.QTreeWidgetItem(self.tree, [f"{place}: {folder}{'' if mine else '  (no models here)'}"])
            head.setFlags(QtCore.Qt.ItemFlag.ItemIsEnabled)
            head.setFont(0, bold)
            head.setFirstColumnSpanned(True)  # the folder's whole path, across the columns
            for f in mine:
                size = "?" if f.size is None else human(f.size)
                item = QtWidgets.QTreeWidgetItem(head, [f.name, size, f.family or "?",
                                                             f.opens if f.supported else f.reason])
                item.setTextAlignment(1, QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
                for column in range(len(COLUMNS)):
                    item.setToolTip(column, f.opens if f.supported else f"Cannot be opened here: {f.reason}")
                if f.supported:
                    item.setData(0, PATH_ROLE, f.opens)
                else:
                    item.setFlags(QtCore.Qt.ItemFlag.NoItemFlags)  # greyed, not selectable; the tooltip says why
        count, usable = len(outcome.found), sum(f.supported for f in outcome.found)
        self.note.setText(f"{count} model{'s' if count != 1 else ''} on this computer, {usable} of them can be "
                          "opened here (greyed ones say why). Nothing is downloaded." if count else
                          "No models found in these folders. Open a model folder or a .gguf file elsewhere:")
        self.tree.expandAll()
        self.tree.resizeColumnToContents(0)
        self.tree.setColumnWidth(0, min(self.tree.columnWidth(0), self.width() // 2))
        for column in (1, 2):
            self.tree.resizeColumnToContents(column)
        first = next((item for item in self.items() if item.data(0, PATH_ROLE)), None)
        if first is not None:
            self.tree.setCurrentItem(first)
        self.scanned.emit(outcome)

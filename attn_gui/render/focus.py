"""Focus: one map large, with its neighbours in the data flow small beside it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtWidgets

from ..engine import FIELDS
from ..present.frame import Frame
from ..present.maps import map_data, neighbours
from .heatmap import HeatmapView

SIDE = 2  # neighbours shown on each side


class FocusView(QtWidgets.QWidget):
    """The map of one field large in the middle, the two before it on the left, the two after on the right.

    Signals
    -------
    focusRequested(str)
        A neighbour was double-clicked: focus on that field.
    backRequested()
        "All maps" was pressed, or the large map double-clicked.
    tokenSelected(int)
        A query row was clicked.
    """

    focusRequested = QtCore.Signal(str)
    backRequested = QtCore.Signal()
    tokenSelected = QtCore.Signal(int)

    def __init__(self, make_view: Callable[[str], HeatmapView], parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.field: str | None = None
        self.center = make_view("focus")
        self.before = [make_view(f"focus:before:{i}") for i in range(SIDE)]
        self.after = [make_view(f"focus:after:{i}") for i in range(SIDE)]
        for view in (*self.before, *self.after):
            view.brief = True  # the large map names the head and layer; small ones keep their room for the matrix
        self.title = QtWidgets.QLabel()
        self.title.setObjectName("focusTitle")
        self.backButton = QtWidgets.QPushButton("All maps (Esc)")
        self.backButton.setObjectName("focusBackButton")
        self.backButton.setToolTip("Back to every map of the pipeline")
        self.backButton.clicked.connect(self.backRequested)
        bar = QtWidgets.QHBoxLayout()
        bar.addWidget(self.title, 1)
        bar.addWidget(self.backButton)
        body = QtWidgets.QHBoxLayout()
        for views, stretch in ((self.before, 1), ([self.center], 3), (self.after, 1)):
            column = QtWidgets.QVBoxLayout()
            for view in views:
                column.addWidget(view, 1)
            body.addLayout(column, stretch)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addLayout(body, 1)
        self.center.doubleClicked.connect(self.backRequested)
        for view in (self.center, *self.before, *self.after):
            view.rowClicked.connect(lambda row, view=view: self._on_row(view, row))
        for view in (*self.before, *self.after):
            view.doubleClicked.connect(lambda view=view: view.data and self.focusRequested.emit(view.data.field))

    def show_frame(self, frame: Frame, field: str, head: int, token: int | None, hidden: tuple[int, ...]) -> None:
        """Show ``field`` of ``frame`` large and its neighbours small (per-head maps for ``head``)."""
        self.field = field
        before, after = neighbours(field, frame.result.fields(), SIDE)
        self.title.setText(f"<b>{FIELDS[field].symbol}</b> and its neighbours in the data flow: "
                           f"double-click one to move along; double-click the large map or press Esc for all maps")
        pairs = [(self.center, field), *zip(self.before[SIDE - len(before):], before), *zip(self.after, after)]
        for view in (*self.before, *self.after):
            view.setVisible(any(view is v for v, _ in pairs))
        for view, name in pairs:
            view.set_data(map_data(frame, name, head if FIELDS[name].per_head else None, hidden))
            view.set_highlight(token if view.data.query_rows else None)

    def _on_row(self, view: HeatmapView, row: int) -> None:
        if view.data is not None and view.data.query_rows:
            self.tokenSelected.emit(row)

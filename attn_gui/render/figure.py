"""The heatmaps laid out as the data flows: X -> W -> Q, K, V -> omega -> alpha -> Z -> output.

Per-head fields show the selected head; with more than one head an "all heads"
strip of alpha thumbnails sits on top, and clicking one selects that head.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from ..engine import FIELDS
from ..present.frame import Frame
from ..present.heads import kv_groups
from ..present.maps import STAGES, map_data, map_id
from .focus import FocusView
from .heatmap import HeatmapView
from .style import WEIGHTS_CMAP

MAP_MIN_W, MAP_MIN_H = 230, 150
STRIP_H = 120  # the heads strip; grouped-query heads add a bracket above it


class PipelineView(QtWidgets.QWidget):
    """Every map of a frame, in data-flow order.

    Parameters
    ----------
    on_new_view : callable, optional
        Called with each HeatmapView as it is made (the window adds its context menu).
    picture : bool
        Drawn for a picture, not a screen: no outlines, no hints about clicking.

    Signals
    -------
    tokenSelected(int)
        A query row was clicked in any map (the owner decides what to follow).
    headSelected(int)
        A head's thumbnail was clicked.
    focusRequested(object)
        A map was double-clicked (its field name), or focus was left (None).
    """

    tokenSelected = QtCore.Signal(int)
    headSelected = QtCore.Signal(int)
    focusRequested = QtCore.Signal(object)  # a field name, or None for every map

    def __init__(self, parent: QtWidgets.QWidget | None = None, on_new_view=None, picture: bool = False):
        super().__init__(parent)
        self.picture = picture
        self._on_new_view = on_new_view or (lambda view: None)  # e.g. the window's context menu
        self.frame: Frame | None = None
        self.head = 0
        self.token: int | None = None
        self.hidden: tuple[int, ...] = ()
        self.focus: str | None = None
        self.marks: dict[str, list[tuple[int, int | None]]] = {}
        self.views: dict[str, HeatmapView] = {}
        self.overview: list[HeatmapView] = []

        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(4, 4, 4, 4)
        outer.setSpacing(4)
        self.headBar = QtWidgets.QWidget()
        bar = QtWidgets.QHBoxLayout(self.headBar)
        bar.setContentsMargins(0, 0, 0, 0)
        self.headLabel = QtWidgets.QLabel("<b>All heads</b><br>α of each head" if picture else
                                          "<b>All heads</b><br>α of each head;<br>click one to<br>show it below")
        self.headLabel.setObjectName("headLabel")
        bar.addWidget(self.headLabel)
        self.overviewBox = QtWidgets.QHBoxLayout()
        self.overviewBox.setSpacing(2)
        bar.addLayout(self.overviewBox, 1)
        self.headsColorBar = weights_colour_bar()
        bar.addWidget(self.headsColorBar)
        self._groups: list[list[int]] = []
        self.headBar.setFixedHeight(STRIP_H)
        self.headBar.hide()
        outer.addWidget(self.headBar)

        canvas = QtWidgets.QWidget()
        grid = QtWidgets.QHBoxLayout(canvas)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        for title, names, stretch in STAGES:
            column = QtWidgets.QVBoxLayout()
            column.setSpacing(2)
            header = QtWidgets.QLabel(f"<b>{title}</b>")
            header.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            header.setStyleSheet("color:#334; padding:2px; background:#eef1f6; border-radius:3px;")
            column.addWidget(header)
            for name in names:
                view = HeatmapView(self._object_name(name))
                view.setMinimumSize(MAP_MIN_W, MAP_MIN_H)
                view.rowClicked.connect(self._on_row_clicked)
                view.doubleClicked.connect(lambda name=name: self.focusRequested.emit(name))
                self.views[name] = view
                self._on_new_view(view)
                column.addWidget(view, 1)
            grid.addLayout(column, stretch)
        self.noProjection = QtWidgets.QLabel("No projections: q = k = v = x, so there are no W_q, W_k, W_v, W_O.")
        self.noProjection.setObjectName("noProjectionNote")
        self.noProjection.setWordWrap(True)
        self.noProjection.hide()
        scroll = QtWidgets.QScrollArea()
        scroll.setObjectName("pipelineScroll")
        scroll.setWidget(canvas)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.focusView = FocusView(self._make_focus_view)
        self.focusView.focusRequested.connect(lambda name: self.focusRequested.emit(name))
        self.focusView.backRequested.connect(lambda: self.focusRequested.emit(None))
        self.focusView.tokenSelected.connect(self.tokenSelected)
        self.pages = QtWidgets.QStackedWidget()
        self.pages.addWidget(scroll)
        self.pages.addWidget(self.focusView)
        outer.addWidget(self.pages, 1)
        outer.addWidget(self.noProjection)

    def _make_focus_view(self, name: str) -> HeatmapView:
        view = HeatmapView(f"heatmap:{name}")
        self._on_new_view(view)
        return view

    def _object_name(self, name: str) -> str:
        return "heatmap:" + map_id(name, self.head if FIELDS[name].per_head else None)

    def show_frame(self, frame: Frame, head: int = 0, token: int | None = None,
                   hidden: tuple[int, ...] = (), focus: str | None = None) -> None:
        """Draw every map of ``frame``: per-head maps for ``head``, row ``token`` outlined,
        ``hidden`` token indices left out; with ``focus``, that field large and its neighbours
        small instead. Only the outline moves when nothing else changed."""
        focus = focus if focus in frame.result.fields() else None
        unchanged = frame is self.frame and (head, hidden, focus) == (self.head, self.hidden, self.focus)
        self.frame, self.head, self.token, self.hidden, self.focus = frame, head, token, hidden, focus
        self.pages.setCurrentIndex(0 if focus is None else 1)
        if not unchanged:
            self._show_overview(frame)
            if focus is not None:  # the grid is drawn again when focus is left
                self.focusView.show_frame(frame, focus, head, token, hidden)
            else:
                self._draw_grid(frame, head, hidden)
        self._outline(token)
        self.set_marks(self.marks)

    def _draw_grid(self, frame: Frame, head: int, hidden: tuple[int, ...]) -> None:
        result = frame.result
        present = set(result.fields())
        for name, view in self.views.items():
            view.setVisible(name in present)
            if name in present:
                view.setObjectName(self._object_name(name))
                view.set_data(map_data(frame, name, head if FIELDS[name].per_head else None, hidden))
        self.noProjection.setVisible(result.w_q is None)

    def _show_overview(self, frame: Frame) -> None:
        heads = frame.result.heads
        self.headBar.setVisible(heads > 1)
        if heads <= 1:
            return
        while len(self.overview) < heads:
            i = len(self.overview)
            view = HeatmapView(f"headgrid:weights:{i}", compact=True)
            view.setMinimumSize(48, 60)
            view.values.show_values = False
            view.rowClicked.connect(lambda _row, i=i: self.headSelected.emit(i))
            self.overview.append(view)
            self._on_new_view(view)
        groups = kv_groups(frame.result)
        if groups != self._groups:
            self._group_heads(groups)
        for i, view in enumerate(self.overview):
            view.setVisible(i < heads)
            if i < heads:
                data = map_data(frame, "weights", i, self.hidden)
                selected = "<b>head {}</b>" if self.picture else "<b>head {} ▾</b>"
                data.title = (selected if i == self.head else "head {}").format(i + 1)
                view.set_data(data)

    def _group_heads(self, groups: list[list[int]]) -> None:
        """Lay the thumbnails out in ``groups``; heads sharing a key/value head get a bracket "K/V g"."""
        self._groups = groups
        for view in self.overview:  # out of the old group boxes before those are deleted
            view.setParent(self.headBar)
        while self.overviewBox.count():
            widget = self.overviewBox.takeAt(0).widget()
            if widget is not None and widget not in self.overview:
                widget.deleteLater()
        grouped = len(groups) < sum(len(g) for g in groups)
        self.headBar.setFixedHeight(STRIP_H + (18 if grouped else 0))
        for g, members in enumerate(groups):
            if not grouped:
                self.overviewBox.addWidget(self.overview[members[0]])
                continue
            box = QtWidgets.QWidget()
            box.setObjectName(f"kvGroup:{g}")
            column = QtWidgets.QVBoxLayout(box)
            column.setContentsMargins(0, 0, 0, 0)
            column.setSpacing(1)
            bracket = QtWidgets.QLabel(f"K/V {g + 1}: heads {members[0] + 1}–{members[-1] + 1}"
                                       if len(members) > 1 else f"K/V {g + 1}: head {members[0] + 1}")
            bracket.setObjectName(f"kvGroupLabel:{g}")
            bracket.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            bracket.setToolTip("Grouped-query attention: these query heads share one key and value head")
            bracket.setStyleSheet("color:#334; font-size:8pt; border:1px solid #778; border-bottom:none;")
            column.addWidget(bracket)
            row = QtWidgets.QHBoxLayout()
            row.setSpacing(2)
            for head in members:
                row.addWidget(self.overview[head])
            column.addLayout(row, 1)
            self.overviewBox.addWidget(box, len(members))

    def _outline(self, token: int | None) -> None:
        """Outline query row ``token`` in every map whose rows are the queries (never in a picture)."""
        token = None if self.picture else token
        for view in (*self.views.values(), *self.focusView.findChildren(HeatmapView)):
            view.set_highlight(token if view.data is not None and view.data.query_rows else None)
        for view in self.overview:
            view.set_highlight(token)

    def set_marks(self, marks: dict[str, list[tuple[int, int | None]]]) -> None:
        """Outline cells: ``marks`` maps a field name to 0-based (row, col) cells (col None: the whole row).

        Every map of that field shows them, in the grid and in the focus view; other maps none.
        """
        self.marks = {name: list(cells) for name, cells in marks.items()}
        for view in (*self.views.values(), *self.focusView.findChildren(HeatmapView)):
            view.set_marks(self.marks.get(view.data.field, []) if view.data is not None else [])

    def _on_row_clicked(self, row: int) -> None:
        view = self.sender()
        if view.data is not None and view.data.query_rows:
            self.tokenSelected.emit(row)


def weights_colour_bar() -> pg.GraphicsLayoutWidget:
    """A colour bar of alpha's fixed 0 to 1 scale, for a row of thumbnails that have none."""
    widget = pg.GraphicsLayoutWidget()
    widget.setObjectName("headsColorBar")
    widget.ci.layout.setContentsMargins(0, 6, 0, 6)
    widget.bar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP), interactive=False,
                                 width=10, colorMapMenu=False)
    widget.bar.axis.setTicks([[(v, f"{v:g}") for v in np.linspace(0, 1, 3)]])
    widget.addItem(widget.bar)
    widget.setFixedWidth(48)
    return widget

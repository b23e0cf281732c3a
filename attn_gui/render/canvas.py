"""The pipeline as one canvas: a single QGraphicsView whose scene holds every map.

``present.layout`` decides where each map goes; here each map is a ``MapItem`` placed at
its box. Items are made once per field (and once as a thumbnail) and kept: an update
sets new images and labels on them and the view repaints once. The heads strip (alpha
of each head, K/V brackets, one shared colour bar) lives in the same scene.

The canvas is built in three rooms: ``render.canvas_items`` makes and keeps the items and
draws the heads strip; ``render.frame_steps`` draws a frame on them in steps, one map (or head
thumbnail) a step, a few per turn of the event loop (``STEP_S``); this module is the view: its
signals, the pointer, scrolling and zoom. ``settled`` says when every map of the frame is drawn;
the readers for tests and tools (``item_of``, ``rect_of``, ``labels_of``, ``render_scene``) and
``settle()`` run what is left at once.
"""

from __future__ import annotations

import contextlib
import time

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import FIELDS
from ..present.frame import Frame
from ..present.sizes import PAD
from ..present.maps import display_cells, full_row, map_id
from .frame_steps import FrameSteps
from .map_item import MapItem
from .style import WEIGHTS_CMAP

ZOOM_STEP = 1.15  # Ctrl + wheel, per notch


class Canvas(FrameSteps):
    """Every map of a frame in one scene, laid out by ``present.layout.lay_out``.

    Parameters
    ----------
    picture : bool
        Drawn for a picture: no outlines, no hints about clicking.

    Signals
    -------
    tokenSelected(int)
        A query row was clicked in a map whose rows are the queries.
    headSelected(int)
        A head's thumbnail in the strip was clicked.
    focusRequested(object)
        A thumbnail was clicked or a map double-clicked (its field); the focused map
        double-clicked asks for every map (None).
    mapMenuRequested(object, QPoint)
        Right-click on a map: its MapData and the global position (the window adds its menu).
    settled()
        Every map of the frame shown is drawn (at once, or after the steps of a large frame,
        see the module's docstring); also after a resize's new layout.
    """

    tokenSelected = QtCore.Signal(int)
    cellClicked = QtCore.Signal(str, int, int, int)  # field, head (-1: none), row and column on the full axes
    headSelected = QtCore.Signal(int)
    focusRequested = QtCore.Signal(object)
    mapMenuRequested = QtCore.Signal(object, object)
    settled = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None, picture: bool = False):
        # the state is declared, with its meaning, in ``CanvasItems`` and ``FrameSteps``
        self.plan = None
        self._zoom = 1.0
        self.frame = None  # set before Qt can send the first resize
        self._data = {}
        self._planned_for = None
        self._revealed = None
        self._hold_resizes = False  # the window is resizing the canvas for the frame it will show next
        self._resized_while_held = False
        super().__init__(parent)
        self.setObjectName("canvas")
        self.picture = picture
        self.enableMouse(False)  # pyqtgraph's own pan and zoom: the canvas scrolls instead
        self.setAlignment(QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop)
        self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        for policy in (self.setHorizontalScrollBarPolicy, self.setVerticalScrollBarPolicy):
            policy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff if picture else  # a picture holds the whole scene
                   QtCore.Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setTransformationAnchor(QtWidgets.QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        # what changed is painted again, not 2 pixels around it too: those reach the labels and titles beside
        # every image, which a new seed repainted (every item paints inside its bounding rectangle)
        self.setOptimizationFlag(QtWidgets.QGraphicsView.OptimizationFlag.DontAdjustForAntialiasing, True)
        self.head, self.token, self.hidden, self.focus, self.scales = 0, None, (), None, ()
        self.items = {}
        self.shown = {}
        self.strip = []
        self.marks = {}
        self._groups = []
        self.brackets = []
        self.stripBar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP), interactive=False,
                                        width=10, colorMapMenu=False)
        self.stripBar.hide()
        self.scene().addItem(self.stripBar)
        self._steps = []
        self._whole = False
        self._plan_key = None
        self._layouts = {}
        self._beside = []
        self._strip_unfilled = set()
        self._stepper = QtCore.QTimer(self)
        self._stepper.setInterval(0)
        self._stepper.timeout.connect(lambda: self._run_steps(time.perf_counter()))
        self._hover = None
        self._readout = None
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._on_context_menu)

    def set_marks(self, marks: dict[str, list]) -> None:
        """Outline cells: ``marks`` maps a field ("weights") to (row, col) cells of the full axes, col
        None for a whole row (drawn where the map shows them: hidden tokens drop theirs).

        They stay until replaced (an empty dict clears them); the followed row's outline stays too.
        """
        self.marks = {k: list(v) for k, v in marks.items()}
        for item in self.items.values():
            if item.data is not None and not item.compact:
                item.marks.set_cells(display_cells(item.data, self.marks.get(item.data.field, [])))

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self._hold_resizes:
            self._resized_while_held = True
        elif self.frame is not None and (self.viewport().width(), self.viewport().height()) != self._planned_for:
            self._queue_layout()  # in the next turn (the turn of the resize is busy)
            self._stepper.start()

    @contextlib.contextmanager
    def resizes_held(self):
        """Within it, a new viewport size is not laid out: the ``show_frame`` that follows lays the
        coming frame out once at that size (the window shows or hides a dock for a new frame),
        instead of the old frame now and the new one after."""
        self._hold_resizes = True
        try:
            yield
        finally:
            self._hold_resizes = False

    def close(self) -> bool:
        # not pyqtgraph's close(), which clears the scene under items this canvas still holds
        return QtWidgets.QGraphicsView.close(self)

    def updateMatrix(self, propagate: bool = True) -> None:
        """Scene pixels are screen pixels (times the zoom); the scene is the layout's size and scrolls."""
        if self.plan is not None:
            self.setSceneRect(0, 0, self.plan.width, self.plan.height)
        self.setTransform(QtGui.QTransform.fromScale(self._zoom, self._zoom))
        self.sigDeviceRangeChanged.emit(self, self.range)
        self.sigDeviceTransformChanged.emit(self)

    # for tests and tools ---------------------------------------------------------------------

    def item_of(self, mid: str) -> MapItem | None:
        """The item showing map ``mid`` ("weights:0"), or None when it is not laid out (the frame's
        steps left are drawn first, as in every reader below)."""
        self.settle()
        item = self.shown.get(mid)
        return item if item is not None and item.isVisible() else None

    def rect_of(self, mid: str) -> QtCore.QRect | None:
        """Map ``mid``'s rectangle in viewport pixels, or None when it is not laid out."""
        item = self.item_of(mid)
        return None if item is None else self.mapFromScene(item.sceneBoundingRect()).boundingRect()

    def labels_of(self, mid: str) -> tuple[list[str], list[str]] | None:
        """The (row, column) label texts map ``mid`` draws, or None when it is not laid out."""
        item = self.item_of(mid)
        if item is None or item.compact:
            return None
        self.viewport().repaint()  # labels are worked out when painted: for the current zoom
        return item.rowAxis.drawn, item.colAxis.drawn

    # interaction -----------------------------------------------------------------------------

    def _item_at(self, scene_pos: QtCore.QPointF) -> tuple[MapItem, str] | None:
        for mid, item in self.shown.items():
            if item.isVisible() and item.sceneBoundingRect().contains(scene_pos):
                return item, mid
        for i, item in enumerate(self.strip):
            if item.isVisible() and item.sceneBoundingRect().contains(scene_pos):
                return item, f"strip:{i}"
        return None

    def wheelEvent(self, ev: QtGui.QWheelEvent) -> None:
        if ev.modifiers() & QtCore.Qt.KeyboardModifier.ControlModifier:  # zoom the whole canvas
            self._zoom *= ZOOM_STEP if ev.angleDelta().y() > 0 else 1 / ZOOM_STEP
            self.updateMatrix()
            return
        QtWidgets.QAbstractScrollArea.wheelEvent(self, ev)  # scroll; the maps' view boxes never see it


    def _on_mouse_moved(self, scene_pos) -> None:
        hit = self._item_at(scene_pos)
        cell = hit[0].cell_at(scene_pos) if hit is not None else None
        if hit is None or cell is None:
            self._hover = None
            self.hide_readout()
            return
        item = hit[0]
        self._hover = (item, cell)
        self.place_readout(item.describe(*cell), self.mapFromScene(item.cell_scene_rect(*cell)).boundingRect())

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        hit = self._item_at(event.scenePos())
        if hit is None:
            return
        item, mid = hit
        if mid.startswith("strip:"):
            self.headSelected.emit(int(mid.split(":")[1]))
            return
        data = item.data
        if data is None:  # an item laid out and not drawn yet
            return
        if item.compact:  # a thumbnail: focus on it
            self.focusRequested.emit(data.field)
            return
        if event.double():
            self.focusRequested.emit(None if data.field == self.focus else data.field)
            return
        cell = item.cell_at(event.scenePos())
        if cell is not None:
            column = data.col_blocks[cell[1]][0] if data.col_blocks else cell[1]
            self.cellClicked.emit(data.field, -1 if data.head is None else data.head, full_row(data, cell[0]), column)
        if cell is not None and data.query_rows:
            self.tokenSelected.emit(full_row(data, cell[0]))

    def _on_context_menu(self, pos: QtCore.QPoint) -> None:
        hit = self._item_at(self.mapToScene(pos))
        if hit is not None and hit[0].data is not None:
            self.mapMenuRequested.emit(hit[0].data, self.viewport().mapToGlobal(pos))

    def render_scene(self) -> QtGui.QImage:
        """Every map of the canvas (beyond the viewport too) as an image cropped to them, for the
        exported figure: the layout's boxes give its size, with a margin of ``PAD``."""
        self.settle()
        assert self.plan is not None, "render_scene needs a frame shown"
        boxes = self.plan.boxes.values()
        w = int(max(b.right for b in boxes) + PAD) + 1
        h = int(max(b.bottom for b in boxes) + PAD) + 1
        image = QtGui.QImage(w, h, QtGui.QImage.Format.Format_ARGB32)
        image.fill(QtGui.QColor("white"))
        painter = QtGui.QPainter(image)
        try:
            self.scene().render(painter, QtCore.QRectF(0, 0, w, h), QtCore.QRectF(0, 0, w, h))
        finally:
            painter.end()
        return image


class Pipeline(QtWidgets.QWidget):
    """The canvas with a line above it: what is in focus, and the button to every map (Esc).

    ``canvas`` is the Canvas; its signals are the window's to connect.
    """

    def __init__(self, parent: QtWidgets.QWidget | None = None, picture: bool = False):
        super().__init__(parent)
        self.canvas = Canvas(picture=picture)
        self.title = QtWidgets.QLabel()
        self.title.setObjectName("focusTitle")
        self.backButton = QtWidgets.QPushButton("All maps (Esc)")
        self.backButton.setObjectName("focusBackButton")
        self.backButton.setToolTip("Every map of the pipeline, in data-flow order (scroll; Ctrl + wheel zooms)")
        self.backButton.clicked.connect(lambda: self.canvas.focusRequested.emit(None))
        self.noProjection = QtWidgets.QLabel("No projections: q = k = v = x, so there are no W_q, W_k, W_v, W_O.")
        self.noProjection.setObjectName("noProjectionNote")
        self.noProjection.hide()
        bar = QtWidgets.QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 0)
        for label in (self.title, self.noProjection):  # wrapped: the line never widens the window past the screen
            label.setWordWrap(True)
        bar.addWidget(self.title, 1)
        bar.addWidget(self.noProjection)
        bar.addWidget(self.backButton)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(bar)
        layout.addWidget(self.canvas, 1)

    def show_frame(self, frame: Frame, head: int = 0, token: int | None = None,
                   hidden: tuple[int, ...] = (), focus: str | None = None,
                   scales: tuple[tuple[str, str], ...] = (), started: float | None = None) -> None:
        """Draw ``frame`` on the canvas (see ``Canvas.show_frame``) and say what is in focus."""
        self.canvas.show_frame(frame, head, token, hidden, focus, scales, started)
        focus = self.canvas.focus
        self.backButton.setVisible(focus is not None)
        self.noProjection.setVisible(frame.result.w_q is None and not frame.result.not_captured)  # not: unseen
        if focus is None:
            self.title.setText("<b>Every map</b>, as the data flows: scroll, Ctrl + wheel zooms; "
                               "double-click a map to focus on it")
        else:
            self.title.setText(f"<b>{FIELDS[focus].symbol}</b> and its neighbours in the data flow: "
                               f"click a small map to focus on it; Esc for every map")
        shown = focus or "weights"  # every map opens with alpha in view
        if shown in frame.result.fields():
            self.canvas.reveal(map_id(shown, head if FIELDS[shown].per_head else None))


"""The pipeline as one canvas: a single QGraphicsView whose scene holds every map.

``present.layout`` decides where each map goes; here each map is a ``MapItem`` placed at
its box. Items are made once per field (and once as a thumbnail) and kept: an update
sets new images and labels on them and the view repaints once. The heads strip (alpha
of each head, K/V brackets, one shared colour bar) lives in the same scene.

A frame is drawn in steps, one map (or head thumbnail) a step, and the steps of one turn of
the event loop stop after ``STEP_S`` seconds: the rest run in the next turns, so a large
first frame (SmolLM2's 9 heads: 17 maps and 9 thumbnails, 11 items made) never holds the
window for long. A frame whose items all exist and whose maps are small (a seed, d_k or a
keystroke changed) is drawn in one turn, so it is painted once. A frame laid out as the one
shown (the same shapes, titles and viewport: a seed changed) keeps the layout: each item takes
its new data where it is, and only what changed is painted again. ``settled`` says when
every map of the frame is drawn; the readers for tests and tools (``item_of``, ``rect_of``,
``labels_of``, ``render_scene``) and ``settle()`` run what is left at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import FIELDS
from ..present.frame import Frame
from ..present.heads import kv_groups
from ..present.layout import PAD, Box, Layout, frame_shapes, lay_out
from ..present.maps import MapData, display_cells, full_row, map_data, map_id
from .heatmap import MapItem, Readout, ReadoutHost
from .style import WEIGHTS_CMAP

ZOOM_STEP = 1.15  # Ctrl + wheel, per notch
# the canvas's own work per turn of the event loop while a frame is drawn (``Canvas.show_frame``);
# with the turn's other work and the paint of what it drew, a turn stays under the 50 ms a person notices
STEP_S = 0.010
# a frame whose items all exist, of at most this many cells in its maps and thumbnails, is drawn in one turn
# (``_queue_steps``): T = 64 with 8 heads holds about 64,000 and draws in 10-25 ms; T = 384's maps are steps
WHOLE_CELLS = 100_000
LAYOUTS_KEPT = 8  # the layouts made last, by what they were made of (``_lay_out``: a spinner turned back and forth)


def _rect(box: Box) -> QtCore.QRectF:
    return QtCore.QRectF(box.x, box.y, box.w, box.h)


class Canvas(ReadoutHost, pg.GraphicsView):
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
        self.plan: Layout | None = None
        self._zoom = 1.0
        self.frame: Frame | None = None  # set before Qt can send the first resize
        self._data: dict[str, tuple] = {}  # map id -> (shape, MapData) of the frame shown
        self._planned_for: tuple[int, int] | None = None  # the viewport size the plan was made for
        self._revealed: str | None = None  # the map kept in view (``reveal``)
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
        self.items: dict[tuple[str, bool], MapItem] = {}  # (field, thumbnail) -> item, kept between frames
        self.shown: dict[str, MapItem] = {}  # map id -> the item showing it now
        self.strip: list[MapItem] = []
        self.marks: dict[str, list] = {}
        self._groups: list[QtWidgets.QGraphicsItem] = []
        self.brackets: list[tuple[str, list[int]]] = []  # the K/V brackets drawn: (text, query heads)
        self.stripBar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP), interactive=False,
                                        width=10, colorMapMenu=False)
        self.stripBar.hide()
        self.scene().addItem(self.stripBar)
        self._steps: list[Callable[[], None]] = []  # what is left to draw of the frame, in order
        self._whole = False  # the frame is drawn in the turn its steps are queued in (``_queue_steps``)
        self._plan_key: tuple | None = None  # what the plan shown was made of (``_plan_holds``)
        self._layouts: dict[tuple, Layout] = {}  # the last layouts made (``_lay_out``)
        self._beside: list[Callable[[], None]] = []  # the window's steps, after the layout (``draw_beside``)
        self._strip_unfilled: set[int] = set()  # heads whose thumbnail still shows an older frame
        self._stepper = QtCore.QTimer(self)
        self._stepper.setInterval(0)
        self._stepper.timeout.connect(lambda: self._run_steps(time.perf_counter()))
        self._hover: tuple[MapItem, tuple[int, int]] | None = None
        self._readout: Readout | None = None
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._on_context_menu)

    # drawing ---------------------------------------------------------------------------------

    def show_frame(self, frame: Frame, head: int = 0, token: int | None = None,
                   hidden: tuple[int, ...] = (), focus: str | None = None,
                   scales: tuple[tuple[str, str], ...] = (), started: float | None = None) -> None:
        """Draw ``frame``: per-head maps for ``head``, row ``token`` outlined, ``hidden`` tokens
        left out, ``focus`` (a field; None: every map) laid out first, each field on its colour
        scale in ``scales`` ((field, mode) pairs, see ``present.scales``). Only the outline moves
        when nothing else changed. ``started`` (``time.perf_counter()``) is when this turn of the
        event loop began drawing the frame: the window's own work counts against ``STEP_S``."""
        focus = focus if focus in frame.result.fields() else None
        view = (head, hidden, focus, scales)
        unchanged = frame is self.frame and view == (self.head, self.hidden, self.focus, self.scales)
        self.frame, self.token = frame, token
        self.head, self.hidden, self.focus, self.scales = view
        resized = self._resized_while_held  # the viewport changed size for this frame: lay out for it once
        self._resized_while_held = False
        if unchanged and not resized:
            self._outline(token)
            if not self.busy:
                self.settled.emit()
            return
        start = time.perf_counter() if started is None else started
        self._data = frame_shapes(frame, head, hidden, dict(scales))
        self._beside = []
        self._strip_unfilled = set(range(frame.result.heads))
        if not resized and self._plan_holds():  # nothing moves: each item takes its new data where it is
            self._queue_steps()
        else:
            self._queue_layout()  # a step too: the window's turn may have used the time, unless all fits in it
        self._run_steps(start, at_least_one=self._whole or self._fits_a_turn())

    def _key(self) -> tuple:
        """What a plan is made of besides the viewport: the maps' shapes and titles, the focus, the heads and
        their K/V groups, the colour scales (the strip's bar) and the zoom."""
        result = self.frame.result
        groups = tuple(map(tuple, kv_groups(result))) if result.heads > 1 else None
        return tuple(s for s, _ in self._data.values()), self.focus, result.heads, groups, self.scales, self._zoom

    def _plan_holds(self) -> bool:
        """Whether the plan shown is the one the frame to draw would get: made of the same (``_key``), for
        this viewport, with no layout pending."""
        return (self.plan is not None and self._place not in self._steps and self._plan_key == self._key()
                and self._planned_for == (self.viewport().width(), self.viewport().height()))

    def _queue_layout(self) -> None:
        """Lay the maps out as the next step (``_place``), the steps of the old layout dropped; until then
        the canvas is not painted: what it shows is about to move."""
        if self._steps[:1] != [self._place]:
            self._steps = [self._place]
        self._whole = False  # until the layout says
        self.viewport().setUpdatesEnabled(False)

    def draw_beside(self, step: Callable[[], None]) -> None:
        """Run ``step``, the window's drawing beside the canvas that can wait a turn (the model view's
        grid), as one of the frame's steps, right after its layout; at once when the frame is drawn
        already. A new frame drops the ones not run yet."""
        if self.busy:
            self._beside.append(step)
        else:
            step()

    @property
    def busy(self) -> bool:
        """Whether some maps of the frame shown are still to be drawn (``settled`` comes after)."""
        return bool(self._steps or self._beside)

    def settle(self) -> None:
        """Draw what is left of the frame shown now (see the module's docstring)."""
        if self.busy:
            self._run_steps(time.perf_counter(), budget=float("inf"))

    def _run_steps(self, start: float, budget: float | None = None, at_least_one: bool = True) -> None:
        """Run the steps left, until ``budget`` seconds (``STEP_S``; a picture: all) have passed
        since ``start``; the rest in the next turns of the event loop (each runs one at least)."""
        budget = budget if budget is not None else float("inf") if self.picture else STEP_S
        while self.busy:
            if not at_least_one and time.perf_counter() - start > budget:
                self._stepper.start()
                return
            beside = self._beside and self._steps[:1] != [self._place]
            step = (self._beside if beside else self._steps).pop(0)
            step()
            at_least_one = False
            if self._whole:  # set by the layout, or before the first step (``_queue_steps``)
                budget = float("inf")
        self._stepper.stop()
        # a map drawn in an earlier turn may have been laid out again since (a paint measured its labels)
        self._settle([*self.shown.values(), *self.strip])
        self._refresh_readout()
        self._outline(self.token)
        self.settled.emit()

    def _new_item(self, name: str, compact: bool) -> MapItem:
        """A new MapItem for ``name``, in the scene (made by a frame's step: 12.7 ms a thumbnail, 24.2 ms a map;
        items made ahead while a model loaded measured no better, and a hidden one left in the scene at exit
        crashed the interpreter's teardown)."""
        item = MapItem(name, compact=compact)
        if not self.picture:
            item.keep_text_drawn()
        self.scene().addItem(item)
        return item

    def _refresh_readout(self) -> None:
        """A read-out on screen (the pointer rests on a cell) names the new value there."""
        if self._hover is None or self._readout is None or not self._readout.isVisible():
            return
        item, (r, c) = self._hover
        if item.data is not None and r < item.data.matrix.shape[0] and c < item.data.matrix.shape[1]:
            self._readout.setText(item.describe(r, c))
        else:
            self._readout.hide()

    def _place(self) -> None:
        """Lay the maps out for the viewport's size, and queue one step per map and head thumbnail
        (``_run_steps`` runs them): the map in view first, then down the canvas.

        An item stays on screen until its step only where the new layout leaves it in place;
        elsewhere it is hidden until its step gives it the new frame.
        """
        self.viewport().setUpdatesEnabled(True)  # paints the whole view once more, in the new layout
        if self.frame is None:
            return
        result = self.frame.result
        groups = kv_groups(result) if result.heads > 1 else None
        self.plan, self._planned_for = self._plan([s for s, _ in self._data.values()], result.heads, groups)
        self._plan_key = self._key()
        boxes = self.plan.boxes
        rects = {(data.field, boxes[mid].thumb): _rect(boxes[mid]) for mid, (_, data) in self._data.items()}
        whole = self._fits_a_turn()
        for key, item in self.items.items():  # shown with its old picture only where it stays (or is drawn now)
            if key not in rects or not whole and item.geometry() != rects[key]:
                item.hide()
        self.shown = {}
        self._place_strip(result.heads, groups, boxes, whole)
        self.updateMatrix()
        if self._revealed:  # the map kept in view, in the new layout (before the order below reads the view)
            self.reveal(self._revealed)
        self._queue_steps()

    def _fits_a_turn(self) -> bool:
        """Whether the frame's steps are few and small enough for one turn of the event loop: its items all exist
        (making one takes 12-25 ms) and its maps and thumbnails hold at most ``WHOLE_CELLS`` cells. In steps it
        would take more turns, a paint each, and show half-new frames meanwhile. Before the layout: whether an
        item of each map exists, as a map or a thumbnail."""
        boxes = self.plan.boxes if self._place not in self._steps else None
        heads = self.frame.result.heads if self.frame.result.heads > 1 else 0
        if heads and len(self.strip) < heads:
            return False
        for mid, (_, data) in self._data.items():
            if boxes is None and (data.field, False) not in self.items and (data.field, True) not in self.items:
                return False
            if boxes is not None and mid in boxes and (data.field, boxes[mid].thumb) not in self.items:
                return False
        cells = sum(data.matrix.size for mid, (_, data) in self._data.items() if boxes is None or mid in boxes)
        alpha = self._data.get("weights:0")  # each head's thumbnail is alpha's shape
        return cells + (heads * alpha[1].matrix.size if alpha is not None else 0) <= WHOLE_CELLS

    def _queue_steps(self) -> None:
        """Queue one step per map and head thumbnail of the plan (``_run_steps`` runs them): the map in view
        first, then down the canvas."""
        result, boxes = self.frame.result, self.plan.boxes
        target = map_id(self.focus or "weights", self.head if FIELDS[self.focus or "weights"].per_head else None)
        view = self.mapToScene(self.viewport().rect()).boundingRect()
        order = []
        for mid in [*self._data, *(f"strip:{i}" for i in range(result.heads if result.heads > 1 else 0))]:
            box = boxes.get(mid)
            if box is None:
                continue
            order.append(((mid != target, not view.intersects(_rect(box)), box.y, box.x), mid))
        self._steps = [self._map_step(mid) if not mid.startswith("strip:") else self._strip_step(int(mid[6:]))
                       for _, mid in sorted(order)]
        self._whole = self._fits_a_turn()

    def _map_step(self, mid: str) -> Callable[[], None]:
        def step() -> None:
            box, data = self.plan.boxes[mid], self._data[mid][1]
            item = self._item(data.field, box.thumb)
            item.show()  # before it is laid out: showing an item asks for its layout again
            if not box.thumb:
                item.set_label_px(box.label_px)
            brief = box.thumb or data.field != (self.focus or "weights")  # beside the large map (alpha in "All maps")
            if item.brief != brief:
                item.brief, item.data = brief, None  # the title changes: drawn again below
            if item.data is not data:  # a new frame, or an item that was a thumbnail until this resize
                if not item.compact:
                    item.marks.set_cells(display_cells(data, self.marks.get(data.field, [])))
                item.set_data(data, lay_out=False)
            # its new labels and title first, then its size: laid out once (``_settle``), not at the old size too
            item.setGeometry(_rect(box))
            self.shown[mid] = item
            self._settle([item])
            item.set_highlight(None if self.picture or not data.query_rows else self.token)
            if mid == self._revealed:  # its box, in view since the layout, may be smaller than the item
                self.reveal(mid)
        return step

    @staticmethod
    def _settle(items: list[MapItem]) -> None:
        """Lay out the items' insides now. New labels and ticks resize their axes, whose new size
        fits the top labels again (``MapItem._fit_columns``); Qt would do each round after the
        next paint, painting the maps twice or three times per frame."""
        for _ in range(3):
            pending = [item for item in items if item.isVisible() and not (item.layout.isActivated()
                                                                           and item.plot.layout.isActivated())]
            if not pending:
                return
            for item in pending:
                item.plot.layout.activate()
                item.layout.activate()

    def _plan(self, shapes, heads: int, groups) -> tuple[Layout, tuple[int, int]]:
        """The layout for the viewport the scroll bars will leave, and that viewport's size.

        The scroll bars follow the layout (a canvas taller than the view scrolls) and the layout
        follows the viewport they leave: they are foreseen here, so that their coming or going does
        not lay every map out a second time (``resizeEvent``).
        """
        # a picture has no scroll bars: its plan is made for its size as it is
        bar = 0 if self.picture else self.style().pixelMetric(QtWidgets.QStyle.PixelMetric.PM_ScrollBarExtent,
                                                             None, self)
        vbar, hbar = self.verticalScrollBar(), self.horizontalScrollBar()
        full_w = self.viewport().width() + (bar if vbar.isVisible() else 0)
        full_h = self.viewport().height() + (bar if hbar.isVisible() else 0)
        w, h = full_w, full_h
        for _ in range(3):
            plan = self._lay_out(shapes, max(200, w), max(200, h), heads, groups)
            scroll_v, scroll_h = plan.height * self._zoom > h, plan.width * self._zoom > w
            fits = (full_w - (bar if scroll_v else 0), full_h - (bar if scroll_h else 0))
            if fits == (w, h):
                break
            w, h = fits
        return plan, (w, h)

    def _lay_out(self, shapes, w: float, h: float, heads: int, groups) -> Layout:
        """``present.layout.lay_out`` for the canvas's focus, kept for the last ``LAYOUTS_KEPT`` arguments
        (it is pure arithmetic on them; a few milliseconds for every map)."""
        key = (tuple(shapes), self.focus, w, h, heads, None if groups is None else tuple(map(tuple, groups)))
        plan = self._layouts.pop(key, None)
        if plan is None:
            plan = lay_out(shapes, self.focus, w, h, heads, groups)
        self._layouts[key] = plan  # the newest last: the oldest is dropped first
        while len(self._layouts) > LAYOUTS_KEPT:
            del self._layouts[next(iter(self._layouts))]
        return plan

    def _item(self, field: str, thumb: bool) -> MapItem:
        item = self.items.get((field, thumb))
        if item is None:
            item = self._new_item(field, thumb)
            item.plot.getViewBox().setMouseEnabled(x=False, y=False)  # the wheel scrolls the canvas
            self.items[(field, thumb)] = item
        return item

    def _place_strip(self, heads: int, groups, boxes: dict[str, Box], whole: bool = False) -> None:
        """The strip's colour bar and K/V brackets; the thumbnails that move are hidden until
        their steps (``_strip_step``), unless the frame is drawn in this turn (``whole``)."""
        for g in self._groups:
            self.scene().removeItem(g)
        self._groups, self.brackets = [], []
        for i, item in enumerate(self.strip):
            box = boxes.get(f"strip:{i}")
            if heads <= 1 or i >= heads or box is None or not whole and item.geometry() != _rect(box):
                item.hide()
        relative = dict(self.scales).get("weights", "auto") in ("max", "row")  # each thumbnail its own max
        self.stripBar.axis.setTicks([[(0.0, "0"), (0.5, "0.5"), (1.0, "max" if relative else "1")]])
        bar = boxes.get("strip:bar")
        self.stripBar.setVisible(bar is not None)
        if bar is not None:
            self.stripBar.setGeometry(QtCore.QRectF(bar.x, bar.y + 14, bar.w, bar.h - 20))
        for g, members in enumerate(groups or []):
            b = boxes.get(f"group:{g}")
            if b is None:
                continue
            pen = QtGui.QPen(QtGui.QColor(110, 110, 130))
            line_y = b.bottom - 1  # under the label, never through it
            path = QtGui.QPainterPath(QtCore.QPointF(b.x, line_y + 5))
            path.lineTo(b.x, line_y)
            path.lineTo(b.right, line_y)
            path.lineTo(b.right, line_y + 5)
            line = self.scene().addPath(path, pen)
            text = (f"K/V {g + 1}: heads {members[0] + 1}–{members[-1] + 1}" if len(members) > 1
                    else f"K/V {g + 1}: head {members[0] + 1}")
            label = self.scene().addSimpleText(text)
            label.setBrush(QtGui.QColor(50, 50, 70))
            font = label.font()
            font.setPointSizeF(7.5)
            label.setFont(font)
            label.setPos(b.x + (b.w - label.boundingRect().width()) / 2, line_y - label.boundingRect().height())
            label.setToolTip("Grouped-query attention: these query heads share one key and value head")
            self._groups += [line, label]
            self.brackets.append((text, list(members)))

    def _strip_step(self, i: int) -> Callable[[], None]:
        """Head ``i``'s thumbnail in the strip: alpha of that head, where the layout puts it."""
        def step() -> None:
            while len(self.strip) <= i:
                item = self._new_item(f"strip:{len(self.strip)}", compact=True)
                item.values.show_values = False
                item.brief = True  # "head 2": the large map names the rest
                self.strip.append(item)
            item = self.strip[i]
            item.show()
            item.setGeometry(_rect(self.plan.boxes[f"strip:{i}"]))
            if i in self._strip_unfilled:  # a new frame or view (a resize keeps the data)
                self._strip_unfilled.discard(i)
                item.set_data(self._strip_data(i))
            self._settle([item])
            item.set_highlight(None if self.picture else self.token)
        return step

    def _strip_data(self, i: int) -> MapData:
        """Alpha of head ``i`` for the strip, titled "head 3" (the selected head in bold)."""
        data = self._data["weights:0"][1] if i == 0 and self.head == 0 else None
        if data is None or self.hidden != ():
            data = map_data(self.frame, "weights", i, self.hidden, dict(self.scales).get("weights", "auto"))
        data.brief_title = (("<b>head {}</b>" if self.picture else "<b>head {} ▾</b>") if i == self.head
                            else "head {}").format(i + 1)
        return data

    def _outline(self, token: int | None) -> None:
        """Outline query row ``token`` in every map whose rows are the queries (never in a picture)."""
        token = None if self.picture else token
        for item in self.shown.values():
            item.set_highlight(token if item.data is not None and item.data.query_rows else None)
        for item in self.strip:
            item.set_highlight(token)

    def set_marks(self, marks: dict[str, list]) -> None:
        """Outline cells: ``marks`` maps a field ("weights") to (row, col) cells of the full axes, col
        None for a whole row (drawn where the map shows them: hidden tokens drop theirs).

        They stay until replaced (an empty dict clears them); the followed row's outline stays too.
        """
        self.marks = {k: list(v) for k, v in marks.items()}
        for item in self.items.values():
            if item.data is not None and not item.compact:
                item.marks.set_cells(display_cells(item.data, self.marks.get(item.data.field, [])))

    def reveal(self, mid: str) -> None:
        """Scroll map ``mid`` into view, now and after each new layout for a resized view; a map
        larger than the view shows its top left (its title, column labels and first rows). What
        lies above and left of it (the heads strip, its K/V brackets) stays in view with it where
        both fit."""
        self._revealed = mid
        item = self.shown.get(mid)
        if item is not None and item.isVisible():
            rect = item.sceneBoundingRect()
        elif self.plan is not None and mid in self.plan.boxes and mid in self._data:  # its step is to come
            rect = _rect(self.plan.boxes[mid])
        else:
            return
        # the viewport the layout was made for: a scroll bar it will not need may still be shown
        view = self._planned_for or (self.viewport().width(), self.viewport().height())
        width, height = view[0] / self._zoom - 2, view[1] / self._zoom - 2
        left = 0.0 if rect.right() <= width else rect.x()
        top = 0.0 if rect.bottom() <= height else rect.y()
        # two pixels past its edges: the view rounds the item's rectangle out to whole pixels
        self.ensureVisible(QtCore.QRectF(left, top, min(rect.right() - left + 2, width),
                                         min(rect.bottom() - top + 2, height)), 0, 0)
        for bar, start in ((self.horizontalScrollBar(), left), (self.verticalScrollBar(), top)):
            if start == 0.0:  # it fits with what lies above and left of it: from the canvas's edge
                bar.setValue(0)

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
        if cell is None:
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
        if item.compact:  # a thumbnail: focus on it
            self.focusRequested.emit(item.data.field)
            return
        if event.double():
            self.focusRequested.emit(None if item.data.field == self.focus else item.data.field)
            return
        cell = item.cell_at(event.scenePos())
        if cell is not None:
            data = item.data
            column = data.col_blocks[cell[1]][0] if data.col_blocks else cell[1]
            self.cellClicked.emit(data.field, -1 if data.head is None else data.head, full_row(data, cell[0]), column)
        if cell is not None and item.data.query_rows:
            self.tokenSelected.emit(full_row(item.data, cell[0]))

    def _on_context_menu(self, pos: QtCore.QPoint) -> None:
        hit = self._item_at(self.mapToScene(pos))
        if hit is not None and hit[0].data is not None:
            self.mapMenuRequested.emit(hit[0].data, self.viewport().mapToGlobal(pos))

    def render_scene(self) -> QtGui.QImage:
        """Every map of the canvas (beyond the viewport too) as an image cropped to them, for the
        exported figure: the layout's boxes give its size, with a margin of ``PAD``."""
        self.settle()
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


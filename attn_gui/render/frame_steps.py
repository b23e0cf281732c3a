"""Drawing a frame on the canvas in steps, one map (or head thumbnail) a step.

The steps of one turn of the event loop stop after ``STEP_S`` seconds: the rest run in the next
turns, so a large first frame (SmolLM2's 9 heads: 17 maps and 9 thumbnails, 11 items made) never
holds the window for long. A frame whose items all exist and whose maps are small (a seed, d_k or a
keystroke changed) is drawn in one turn, so it is painted once. A frame laid out as the one shown
(the same shapes, titles and viewport: a seed changed) keeps the layout: each item takes its new
data where it is, and only what changed is painted again. ``settled`` says when every map of the
frame is drawn. The layout is ``present.layout.lay_out``'s, kept for the last few viewports.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6 import QtCore, QtWidgets

from ..engine import FIELDS
from ..present.frame import Frame
from ..present.heads import kv_groups
from ..present.layout import lay_out
from ..present.sizes import Layout, frame_shapes
from ..present.maps import display_cells, map_id
from .canvas_items import CanvasItems, box_rect
from .map_item import MapItem
from .readout import Readout

# the canvas's own work per turn of the event loop while a frame is drawn (``Canvas.show_frame``);
# with the turn's other work and the paint of what it drew, a turn stays under the 50 ms a person notices
STEP_S = 0.010
# a frame whose items all exist, of at most this many cells in its maps and thumbnails, is drawn in one turn
# (``_queue_steps``): T = 64 with 8 heads holds about 64,000 and draws in 10-25 ms; T = 384's maps are steps
WHOLE_CELLS = 100_000
LAYOUTS_KEPT = 8  # the layouts made last, by what they were made of (``_lay_out``: a spinner turned back and forth)


class FrameSteps(CanvasItems):
    """A frame drawn on the canvas's items in steps (a base of ``render.canvas.Canvas``)."""

    _zoom: float
    _planned_for: tuple[int, int] | None  # the viewport size the plan was made for
    _revealed: str | None  # the map kept in view (``reveal``)
    _resized_while_held: bool
    _steps: list[Callable[[], None]]  # what is left to draw of the frame, in order
    _whole: bool  # the frame is drawn in the turn its steps are queued in (``_queue_steps``)
    _plan_key: tuple | None  # what the plan shown was made of (``_plan_holds``)
    _layouts: dict[tuple, Layout]  # the last layouts made (``_lay_out``)
    _beside: list[Callable[[], None]]  # the window's steps, after the layout (``draw_beside``)
    _stepper: QtCore.QTimer
    _hover: tuple[MapItem, tuple[int, int]] | None
    _readout: Readout | None

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
        assert self.frame is not None  # a plan is made for a frame shown
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
        rects = {(data.field, boxes[mid].thumb): box_rect(boxes[mid]) for mid, (_, data) in self._data.items()}
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
        assert self.frame is not None and (self.plan is not None or self._place in self._steps)
        boxes = self.plan.boxes if self.plan is not None and self._place not in self._steps else None
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
        assert self.frame is not None and self.plan is not None  # queued for the frame and plan shown
        result, boxes = self.frame.result, self.plan.boxes
        target = map_id(self.focus or "weights", self.head if FIELDS[self.focus or "weights"].per_head else None)
        view = self.mapToScene(self.viewport().rect()).boundingRect()
        order = []
        for mid in [*self._data, *(f"strip:{i}" for i in range(result.heads if result.heads > 1 else 0))]:
            box = boxes.get(mid)
            if box is None:
                continue
            order.append(((mid != target, not view.intersects(box_rect(box)), box.y, box.x), mid))
        self._steps = [self._map_step(mid) if not mid.startswith("strip:") else self._strip_step(int(mid[6:]))
                       for _, mid in sorted(order)]
        self._whole = self._fits_a_turn()

    def _map_step(self, mid: str) -> Callable[[], None]:
        def step() -> None:
            assert self.plan is not None  # a map's step comes after the layout
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
            item.setGeometry(box_rect(box))
            self.shown[mid] = item
            self._settle([item])
            item.set_highlight(None if self.picture or not data.query_rows else self.token)
            if mid == self._revealed:  # its box, in view since the layout, may be smaller than the item
                self.reveal(mid)
        return step

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

    def _outline(self, token: int | None) -> None:
        """Outline query row ``token`` in every map whose rows are the queries (never in a picture)."""
        token = None if self.picture else token
        for item in self.shown.values():
            item.set_highlight(token if item.data is not None and item.data.query_rows else None)
        for item in self.strip:
            item.set_highlight(token)

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
            rect = box_rect(self.plan.boxes[mid])
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

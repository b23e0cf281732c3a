"""The canvas's items: a ``MapItem`` per field (and per thumbnail) made once and kept, and the heads strip.

The strip is alpha of each head as a thumbnail, the K/V brackets over grouped heads and one
shared colour bar, in the same scene as the maps. ``render.frame_steps`` draws a frame on these
items in steps; ``render.canvas`` is the view that holds them.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..present.frame import Frame
from ..present.sizes import Box, Layout, MapShape
from ..present.maps import MapData, map_data
from .map_item import MapItem
from .readout import ReadoutHost


def box_rect(box: Box) -> QtCore.QRectF:
    return QtCore.QRectF(box.x, box.y, box.w, box.h)


class CanvasItems(ReadoutHost, pg.GraphicsView):
    """The items of the canvas (a base of ``render.canvas.Canvas``, which sets this state up)."""

    # the state the canvas's parts share: set in ``Canvas.__init__`` and ``FrameSteps.show_frame``
    picture: bool  # drawn for a picture: no outlines, no hints about clicking
    frame: Frame | None
    plan: Layout | None
    head: int
    token: int | None
    hidden: tuple[int, ...]
    focus: str | None
    scales: tuple[tuple[str, str], ...]
    _data: dict[str, tuple[MapShape, MapData]]  # map id -> (shape, MapData) of the frame shown
    items: dict[tuple[str, bool], MapItem]  # (field, thumbnail) -> item, kept between frames
    shown: dict[str, MapItem]  # map id -> the item showing it now
    strip: list[MapItem]
    marks: dict[str, list]  # field -> cells outlined (``Canvas.set_marks``)
    stripBar: pg.ColorBarItem
    _groups: list[QtWidgets.QGraphicsItem]
    brackets: list[tuple[str, list[int]]]  # the K/V brackets drawn: (text, query heads)
    _strip_unfilled: set[int]  # heads whose thumbnail still shows an older frame

    def _new_item(self, name: str, compact: bool) -> MapItem:
        """A new MapItem for ``name``, in the scene (made by a frame's step: 12.7 ms a thumbnail, 24.2 ms a map;
        items made ahead while a model loaded measured no better, and a hidden one left in the scene at exit
        crashed the interpreter's teardown)."""
        item = MapItem(name, compact=compact)
        if not self.picture:
            item.keep_text_drawn()
        self.scene().addItem(item)
        return item


    def _item(self, field: str, thumb: bool) -> MapItem:
        item = self.items.get((field, thumb))
        if item is None:
            item = self._new_item(field, thumb)
            item.plot.getViewBox().setMouseEnabled(x=False, y=False)  # the wheel scrolls the canvas
            self.items[(field, thumb)] = item
        return item


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

    def _place_strip(self, heads: int, groups, boxes: dict[str, Box], whole: bool = False) -> None:
        """The strip's colour bar and K/V brackets; the thumbnails that move are hidden until
        their steps (``_strip_step``), unless the frame is drawn in this turn (``whole``)."""
        for drawn in self._groups:
            self.scene().removeItem(drawn)
        self._groups, self.brackets = [], []
        for i, item in enumerate(self.strip):
            box = boxes.get(f"strip:{i}")
            if heads <= 1 or i >= heads or box is None or not whole and item.geometry() != box_rect(box):
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
            assert self.plan is not None  # a thumbnail's step comes after the layout
            item.setGeometry(box_rect(self.plan.boxes[f"strip:{i}"]))
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
            assert self.frame is not None
            data = map_data(self.frame, "weights", i, self.hidden, dict(self.scales).get("weights", "auto"))
        data.brief_title = (("<b>head {}</b>" if self.picture else "<b>head {} ▾</b>") if i == self.head
                            else "head {}").format(i + 1)
        return data

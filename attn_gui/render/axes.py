"""Axes that name every row and column they can, as BertViz names every token.

A ``LabelAxis`` draws the full label of each displayed row or column. Labels on the top
axis stand upright when they do not fit side by side; when even upright labels would
overlap (long inputs), every k-th is drawn, evenly, and zooming in brings the others
back, since the thinning is worked out each time the axis is drawn for the current
zoom. Each label is laid out once (``style.static_text``) and drawn where it goes at each paint.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6 import QtCore, QtGui

from ..present.formats import visible_label
from .style import static_text

MAX_CHARS = 14  # longer tokens end in "…" (the read-out names them whole)
GAP = 3  # pixels between the labels and the image
SHORT_LEVEL = 2  # among upright column labels, one this short stays level (it fits its cell)


if TYPE_CHECKING:  # a mixin of pyqtgraph's axes: type-checked as one
    from pyqtgraph import AxisItem as _Axis
else:
    _Axis = object


class _KeptBounds(_Axis):
    """An axis whose bounding rectangle is worked out once per geometry: pyqtgraph's ``AxisItem.boundingRect``
    computes it in Python on each of Qt's calls (about 600 for the 14 maps of a frame laid out again). It
    depends on the geometry and the style alone (no grid is drawn)."""

    _bounds: tuple[QtCore.QRectF, QtCore.QRectF] | None = None

    def boundingRect(self) -> QtCore.QRectF:
        geometry = self.geometry()
        if self._bounds is None or self._bounds[0] != geometry:
            self._bounds = (geometry, super().boundingRect())
        return QtCore.QRectF(self._bounds[1])

    def setStyle(self, **kwargs) -> None:
        self._bounds = None  # the tick length and text margins widen it
        super().setStyle(**kwargs)


class FrameAxis(_KeptBounds, pg.AxisItem):
    """A side of a colour bar's frame: the line alone (``pg.ColorBarItem`` shows its three other axes, with no
    ticks, as a frame), placed as pyqtgraph places an axis's line, without working out ticks for none, drawn
    straight (no picture recorded and played)."""

    _line_pen: QtGui.QPen | None = None

    def boundingRect(self) -> QtCore.QRectF:
        return super().boundingRect().adjusted(-1, -1, 1, 1)  # the line's ends reach a pixel past the axis

    def paint(self, p, opt, widget) -> None:
        if self._line_pen is None:
            self._line_pen = self.pen()
        _, a, b = self.generateDrawSpecs(p)[0]
        p.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, False)
        p.setPen(self._line_pen)
        p.drawLine(a, b)

    def generateDrawSpecs(self, p):
        b = self.mapRectFromParent(self.geometry())
        ends = {"left": (b.topRight() + QtCore.QPointF(-1, -1), b.bottomRight() + QtCore.QPointF(-1, 1)),
                "right": (b.topLeft() + QtCore.QPointF(1, -1), b.bottomLeft() + QtCore.QPointF(1, 1)),
                "top": (b.bottomLeft() + QtCore.QPointF(-1, -1), b.bottomRight() + QtCore.QPointF(1, -1)),
                "bottom": (b.topLeft() + QtCore.QPointF(-1, 1), b.topRight() + QtCore.QPointF(1, 1))}
        return (self.pen(), *ends[self.orientation]), [], []


class LabelAxis(_KeptBounds, pg.AxisItem):
    """A left or top axis with one label per displayed row or column (see module docstring)."""

    def __init__(self, orientation: str, font: QtGui.QFont):
        super().__init__(orientation)
        self.setStyle(tickLength=0, tickTextOffset=GAP)
        self.setTickFont(font)
        self.setPen(QtGui.QPen(QtCore.Qt.PenStyle.NoPen))
        self._metrics = QtGui.QFontMetricsF(font)
        self._labels: list[str] = []
        self._widest = 0.0
        self.upright = False
        self.title = ""  # the axis's name ("query", "key"), drawn on its outer side when set
        self.drawn: list[str] = []  # the labels drawn last (every k-th where they would overlap)

    def set_pixel_size(self, px: int) -> None:
        """Draw the labels at ``px`` pixels (the canvas's layout chooses it for the cells)."""
        font = self.style["tickFont"]
        if font is not None and font.pixelSize() == px:
            return
        font = QtGui.QFont(font if font is not None else QtGui.QFont())
        font.setPixelSize(px)
        self.setTickFont(font)
        self._metrics = QtGui.QFontMetricsF(font)
        labels, self._labels = self._labels, []
        self.set_labels(labels)

    @property
    def labels(self) -> list[str]:
        return list(self._labels)

    def set_labels(self, labels: list[str]) -> None:
        """Name displayed row (or column) ``i`` ``labels[i]``."""
        labels = [visible_label(str(t), MAX_CHARS) for t in labels]
        if labels == self._labels:
            return
        self._labels = labels
        self._widest = max((self._metrics.horizontalAdvance(t) for t in labels), default=0.0)
        if self.orientation == "left":
            self.setWidth(math.ceil(self._widest + self._band()) + 2 * GAP)
        self.picture = None
        self.update()

    def set_title(self, title: str) -> None:
        """Name the axis (e.g. "query"), in a band on the side away from the image; "" removes it."""
        if title == self.title:
            return
        self.title = title
        if self.orientation == "left":  # a top axis is sized by ``fit``
            self.setWidth(math.ceil(self._widest + self._band()) + 2 * GAP)
        self.picture = None
        self.update()

    def _band(self) -> float:
        return self._metrics.height() + GAP if self.title else 0.0

    def fit(self, length_px: float) -> None:
        """Decide, for an axis ``length_px`` long, whether top labels stand upright; size the axis."""
        if self.orientation != "top":
            return
        n = max(1, len(self._labels))
        upright = self._widest + 2 * GAP > length_px / n
        height = (self._widest if upright else self._metrics.height()) + 2 * GAP + self._band()
        if upright != self.upright or abs(self.height() - height) > 0.5:
            self.upright = upright
            self.setHeight(math.ceil(height))
            self.picture = None
            self.update()

    def _along(self, value: float) -> float:
        """Position of view coordinate ``value`` along this axis, in its local pixels."""
        view = self.linkedView()
        point = self.mapFromScene(view.mapViewToScene(QtCore.QPointF(value, value)))
        return point.x() if self.orientation == "top" else point.y()

    def generateDrawSpecs(self, p):
        view = self.linkedView()
        if view is None or not self._labels:
            return None
        n = len(self._labels)
        origin = self._along(0.0)
        signed = self._along(1.0) - origin  # the view maps rows and columns linearly onto the axis
        spacing = abs(signed) or 1.0
        across = self._metrics.height() + 1 if self.orientation == "left" or self.upright else self._widest + 2 * GAP
        step = max(1, math.ceil(across / spacing))  # thin evenly only where labels would overlap
        lo, hi = view.viewRange()[0 if self.orientation == "top" else 1]
        first = max(0, math.floor(min(lo, hi)))
        first -= first % step
        last = min(n - 1, math.ceil(max(lo, hi)))
        specs = [(origin + i * signed, self._labels[i]) for i in range(first, last + 1, step)]
        self.drawn = [text for _, text in specs]
        return specs

    def drawPicture(self, p, *specs):
        (texts,) = specs
        p.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
        font = self.style["tickFont"]
        p.setFont(font)
        p.setPen(self.textPen())
        bounds = self.boundingRect()
        p.setClipRect(bounds, QtCore.Qt.ClipOperation.IntersectClip)
        h = self._metrics.height()
        if self.title:
            title_font = QtGui.QFont(self.style["tickFont"])
            title_font.setItalic(True)
            p.save()
            p.setFont(title_font)
            if self.orientation == "left":  # read from bottom to top, centred on the rows
                p.translate(0, bounds.height() / 2)
                p.rotate(-90)
                p.drawText(QtCore.QRectF(-bounds.height() / 2, 0, bounds.height(), h),
                           QtCore.Qt.AlignmentFlag.AlignCenter, self.title)
            else:
                p.drawText(QtCore.QRectF(0, 0, bounds.width(), h), QtCore.Qt.AlignmentFlag.AlignCenter, self.title)
            p.restore()
        spacing = abs(texts[1][0] - texts[0][0]) if len(texts) > 1 else bounds.width()
        for pos, text in texts:
            # a short label stays level among upright ones: "I" on its side reads as a dash
            level = len(text) <= SHORT_LEVEL and self._metrics.horizontalAdvance(text) + 2 * GAP <= spacing
            # each label laid out once (``static_text``), placed where drawText in a rectangle would put it
            label = static_text(text, font)
            w = label.size().width()
            if self.orientation == "left":  # right-aligned, centred on its row
                p.drawStaticText(QtCore.QPointF(bounds.width() - GAP - w, pos - h / 2), label)
            elif not self.upright or level:  # centred on its column, on the image
                p.drawStaticText(QtCore.QPointF(pos - w / 2, bounds.height() - GAP - h), label)
            else:  # upright: read from the image upwards, as column names on a spreadsheet's vertical header
                p.save()
                p.translate(pos, bounds.height() - GAP)
                p.rotate(-90)
                p.drawStaticText(QtCore.QPointF(0, -h / 2), label)
                p.restore()

    def paint(self, p, opt, widget):
        # drawn straight: a recorded picture laid every label out again when played
        texts = self.generateDrawSpecs(p)
        if texts is not None:
            p.save()
            try:
                self.drawPicture(p, texts)
            finally:
                p.restore()


class BarAxis(_KeptBounds, pg.AxisItem):
    """A colour bar's value axis: given ticks painted straight into the cached picture.

    pyqtgraph's ``AxisItem`` measures every tick text with a painter and lays them out
    each time the range changes, which a signed map's colour bar does on most updates;
    these ticks are a handful of given values, so they are placed by arithmetic and
    measured with cached font metrics. Set them with ``setTicks([[(value, text), ...]])``.
    """

    picture: QtGui.QPicture | None  # pyqtgraph's: what was painted, played until the ticks change

    def __init__(self, font: QtGui.QFont):
        super().__init__("right")
        self.setTickFont(font)
        self._metrics = QtGui.QFontMetricsF(font)

    def paint(self, p, opt, widget):
        if self.picture is None:
            picture = QtGui.QPicture()
            painter = QtGui.QPainter(picture)
            try:
                self._draw(painter)
            finally:
                painter.end()
            self.picture = picture
        self.picture.play(p)

    def _draw(self, p: QtGui.QPainter) -> None:
        bounds = self.boundingRect()
        lo, hi = self.range
        if not self._tickLevels or hi == lo:
            return
        p.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
        p.setFont(self.style["tickFont"])
        p.setPen(self.pen())
        h, tick = self.geometry().height(), 4
        p.drawLine(QtCore.QLineF(0, 0, 0, h))
        for value, _ in self._tickLevels[0]:
            y = h * (hi - value) / (hi - lo)  # top is the highest value
            p.drawLine(QtCore.QLineF(0, y, tick, y))
        p.setPen(self.textPen())
        for _, text, top in self.labels():
            p.drawText(QtCore.QRectF(tick + 2, top, bounds.width() - tick - 2, self._metrics.height()),
                       QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter, text)

    def labels(self) -> list[tuple[float, str, float]]:
        """The tick labels drawn at the bar's height now: (value, text, top in pixels from the bar's top)."""
        lo, hi = self.range
        if not self._tickLevels or hi == lo:
            return []
        return give_way(self._tickLevels[0], lo, hi, self.geometry().height(), self._metrics.height())


def give_way(ticks: list[tuple[float, str]], lo: float, hi: float, height: float,
             text_h: float) -> list[tuple[float, str, float]]:
    """The colour bar's tick labels (``ticks``: ascending, as ``ColourScale.ticks`` gives them) that fit a
    bar ``height`` pixels tall, none over another.

    Each label is centred on its tick (the end ones kept inside the bar). Where the bar is too
    short for all of them, the highest and lowest value keep theirs first, then the ticks nearest
    the middle (a signed map's 0); a label that would overlap one already placed gives way (its
    tick stays). Returns (value, text, top) for each label drawn, in the order of ``ticks``.
    """
    if height < text_h or not ticks:
        return []
    last = len(ticks) - 1
    order = sorted(range(len(ticks)), key=lambda i: (i not in (0, last), i != last, abs(i - last / 2)))
    placed: dict[int, float] = {}
    for i in order:
        value, _ = ticks[i]
        y = height * (hi - value) / (hi - lo)  # top is the highest value
        top = min(max(y - text_h / 2, 0.0), height - text_h)  # the end labels stay inside the bar's height
        if all(top + text_h <= other or other + text_h <= top for other in placed.values()):
            placed[i] = top
    return [(ticks[i][0], ticks[i][1], placed[i]) for i in sorted(placed)]

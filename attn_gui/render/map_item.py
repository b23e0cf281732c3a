"""A map as one scene item: a matrix with token labels, a colour bar, cell values and masks.

Follows pyqtgraph's MatrixDisplayExample: a row-major ImageItem with cells centred on
integer ticks, the y axis inverted so row 0 is on top, and a ColorBarItem beside it.
``HeatmapView`` (``render.heatmap``) shows one in a widget; the canvas holds one per map.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..present.explain import axis_titles
from ..present.maps import MapData, describe_cell, display_row, tick_label
from ..present.scales import ColourScale, colour_scale
from .axes import BarAxis, FrameAxis, LabelAxis
from .cells import MAX_VALUE_CELLS, CellRects, CellValues
from .image import LutImage
from .style import SIGNED_CMAP, WEIGHTS_CMAP, Marks, highlight_rect, mask_items, mask_rects, set_mask

SHORT_BAR_PX = 200  # a map shorter than this gives its colour bar three ticks, not five


class _NoMenuPlot(pg.PlotItem):
    """A PlotItem whose view box has no context menu: never built (pyqtgraph's ViewBoxMenu is a
    third of a PlotItem's making) rather than built and then switched off. The canvas has its own menu."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, enableMenu=False, **kwargs)


class _FramedBar(_NoMenuPlot):
    """The colour bar's plot, its frame drawn by ``FrameAxis`` lines (pyqtgraph's axes work out ticks for none)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, axisItems={side: FrameAxis(side) for side in ("left", "top", "bottom")}, **kwargs)


class ColourBar(pg.ColorBarItem, _FramedBar):
    """``pg.ColorBarItem`` without the view box menu it switches off anyway (``_FramedBar`` comes
    between it and PlotItem, so its ``super().__init__()`` makes the view box without one)."""


class MapItem(pg.GraphicsLayout):
    """A titled matrix heatmap as one scene item: labelled axes, colour bar, values, masks, outline.

    Its ``image`` ImageItem holds exactly the matrix shown (``image.image``). A HeatmapView
    holds one; the canvas (``render.canvas``) holds one per map in a single scene.

    A thumbnail (``compact``) has no colour bar (``colorbar`` is None): it shares the weights'
    fixed scale with the full maps, and its image takes the colour map directly. Making one
    costs about a third of a full map (measured: 23 ms before, with a hidden bar and menus).
    """

    def __init__(self, name: str = "", compact: bool = False):
        super().__init__()
        self.name = name
        self.data: MapData | None = None
        self._scale: ColourScale | None = None  # the colour scale of ``data`` (its bar's levels and ticks)
        self._last: dict = {}
        self.compact = compact
        self.axis_titles = False  # name the axes ("query", "key"): pictures do, the window has no room
        self.brief = False  # a small map beside a large one: the formula and shape only (MapData.brief_title)
        self.layout.setContentsMargins(2, 2, 2, 2)
        font = QtGui.QFont(QtWidgets.QApplication.font().family(), 8)
        self.rowAxis, self.colAxis = LabelAxis("left", font), LabelAxis("top", font)
        self.plot: pg.PlotItem = _NoMenuPlot(axisItems={"left": self.rowAxis, "top": self.colAxis})
        self.addItem(self.plot, row=0, col=0)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.titleLabel.updateMin = self._title_min
        self.plot.invertY(True)
        self.plot.getViewBox().setMouseEnabled(x=True, y=True)
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        self.image = LutImage(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.mask_fill, self.mask_hatch = mask_items()
        for item in (self.mask_fill, self.mask_hatch):
            self.plot.addItem(item)
        self.values = CellValues()
        self.plot.addItem(self.values)
        self.highlight = highlight_rect()
        self.highlight.hide()
        self.plot.addItem(self.highlight)
        self.marks = Marks()
        self.plot.addItem(self.marks)
        self.colorbar: ColourBar | None = None
        if compact:  # thumbnails: the picture, square cells and a title; hovering still names every cell
            self.image.setColorMap(pg.colormap.get(WEIGHTS_CMAP))
            self.set_compact()
        else:
            self.colorbar = ColourBar(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP),
                                      interactive=False, width=12, colorMapMenu=False)
            self._use_bar_axis(QtWidgets.QApplication.font())  # the default size, as pyqtgraph's own bar axis
            self.colorbar.setImageItem(self.image, insert_in=self.plot)
        for plot in (self.plot, self.colorbar):
            for axis in (plot.axes.values() if plot is not None else ()):
                # no axis shows pyqtgraph's label: its SI prefix, worked out on every resize, would only write
                # the hidden label's HTML again (2 of 3 ms of a map's new size); before the bar hides, which
                # would size its axis 0 px wide
                axis["item"].enableAutoSIPrefix(False)
        if self.colorbar is not None:
            self.colorbar.setVisible(False)  # no map, no scale (an empty dock drew a stray bar): set_data shows it
        self._highlight_row: int | None = None
        self.plot.getViewBox().sigResized.connect(lambda _vb: self._fit_columns())

    def set_label_px(self, px: int) -> None:
        """Row and column labels at ``px`` pixels (the canvas sizes them to the cells)."""
        if px and not self.compact:
            self.rowAxis.set_pixel_size(px)
            self.colAxis.set_pixel_size(px)

    def keep_text_drawn(self) -> None:
        """Keep the axes' labels, the title and the colour bar's ticks and frame as pixels between paints,
        drawn again only when they change: Qt paints every item that touches an area repainted, and a new
        frame's images reached the labels beside them (a quarter of a seed change's paint, issue 48). For a
        view on screen only: a picture (SVG, PDF) would get its text as pixels."""
        cache = QtWidgets.QGraphicsItem.CacheMode.DeviceCoordinateCache
        bar = [axis["item"] for axis in self.colorbar.axes.values()] if self.colorbar is not None else []
        for item in (self.rowAxis, self.colAxis, self.plot.titleLabel.item, *bar):
            item.setCacheMode(cache)

    def set_compact(self) -> None:
        """Draw as a thumbnail from now on: title and picture, no axes, no zoom."""
        self.compact = True
        self.plot.hideAxis("top")
        self.plot.hideAxis("left")
        self.plot.getViewBox().setMouseEnabled(x=False, y=False)
        self.plot.setAspectLocked(True)


    # rendering -------------------------------------------------------------------------------

    def set_data(self, data: MapData, lay_out: bool = True) -> None:
        """Show ``data``: image, levels, colour map, labels, values and masked cells; laid out now unless
        ``lay_out`` is False (the canvas gives the item its size next, and lays it out once at that size)."""
        m = np.asarray(data.matrix, dtype=np.float64 if data.matrix.dtype == np.float64 else np.float32)
        self.data = data
        R, C = m.shape
        finite = np.isfinite(m)
        all_finite = bool(finite.all())
        scale = colour_scale(m, data.kind, data.scale, len(data.col_labels) or C, faint=not self.compact)
        levels, shown = scale.levels, scale.image
        cmap = pg.colormap.get(SIGNED_CMAP if data.kind == "signed" else WEIGHTS_CMAP)  # an angle: 0 to its max
        note = f"<br>{scale.note}" if scale.note and not self.compact else ""
        self.image.setImage(shown, autoLevels=False, levels=levels)
        # Only what changed is touched: typing changes numbers far more often than shapes,
        # labels or titles, and each of those makes pyqtgraph lay out and repaint an axis.
        last = self._last
        bar = self.colorbar
        if last.get("kind") != data.kind:
            if bar is None:
                self.image.setColorMap(cmap)
            else:
                bar.setColorMap(cmap)
        self._scale = scale
        self._bar_ticks()
        scaled = bool(finite.any())  # a map with no number (not captured) has no scale
        if bar is not None and scaled != bar.isVisible():
            bar.setVisible(scaled)
            if scaled:  # pyqtgraph sizes a hidden bar's axis 0 px wide, and nothing sized it again: no labels
                bar.axis.setWidth(bar.axis.fixedWidth)
        mask = None if all_finite else ~finite
        if data.masked is not None:  # alpha's masked zeros are hatched like the -inf of the scores
            mask = data.masked if mask is None else mask | data.masked
        self._set_mask(mask)
        white = self._white_text(shown, levels, cmap, data.kind) if m.size <= MAX_VALUE_CELLS else None
        self.values.set_data(m, white)
        title = (data.brief_title if self.brief and data.brief_title else data.title) + note
        if last.get("title") != title:
            self.plot.setTitle(title, size="9pt")
        if last.get("about") != data.about:  # "what is this": hover the title
            self.plot.titleLabel.setToolTip(data.about)
        if self.compact:  # square cells, unless that would make a strip of a long, thin matrix
            self.plot.setAspectLocked(max(R, C) <= 4 * min(R, C))
        layout_key = ((R, C), data.row_labels, data.col_labels, data.row_blocks, data.col_blocks)
        if last.get("layout") != layout_key:
            self.image.setRect(QtCore.QRectF(-0.5, -0.5, C, R))
            self._fit()
            if not self.compact:  # thumbnails neither zoom nor pan; limits would fight their square cells
                self.plot.getViewBox().setLimits(xMin=-0.5, xMax=C - 0.5, yMin=-0.5, yMax=R - 0.5)
            self.plot.getViewBox().setRange(xRange=(-0.5, C - 0.5), yRange=(-0.5, R - 0.5), padding=0)
        elif last.get("title") != title:
            self._fit()
        last.update(kind=data.kind, title=title, layout=layout_key, about=data.about)
        self.set_highlight(self._highlight_row)
        self.marks.set_shape(R, C)
        if lay_out:
            self.layout.activate()  # lay out now, so a picture taken right away has every label

    def _bar_ticks(self) -> None:
        """The colour bar's levels and ticks for the map's height now (a short map gets three, never
        overprinted); set only where they changed."""
        bar, scale = self.colorbar, self._scale
        if bar is None or scale is None:
            return
        ticks = scale.ticks(5 if self.size().height() >= SHORT_BAR_PX else 3)
        if self._last.get("levels") != scale.levels or self._last.get("ticks") != ticks:
            bar.setLevels(scale.levels)
            bar.axis.setTicks([ticks])  # given, so the bar's axis never searches for its own spacing
            self._last.update(levels=scale.levels, ticks=ticks)

    def _use_bar_axis(self, font: QtGui.QFont) -> None:
        """Give the colour bar a ``BarAxis``: its ticks change with most updates of a signed map."""
        bar, axis = self.colorbar, BarAxis(font)
        assert bar is not None  # a full map's (thumbnails have no bar)
        bar.setAxisItems({"right": axis})
        axis.setZValue(0.5)
        axis.setWidth(45)
        axis.setStyle(showValues=True)
        axis.unlinkFromView()
        axis.setRange(*bar.values)
        bar.axis = axis

    @staticmethod
    def _white_text(shown: np.ndarray, levels, cmap, kind: str) -> np.ndarray:
        lo, hi = levels
        frac = np.clip((shown - lo) / (hi - lo), 0, 1)
        rgb = cmap.map(frac.ravel(), mode="float")[:, :3]
        luminance = rgb @ np.array([0.299, 0.587, 0.114])
        return (luminance < 0.5).reshape(shown.shape)

    def _set_mask(self, mask: np.ndarray | None) -> None:
        set_mask((self.mask_fill, self.mask_hatch), [] if mask is None else mask_rects(mask))

    @contextmanager
    def cells_as_rectangles(self) -> Iterator[None]:
        """While open, each cell is drawn as a rectangle instead of a pixel of a scaled image.

        For SVG: Qt's SVG renderer smooths images, so a map would come out blurred there.
        """
        self.image.render()  # the image's colours, as the colour map or lookup table made them
        qimage = self.image.qimage.convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
        rgba = pg.functions.ndarray_from_qimage(qimage).copy()  # copied while qimage lives
        cells = CellRects(rgba)
        cells.setZValue(self.image.zValue())
        self.plot.addItem(cells)
        self.image.hide()
        try:
            yield
        finally:
            self.image.show()
            self.plot.removeItem(cells)

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if getattr(self, "data", None) is not None and self.scene() is not None:
            self._fit()
            self._bar_ticks()  # the map may have grown past SHORT_BAR_PX, or shrunk below it

    def _fit(self) -> None:
        """Label every displayed row and column, stand column labels upright if they must, wrap the title."""
        data = self.data
        assert data is not None  # fitted to the data shown
        R, C = data.matrix.shape
        if not self.compact:
            rows, cols = axis_titles(data.field) if self.axis_titles and data.field else ("", "")
            self.rowAxis.set_title(rows)
            self.colAxis.set_title(cols)
            self.rowAxis.set_labels([tick_label(data.row_labels, data.row_blocks, i) for i in range(R)])
            self.colAxis.set_labels([tick_label(data.col_labels, data.col_blocks, j) for j in range(C)])
            self._fit_columns()
        title = self.plot.titleLabel
        bar = 0 if self.compact else 75  # the title sits above the image only, not the colour bar
        # the width its labels give the row axis (``LabelAxis.set_labels``), not its geometry, which is the old
        # labels' until the map is laid out: a first frame's titles wrapped otherwise than the same frame's later
        axis = 0 if self.compact else self.rowAxis.fixedWidth or self.rowAxis.width()
        width = max(50, self.size().width() - axis - bar)
        title.item.setTextWidth(-1)
        if title.item.boundingRect().width() > width:  # wrap only when it does not fit on one line
            title.item.setTextWidth(width)
            option = title.item.document().defaultTextOption()
            option.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            # between words only: Qt's default also breaks inside a word too long for the line,
            # which cut shapes such as "shown 384 × 384" (joined by no-break spaces) in two
            option.setWrapMode(QtGui.QTextOption.WrapMode.WordWrap)
            title.item.document().setDefaultTextOption(option)
        title.updateMin()
        # Its text kept as pixels (``keep_text_drawn``) is drawn again whole. Each new layout of the title's
        # text (``setTextWidth`` lays it out even unchanged) asks Qt to draw again an area of 10^9 px; the
        # device cache then paints the item clipped to that area, which overflows Qt's integer rectangles:
        # nothing was drawn, and a title of the same size as before was blank after typing (issue 62)
        title.item.update()

    def _fit_columns(self) -> None:
        self.colAxis.fit(self.plot.getViewBox().width() or max(40, self.size().width() - 120))

    def _title_min(self) -> None:
        """Replaces LabelItem.updateMin: the title wraps, so it never sets the map's minimum width."""
        title = self.plot.titleLabel
        h = title.item.boundingRect().height()
        title.setMinimumWidth(0)  # each setter lays the map out again only where its value changed
        title.setMinimumHeight(h)
        title.setMaximumHeight(h)

    def set_highlight(self, row: int | None) -> None:
        """Outline the displayed row holding full-axis row ``row`` (None hides it)."""
        self._highlight_row = row
        if row is None or self.data is None:
            self.highlight.hide()
            return
        shown = display_row(self.data, row)
        if shown is None:
            self.highlight.hide()
            return
        C = self.data.matrix.shape[1]
        self.highlight.setRect(QtCore.QRectF(-0.5, shown - 0.5, C, 1))
        self.highlight.show()

    # interaction -----------------------------------------------------------------------------

    def cell_at(self, scene_pos: QtCore.QPointF) -> tuple[int, int] | None:
        """(display row, display column) under a scene position, or None outside the matrix."""
        if self.data is None:
            return None
        p = self.plot.getViewBox().mapSceneToView(scene_pos)
        r, c = int(np.floor(p.y() + 0.5)), int(np.floor(p.x() + 0.5))
        R, C = self.data.matrix.shape
        if 0 <= r < R and 0 <= c < C and self.plot.getViewBox().sceneBoundingRect().contains(scene_pos):
            return r, c
        return None

    def describe(self, r: int, c: int) -> str:
        """The read-out for display cell (r, c): names, exact value and meaning."""
        assert self.data is not None  # a cell of the data shown
        return describe_cell(self.data, r, c)

    def cell_scene_rect(self, r: int, c: int) -> QtCore.QRectF:
        """Display cell (r, c) as a rectangle in scene coordinates."""
        view_box = self.plot.getViewBox()
        return view_box.mapViewToScene(QtCore.QRectF(c - 0.5, r - 0.5, 1, 1)).boundingRect()

    def reset_zoom(self) -> None:
        if self.data is not None:
            R, C = self.data.matrix.shape
            self.plot.getViewBox().setRange(xRange=(-0.5, C - 0.5), yRange=(-0.5, R - 0.5), padding=0)


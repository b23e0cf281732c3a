"""BertViz's model view, in one picture: every layer's and head's alpha as a grid of thumbnails.

One RGBA image holds the whole grid, so it draws as fast as a single map; a click picks
the layer and head to open in the full views. A model with more layers than heads
(SmolLM2: 30 x 9) runs its layers across, so the grid fits the wide dock with square
thumbnails; its query heads are grouped by the key/value head they share, and a map
beside the grid gives each head's sink mass (mean alpha on the first token) in the same places.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from .style import SIGNED_CMAP, WEIGHTS_CMAP, highlight_rect, mask_items, mask_rects, set_mask

GAP = 2  # white pixels between thumbnails
MIN_THUMB = 12  # the least thumbnail on screen: below it the view asks for more room and its dock scrolls
FILL_THUMB = 24  # layers down, thumbnails grow up to this to fill the width (the dock scrolls down the layers)
AXIS_ROOM = (92, 78)  # beside and above a grid: the left axis (numbers, name), the top axis and the margins
BAR_ROOM = 90  # the colour bar and its numbers
MAX_HATCHED = 400  # masked runs hatched at most (30 x 9 causal thumbnails have over a thousand)


def starts(n: int, size: int, group: int) -> np.ndarray:
    """Where each of ``n`` blocks of ``size`` pixels starts: GAP between blocks, a wider gap
    between groups of ``group`` (the query heads sharing one key/value head)."""
    group_gap = max(4, size // 3) if group < n else 0
    return np.array([k * (size + GAP) + (k // group) * group_gap for k in range(n)])


class ModelView(pg.GraphicsLayoutWidget):
    """All heads of all layers of a model-mode frame.

    Signals
    -------
    headPicked(int, int)
        A thumbnail (or a sink-mass cell) was clicked: layer, head (both 0-based).
    headStruck(int, int)
        A thumbnail was Ctrl-clicked: strike that head out, or restore it (decoders).
    """

    headPicked = QtCore.Signal(int, int)
    headStruck = QtCore.Signal(int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent=parent)
        self.setObjectName("modelView")
        self.plot = self.addPlot(row=0, col=0)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)  # square thumbnails, as every map of alpha is square
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.mask_fill, self.mask_hatch = mask_items()
        for item in (self.mask_fill, self.mask_hatch):
            self.plot.addItem(item)
        self.selected = highlight_rect()
        self.plot.addItem(self.selected)
        self.struck = pg.PlotCurveItem(pen=pg.mkPen("#d00000", width=2), connect="pairs")  # ablated heads
        self.struck_allowed = False
        self.plot.addItem(self.struck)
        # beside the grid, in its rows and columns: each head's sink mass (mean alpha on the first token)
        self.sinkPlot = self.addPlot(row=0, col=1)
        self.sinkPlot.setMenuEnabled(False)
        self.sinkPlot.hideButtons()
        self.sinkPlot.invertY(True)
        self.sinkPlot.setAspectLocked(True)
        self.sinkPlot.setMouseEnabled(False, False)
        self.sinkPlot.showAxis("top")
        self.sinkPlot.getAxis("top").setStyle(hideOverlappingLabels=False)  # "K/V 1" runs past its left edge
        self.sinkPlot.hideAxis("bottom")
        self.sinkPlot.hideAxis("left")
        self.sinkImage = pg.ImageItem(axisOrder="row-major")
        self.sinkPlot.addItem(self.sinkImage)
        # the colour of alpha's fixed 0..1 scale; the images are already coloured, so the bar stands alone
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP), interactive=False,
                                        width=12, colorMapMenu=False)
        self.colorbar.axis.setTicks([[(v, f"{v:g}") for v in np.linspace(0, 1, 5)]])
        self.addItem(self.colorbar, row=0, col=2)
        for col, stretch in ((0, 1), (1, 1), (2, 0)):  # the grid and the sink map share the width
            self.ci.layout.setColumnStretchFactor(col, stretch)
        for plot in (self.plot, self.sinkPlot):
            for side in ("left", "top"):
                axis = plot.getAxis(side)
                axis.setPen(pg.mkPen(None))  # no axis line, only the numbers and the name
                axis.setTextPen(pg.mkPen("k"))
        self.names: dict[pg.AxisItem, tuple[str, ...]] = {}  # each axis's names, the longest first (see _name)
        self.cell = 1
        self.grid_size = (0, 0)  # the grid's (width, height) in image pixels
        self.shape = (0, 0)
        self.across = False  # layers run across (columns) instead of down
        self.sink: np.ndarray | None = None  # (L, H)
        self.distance: np.ndarray | None = None  # (L, H) mean attention distance, tokens
        self.side: tuple[np.ndarray, str] | None = None  # a signed (L, H) grid shown instead of the sink mass
        self.groups = 1  # query heads per key/value head
        self._rows = self._cols = np.zeros(0, dtype=int)
        self.stale = False  # the grid is another text's than the one computed or asked (``set_stale``)
        self.plot.getViewBox().sigYRangeChanged.connect(self._follow_rows)
        self.scene().sigMouseClicked.connect(self._on_click)
        self.scene().sigMouseMoved.connect(self._on_hover)
        self.setToolTip("α of every layer and head, both numbered from 1: click one to open it")

    def set_weights(self, weights: np.ndarray, layer: int, head: int, hidden: tuple[int, ...] = (),
                    seq_len: int | None = None, masked: np.ndarray | None = None,
                    other_layers: np.ndarray | None = None, kv_heads: int | None = None,
                    sink: np.ndarray | None = None, distance: np.ndarray | None = None) -> None:
        """Show ``weights`` (layers, heads, t, t) and outline ``layer``, ``head``.

        ``hidden`` tokens are left out only when the thumbnails are not reduced (t == seq_len).
        ``masked`` (t, t) bool marks the cells a mask removed in layer ``layer`` (the same in
        every head), ``other_layers`` those of every other layer (a decoder's causal mask);
        they are hatched as in every other map of alpha. ``kv_heads`` groups the query
        heads by the key/value head they read; ``sink`` (layers, heads) is each head's sink
        mass, shown beside the grid when the layers run across; ``distance`` (layers, heads) its mean attention
        distance in tokens, read out on hover.
        """
        self.plot.titleLabel.setText("")
        self.plot.setTitle(None)
        # the empty view's message (show_empty) left its width as the title's minimum: the grid's column kept it,
        # wider than its half, and the grid ran under the sink map, its numbers over the sink map's
        self.plot.titleLabel.setMinimumWidth(0)
        L, H, t, _ = weights.shape
        masked, other_layers = (m if m is not None and m.shape == (t, t) else None for m in (masked, other_layers))
        if hidden and t == seq_len:
            keep = [i for i in range(t) if i not in hidden]
            if keep:
                weights = weights[:, :, keep][:, :, :, keep]
                masked, other_layers = (None if m is None else m[np.ix_(keep, keep)] for m in (masked, other_layers))
                t = len(keep)
        self.across = L > H
        self.groups = H // kv_heads if kv_heads and 0 < kv_heads < H and H % kv_heads == 0 else H
        layer_starts, head_starts = starts(L, t, L), starts(H, t, self.groups)
        self._rows, self._cols = (head_starts, layer_starts) if self.across else (layer_starts, head_starts)
        rgba = np.full((self._rows[-1] + t, self._cols[-1] + t, 4), 255, dtype=np.uint8)
        colors = pg.colormap.get(WEIGHTS_CMAP).map(np.clip(weights, 0, 1).ravel(), mode="byte")
        colors = colors.reshape(L, H, t, t, 4)
        rects: list[QtCore.QRectF] = []
        shown, others = (mask_rects(m, x0=0, y0=0) if m is not None and m.any() else []  # one thumbnail's
                         for m in (masked, other_layers))
        for i in range(L):
            base = shown if i == layer else others
            for j in range(H):
                y0, x0 = self._origin(i, j)
                rgba[y0:y0 + t, x0:x0 + t] = colors[i, j]
                rects.extend(r.translated(x0, y0) for r in base)
        self.image.setImage(rgba, autoLevels=False)
        set_mask((self.mask_fill, self.mask_hatch), rects)
        if len(rects) > MAX_HATCHED:  # the grey fill alone marks them; hatching each costs a stall to paint
            self.mask_hatch.setPath(self.mask_hatch.path(), [])
        self.cell, self.shape = t + GAP, (L, H)
        self.grid_size = (rgba.shape[1], rgba.shape[0])
        self.sink = None if sink is None else np.asarray(sink)
        self.distance = None if distance is None else np.asarray(distance)
        self._label_axes(t)
        self._show_sink(t)
        self._ask_room(t)
        # a little room at the sides: the first and last layer numbers are drawn whole
        self.plot.getViewBox().setRange(xRange=(0, rgba.shape[1]), yRange=(0, rgba.shape[0]), padding=0.015)
        self._fit_width()
        y0, x0 = self._origin(layer, head)
        self.selected.setRect(QtCore.QRectF(x0 - 1, y0 - 1, t + 2, t + 2))

    def _ask_room(self, t: int) -> None:
        """The least size at which every thumbnail is ``MIN_THUMB`` px: smaller, the dock scrolls (its scroll area)
        rather than shrink them to a smudge; with the layers across, the sink map beside takes as much."""
        w, h = self.grid_size
        scale = MIN_THUMB / t  # screen pixels per image pixel
        grids = 1 + self._sink_share() / (1 - self._sink_share()) if self.sinkPlot.isVisible() else 1
        # layers down (the 8B's 32 x 32), the grid is as tall as it is wide: taller where its width allows, up to
        # FILL_THUMB px thumbnails, rather than a third of the width with two thirds blank beside
        fill = ((self.width() - BAR_ROOM) / grids - AXIS_ROOM[0]) / w if not self.across else 0.0
        tall = max(scale, min(fill, FILL_THUMB / t))
        self.setMinimumSize(round(grids * (w * scale + AXIS_ROOM[0]) + BAR_ROOM), round(h * tall + AXIS_ROOM[1]))

    def thumb_px(self) -> float:
        """A thumbnail's side on screen now, in pixels."""
        t = self.cell - GAP
        return t / self.plot.getViewBox().viewPixelSize()[0] if self.shape != (0, 0) else 0.0

    def set_stale(self, stale: bool) -> None:
        """Grey the grid while it is another text's than the one computed (or stopped, or failed)."""
        self.stale = stale
        self.ci.setOpacity(0.3 if stale else 1.0)

    def show_empty(self, text: str) -> None:
        """No grid (random weights have no layers): ``text`` says what the view needs instead."""
        self.image.clear()
        self.shape = (0, 0)  # nothing to click
        self.setMinimumSize(0, 0)
        set_mask((self.mask_fill, self.mask_hatch), [])
        self.selected.setRect(QtCore.QRectF())
        self.struck.setData([], [])
        self.sinkPlot.setVisible(False)
        for name in ("left", "top"):
            self.plot.getAxis(name).setTicks([[]])
            self._name(self.plot.getAxis(name), "")
        self.plot.setTitle(text, color="#444")

    def set_struck(self, heads: tuple[tuple[int, int], ...], allowed: bool = True) -> None:
        """Strike ``heads`` ((layer, head) pairs, 0-based; the config's ``ablate``) through: a red cross each.

        ``allowed``: Ctrl+click strikes a head out (a decoder's view); else it opens it as a click does.
        """
        self.struck_allowed = allowed
        t = self.cell - GAP
        xs, ys = [], []
        for layer, head in heads:
            if layer < self.shape[0] and head < self.shape[1]:
                y0, x0 = self._origin(layer, head)
                xs += [x0, x0 + t, x0, x0 + t]  # two diagonals, drawn as pairs of points
                ys += [y0, y0 + t, y0 + t, y0]
        self.struck.setData(np.array(xs, dtype=float), np.array(ys, dtype=float))

    def _origin(self, layer: int, head: int) -> tuple[int, int]:
        """The top-left pixel (y, x) of ``layer``'s ``head`` in the grid."""
        if self.across:
            return int(self._rows[head]), int(self._cols[layer])
        return int(self._rows[layer]), int(self._cols[head])

    def _label_axes(self, t: int) -> None:
        L, H = self.shape
        grouped = self.groups < H

        def head_label(j: int) -> str:  # the first head of a group names its K/V head
            return f"K/V {j // self.groups + 1} · {j + 1}" if grouped and j % self.groups == 0 else str(j + 1)

        # layers 1, 5, 10, ... always; the others where each has room beside its neighbours (pyqtgraph draws its
        # first level whole, however crowded: MiniLM's 12 heads read "123456789101112" at 5 px thumbnails)
        left, top = self.plot.getAxis("left"), self.plot.getAxis("top")
        layers = [(s + t / 2, str(i + 1)) for i, s in enumerate(self.layer_starts())]
        always = [tick for i, tick in enumerate(layers) if i == 0 or (i + 1) % 5 == 0]
        layer_axis, head_axis = (top, left) if self.across else (left, top)
        layer_levels = [layers if self._room(layers, layer_axis) else self._thinned(always, layer_axis)]
        # every head where there is room; else the first of each K/V group (or heads 1, 5, 10, ...), named
        # "K/V 2 · 5", else "K/V 2", else every second (third, ...) of those: never one over another (the 8B's
        # 32 heads in 8 groups read "K/V 2 · 5K/V 3 · 9K/V 4 ...")
        heads = [(s + t / 2, head_label(j)) for j, s in enumerate(self.head_starts())]
        first = [tick for j, tick in enumerate(heads)
                 if (j % self.groups == 0 if grouped else j == 0 or (j + 1) % 5 == 0)]
        short = [(x, label.split(" · ")[0]) for x, label in first]
        head_levels = [heads if self._room(heads, head_axis) else first if self._room(first, head_axis)
                       else self._thinned(short, head_axis)]
        head_names = ("query head, by K/V head", "query head", "head") if grouped else ("head",)
        left.setTicks(head_levels if self.across else layer_levels)
        top.setTicks(layer_levels if self.across else head_levels)
        self._name(left, *(head_names if self.across else ("layer",)))
        self._name(top, *(("layer",) if self.across else head_names))

    def _thinned(self, ticks: list[tuple[float, str]], axis: pg.AxisItem,
                 plot: pg.PlotItem | None = None) -> list[tuple[float, str]]:
        """Every ``k``-th of ``ticks``, the first included, ``k`` the least at which they fit beside each other."""
        k = 1
        while k < len(ticks) and not self._room(ticks[::k], axis, plot):
            k += 1
        return ticks[::k]

    def _room(self, ticks: list[tuple[float, str]], axis: pg.AxisItem, plot: pg.PlotItem | None = None) -> bool:
        """Whether every label of ``ticks`` fits beside its neighbours along ``axis`` at the grid's scale now
        (before a first layout: at ``MIN_THUMB``, the least the view allows); ``plot``: the grid's (None) or the
        sink map."""
        if len(ticks) < 2:
            return True
        metrics = QtGui.QFontMetricsF(axis.style.get("tickFont") or axis.font())
        t = self.cell - GAP
        box = (plot or self.plot).getViewBox()
        scale = 1 / box.viewPixelSize()[0] if box.width() > 1 else MIN_THUMB / t
        if axis.orientation == "left":
            pitch = min(b[0] - a[0] for a, b in zip(ticks[:-1], ticks[1:], strict=True)) * scale
            return pitch >= metrics.height() + 4
        # centred labels: each pair apart by half of each, and a gap
        return all((b[0] - a[0]) * scale >= (metrics.horizontalAdvance(a[1]) + metrics.horizontalAdvance(b[1])) / 2 + 4
                   for a, b in zip(ticks[:-1], ticks[1:], strict=True))

    def _name(self, axis: pg.AxisItem, *names: str) -> None:
        """Name ``axis`` with the longest of ``names`` (the longest first) that fits along it, the last where none
        does: in a short dock "query head, by K/V head" gives way to "head", as a colour bar's labels give way
        (``render.axes.give_way``), where it ran past the grid over the other axis's numbers."""
        self.names[axis] = names
        self._fit_name(axis)

    def _fit_name(self, axis: pg.AxisItem) -> None:
        names = self.names.get(axis)
        if not names or axis.label is None:  # pyqtgraph drops the label when the view closes
            return
        length = axis.height() if axis.orientation == "left" else axis.width()
        metrics = QtGui.QFontMetricsF(axis.label.font())
        margins = 2 * axis.label.document().documentMargin()
        name = next((name for name in names if metrics.horizontalAdvance(name) + margins <= length), names[-1])
        if axis.labelText != name:
            axis.setLabel(name)
            axis.resizeEvent()  # pyqtgraph centres the name only on a resize: a new one is centred now

    def layer_starts(self) -> np.ndarray:
        return self._cols if self.across else self._rows

    def head_starts(self) -> np.ndarray:
        return self._rows if self.across else self._cols

    def set_side(self, values: np.ndarray | None, label: str = "") -> None:
        """Show a signed per-head grid (layers, heads) beside the thumbnails instead of the sink mass, on a diverging
        scale centred on 0 (``label`` names it, e.g. the Why dock's DLA); None: the sink mass again."""
        self.side = None if values is None else (np.asarray(values, dtype=float), label)
        if self.shape != (0, 0):
            self._show_sink(self.cell - GAP)

    def _side(self) -> tuple[np.ndarray, str] | None:
        return self.side if self.side is not None and self.side[0].shape == self.shape else None

    def _show_sink(self, t: int) -> None:
        """Each head's sink mass, or ``side``, beside the grid (layers across only): a square per thumbnail."""
        side = self._side()
        values = self.sink if side is None else side[0]
        show = values is not None and values.shape == self.shape  # whatever way the layers run (the 8B's 32 x 32)
        self.sinkPlot.setVisible(show)
        if not show or values is None:
            return
        L, H = self.shape
        block = np.full((self._rows[-1] + t, self._cols[-1] + t, 4), 255, dtype=np.uint8)
        if side is None:
            colors = pg.colormap.get(WEIGHTS_CMAP).map(np.clip(values, 0, 1).ravel(), mode="byte")
        else:  # diverging, centred on 0: white is 0, the largest |value| the full colour
            top = float(np.nanmax(np.abs(values))) or 1.0
            colors = pg.colormap.get(SIGNED_CMAP).map(np.clip(values / top / 2 + 0.5, 0, 1).ravel(), mode="byte")
        colors = colors.reshape(L, H, 4)
        for i in range(L):
            for j in range(H):
                y0, x0 = self._origin(i, j)
                block[y0:y0 + t, x0:x0 + t] = colors[i, j]
        self.sinkImage.setImage(block, autoLevels=False)
        # layers down (the 8B's 32 x 32), the sink map is narrower than the grid: its rows span the grid's height
        # (its cells not square), level with the layer numbers; layers across, it is as large as the grid, square
        self.sinkPlot.setAspectLocked(self.across)
        self.sinkPlot.getViewBox().setRange(xRange=(0, block.shape[1]), yRange=(0, block.shape[0]), padding=0.015)
        self._follow_rows(self.plot.getViewBox(), self.plot.getViewBox().viewRange()[1])
        top = self._show_sink_ticks()
        if side is not None:
            self._name(top, f"{side[1]}, per layer", side[1])
            self.sinkPlot.setToolTip(f"{side[1]}: each head's value in the grid's rows and columns, blue below 0, "
                                     f"white at 0, red above (not alpha's colour bar); hover for the number")
            return
        per = ", per layer" if self.across else ""  # layers across: the grid's columns
        self._name(top, f"sink mass: mean α on token 1{per}", f"sink mass{per}", "sink mass")
        self.sinkPlot.setToolTip("sink mass: each head's mean α on the first token (over the queries after it), "
                                 "in the grid's rows and columns; hover for the number")

    def _follow_rows(self, _box, rows) -> None:
        """Layers down, the sink map shows the grid's rows as the grid does (one way: the grid keeps its square
        thumbnails), level with the layer numbers however the grid's range was fitted."""
        if not self.across and self.sinkPlot.isVisible():
            self.sinkPlot.getViewBox().setYRange(*rows, padding=0)

    def _show_sink_ticks(self) -> pg.AxisItem:
        """The sink map's top axis numbers the layers as the grid's does."""
        top = self.sinkPlot.getAxis("top")
        levels = self.plot.getAxis("top")._tickLevels
        if levels and not self._room(levels[0], top, self.sinkPlot):  # narrower than the grid: fewer, shorter
            levels = [self._thinned([(x, label.split(" · ")[0]) for x, label in levels[0]], top, self.sinkPlot)]
        top.setTicks(levels)
        return top

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if getattr(self, "shape", (0, 0)) != (0, 0):
            if ev.size().width() != ev.oldSize().width() and not self.across:
                self._ask_room(self.cell - GAP)
            self._fit_width()

    def _fit_width(self) -> None:
        """As wide as square thumbnails need, so the numbers and the colour bar sit beside them.

        With the sink map beside, the grid and the sink map share the width half and half instead.
        """
        if self.across or self.sinkPlot.isVisible():
            room = self.width() - 90  # less the colour bar
            share = self._sink_share() if self.sinkPlot.isVisible() else 0.5
            for plot, part in ((self.plot, 1 - share), (self.sinkPlot, share)):
                plot.setPreferredWidth(max(120.0, room * part))
                plot.setMaximumWidth(max(120.0, room * part))
        else:
            grid_h, grid_w = self.image.image.shape[:2]
            view_h = self.plot.getViewBox().height() or self.height()
            need = max(120.0, view_h * grid_w / grid_h + self.plot.getAxis("left").width() + 4)
            if abs(self.plot.maximumWidth() - need) > 0.5:
                self.plot.setMaximumWidth(need)
                # the grid and its colour bar move left: repaint the whole view, or the pixels of
                # their old place stay on screen (seen on X11 as a second, stale model view)
                QtCore.QTimer.singleShot(0, self, self._repaint_all)  # dropped if the view is gone by then
        # pyqtgraph sizes the layout to the view before this widens its plots, and Qt clamps it to the
        # plots' old maximum widths: a grid laid out while its dock was behind another tab (100 px wide)
        # stayed that narrow in front, its titles over each other. The layout takes the whole view again.
        self.ci.setGeometry(self.range)
        for axis in self.names:
            self._fit_name(axis)
        if self.shape != (0, 0):  # the labels that have room at this scale
            self._label_axes(self.cell - GAP)
            self._show_sink_ticks()

    def _sink_share(self) -> float:
        """The sink map's part of the width: half with the layers across (as wide as the grid); a third beside a grid
        of layers down (the 8B's 32 x 32: one colour per head needs less than the thumbnails)."""
        return 0.5 if self.across else 1 / 3

    def _repaint_all(self) -> None:
        self.viewport().update()

    def head_at(self, scene_pos) -> tuple[int, int] | None:
        """The (layer, head) under ``scene_pos`` in the grid or the sink map, else None."""
        if self.shape == (0, 0):
            return None
        t = self.cell - GAP
        for plot in (self.plot, self.sinkPlot):
            if not plot.isVisible() or not plot.sceneBoundingRect().contains(scene_pos):
                continue
            p = plot.getViewBox().mapSceneToView(scene_pos)
            col = int(np.searchsorted(self._cols, p.x(), side="right")) - 1
            if col < 0 or p.x() >= self._cols[col] + t:
                return None
            row = int(np.searchsorted(self._rows, p.y(), side="right")) - 1
            if row < 0 or p.y() >= self._rows[row] + t:
                return None
            return (col, row) if self.across else (row, col)
        return None

    def _on_hover(self, scene_pos) -> None:
        found = self.head_at(scene_pos)
        if found is None:
            return
        layer, head = found
        group = f" (K/V head {head // self.groups + 1})" if self.groups < self.shape[1] else ""
        sink = f": sink mass {self.sink[layer, head]:.2f}" if self.sink is not None else ""
        if self.distance is not None:
            sink += f", mean distance {self.distance[layer, head]:,.1f} tokens"
        if (side := self._side()) is not None:
            sink = f": {side[1]} {side[0][layer, head]:+.3f}"
        strike = "; Ctrl+click to strike it out or restore it" if self.struck_allowed else ""
        self.setToolTip(f"layer {layer + 1}, head {head + 1}{group}{sink} — click to open it{strike}")

    def _on_click(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        found = self.head_at(event.scenePos())
        if found is not None:
            ctrl = event.modifiers() & QtCore.Qt.KeyboardModifier.ControlModifier
            (self.headStruck if ctrl and self.struck_allowed else self.headPicked).emit(*found)

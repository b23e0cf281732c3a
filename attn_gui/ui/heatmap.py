"""One heatmap: a matrix with token labels, a colour bar, cell values and hover read-outs.

Follows pyqtgraph's MatrixDisplayExample: a row-major ImageItem with cells centred on
integer ticks, the y axis inverted so row 0 is on top, and a ColorBarItem beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

pg.setConfigOptions(imageAxisOrder="row-major", background="w", foreground="k", antialias=False)

WEIGHTS_CMAP = "viridis"
SIGNED_CMAP = "CET-D1A"  # blue - white - red, centred on zero
MASK_FILL = QtGui.QColor(225, 225, 225)
MASK_HATCH = QtGui.QColor(120, 120, 120)
HIGHLIGHT = QtGui.QColor(255, 140, 0)
MAX_VALUE_CELLS = 900  # beyond this many cells values are never written
MAX_TICKS = 48


@dataclass
class MapData:
    """What a heatmap shows: the matrix and how to name its rows, columns and cells.

    Attributes
    ----------
    matrix : (R, C) float array, possibly reduced from a larger one
    title : str
    kind : "weights" (fixed 0..1) or "signed" (diverging, centred on 0)
    row_labels, col_labels : labels of the full axes (before reduction)
    row_blocks, col_blocks : [start, end) of the full axis each displayed row/column covers
    symbol : name used in read-outs, e.g. "alpha"
    head : head index (0-based) or None
    masked_reason : what a -inf cell means ("key after the query")
    """

    matrix: np.ndarray
    title: str
    kind: str = "signed"
    row_labels: list[str] = field(default_factory=list)
    col_labels: list[str] = field(default_factory=list)
    row_blocks: list[tuple[int, int]] | None = None
    col_blocks: list[tuple[int, int]] | None = None
    symbol: str = ""
    head: int | None = None
    masked_reason: str = "masked"
    pair_arrow: bool = False  # read-outs say "query -> key" rather than "[row, col]"


def format_value(v: float) -> str:
    """Compact cell text: 3 significant figures, -inf and NaN spelled out."""
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "-∞" if v < 0 else "∞"
    a = abs(v)
    if a >= 1000:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


NICE_STEPS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_ceil(x: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 times a power of ten that is >= x.

    Colour bars end on round numbers, and small changes of the data do not move them.
    """
    if not np.isfinite(x) or x <= 0:
        return 1.0
    power = 10.0 ** np.floor(np.log10(x))
    for step in NICE_STEPS:
        if step * power >= x * (1 - 1e-9):
            return float(step * power)
    return float(10 * power)


def format_compact(v: float) -> str:
    """Shorter cell text for narrow cells: 2 significant figures, no leading zero."""
    if not np.isfinite(v) or abs(v) >= 100:
        return format_value(v)
    if abs(v) >= 9.95:
        return f"{v:.0f}"
    text = f"{v:.1f}"
    if text in ("0.0", "-0.0"):
        return "0"
    return text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text


FORMATS = (format_value, format_compact)


def _axis_name(labels: list[str], blocks, i: int) -> str:
    if blocks is None:
        return labels[i] if i < len(labels) else str(i)
    start, end = blocks[i]
    if end - start == 1:
        return labels[start] if start < len(labels) else str(start)
    return f"{start}–{end - 1}"


class CellValues(pg.GraphicsObject):
    """Paints every cell's value and the grid lines in one pass, in screen pixels.

    Drawing in device coordinates keeps text crisp and unstretched at any zoom;
    when a cell is narrower than its text, no values are drawn at all.
    """

    def __init__(self):
        super().__init__()
        self._matrix = np.zeros((0, 0))
        self._colors: np.ndarray | None = None
        self.show_values = True
        self.setZValue(10)
        self._font = QtGui.QFont()
        self._font.setPointSizeF(8.5)

    def set_data(self, matrix: np.ndarray, colors: np.ndarray | None) -> None:
        self.prepareGeometryChange()
        self._matrix = matrix
        self._colors = colors  # (R, C) bool: True where the text should be white
        self.update()

    def boundingRect(self) -> QtCore.QRectF:
        R, C = self._matrix.shape if self._matrix.ndim == 2 else (0, 0)
        return QtCore.QRectF(-0.5, -0.5, C, R)

    def value_format(self, painter_transform: QtGui.QTransform | None = None):
        """The first cell-text format whose widest value fits a cell, or None: values hidden."""
        R, C = self._matrix.shape
        if not self.show_values or R * C == 0 or R * C > MAX_VALUE_CELLS:
            return None
        t = painter_transform if painter_transform is not None else self.deviceTransform()
        if t is None:
            return None
        cell_w = abs(t.m11()) + abs(t.m21())
        cell_h = abs(t.m22()) + abs(t.m12())
        metrics = QtGui.QFontMetricsF(self._font)
        if cell_h < metrics.height() + 1:
            return None
        for fmt in FORMATS:
            widest = max(metrics.horizontalAdvance(fmt(float(v))) for v in self._matrix.ravel())
            if cell_w >= widest + 4:
                return fmt
        return None

    def paint(self, painter: QtGui.QPainter, *args) -> None:
        R, C = self._matrix.shape if self._matrix.ndim == 2 else (0, 0)
        if R * C == 0:
            return
        t = painter.transform()
        painter.save()
        painter.resetTransform()
        cell_w = abs(t.m11()) + abs(t.m21())
        if cell_w >= 6 and R <= 256 and C <= 256:
            pen = QtGui.QPen(QtGui.QColor(255, 255, 255, 160))
            pen.setWidthF(1.0)
            painter.setPen(pen)
            for r in range(1, R):
                painter.drawLine(t.map(QtCore.QPointF(-0.5, r - 0.5)), t.map(QtCore.QPointF(C - 0.5, r - 0.5)))
            for c in range(1, C):
                painter.drawLine(t.map(QtCore.QPointF(c - 0.5, -0.5)), t.map(QtCore.QPointF(c - 0.5, R - 0.5)))
        fmt = self.value_format(t)
        if fmt is not None:
            painter.setFont(self._font)
            cell_h = abs(t.m22()) + abs(t.m12())
            for r in range(R):
                for c in range(C):
                    centre = t.map(QtCore.QPointF(c, r))
                    white = self._colors is not None and bool(self._colors[r, c])
                    painter.setPen(QtGui.QColor("white") if white else QtGui.QColor(20, 20, 20))
                    rect = QtCore.QRectF(centre.x() - cell_w / 2, centre.y() - cell_h / 2, cell_w, cell_h)
                    painter.drawText(rect, QtCore.Qt.AlignmentFlag.AlignCenter, fmt(float(self._matrix[r, c])))
        painter.restore()


class HeatmapView(pg.GraphicsLayoutWidget):
    """A titled matrix heatmap with labelled axes, colour bar, values and hover read-out.

    Its ``image`` ImageItem holds exactly the matrix shown (``image.image``).

    Signals
    -------
    rowClicked(int)
        A row was clicked; the argument is the index on the full (unreduced) row axis.
    """

    rowClicked = QtCore.Signal(int)

    def __init__(self, name: str = "", parent: QtWidgets.QWidget | None = None, compact: bool = False):
        super().__init__(parent=parent)
        self.setObjectName(name)
        self.data: MapData | None = None
        self._last: dict = {}
        self.compact = compact
        self.setMinimumSize(120, 110)
        self.ci.layout.setContentsMargins(2, 2, 2, 2)
        self.plot: pg.PlotItem = self.addPlot(row=0, col=0)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.titleLabel.updateMin = self._title_min
        self.plot.invertY(True)
        self.plot.getViewBox().setMouseEnabled(x=True, y=True)
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        for side in ("left", "top"):
            ax = self.plot.getAxis(side)
            ax.setStyle(tickTextOffset=2, tickLength=0)
            ax.setTickFont(QtGui.QFont(self.font().family(), 8))
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.mask_fill = QtWidgets.QGraphicsPathItem()
        self.mask_fill.setBrush(MASK_FILL)
        self.mask_fill.setPen(QtGui.QPen(QtCore.Qt.PenStyle.NoPen))
        self.mask_hatch = QtWidgets.QGraphicsPathItem()
        self.mask_hatch.setBrush(QtGui.QBrush(MASK_HATCH, QtCore.Qt.BrushStyle.BDiagPattern))
        self.mask_hatch.setPen(QtGui.QPen(QtCore.Qt.PenStyle.NoPen))
        for i, item in enumerate((self.mask_fill, self.mask_hatch)):
            item.setZValue(5 + i)
            self.plot.addItem(item)
        self.values = CellValues()
        self.plot.addItem(self.values)
        self.highlight = highlight_rect()
        self.highlight.hide()
        self.plot.addItem(self.highlight)
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP),
                                        interactive=False, width=12, colorMapMenu=False)
        # thumbnails share the weights' fixed 0..1 scale with the full maps, so they skip the bar
        self.colorbar.setImageItem(self.image, insert_in=None if compact else self.plot)
        if compact:  # thumbnails: the picture and a title; hovering still names every cell
            self.plot.hideAxis("top")
            self.plot.hideAxis("left")
        self._highlight_row: int | None = None
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._context_menu)

    # rendering -------------------------------------------------------------------------------

    def set_data(self, data: MapData) -> None:
        """Show ``data``: image, levels, colour map, labels, values and masked cells."""
        m = np.asarray(data.matrix, dtype=np.float64 if data.matrix.dtype == np.float64 else np.float32)
        self.data = data
        R, C = m.shape
        finite = np.isfinite(m)
        all_finite = bool(finite.all())
        if data.kind == "weights":
            levels, cmap = (0.0, 1.0), pg.colormap.get(WEIGHTS_CMAP)
        else:
            if all_finite:
                top = nice_ceil(float(max(m.max(), -m.min())))
            else:
                top = nice_ceil(float(np.max(np.abs(m[finite]))) if finite.any() else 1.0)
            levels, cmap = (-top, top), pg.colormap.get(SIGNED_CMAP)
        shown = m if all_finite else np.where(finite, m, levels[0] if data.kind == "weights" else 0.0)
        self.image.setImage(shown, autoLevels=False, levels=levels)
        # Only what changed is touched: typing changes numbers far more often than shapes,
        # labels or titles, and each of those makes pyqtgraph lay out and repaint an axis.
        last = self._last
        if last.get("kind") != data.kind:
            self.colorbar.setColorMap(cmap)
        if last.get("levels") != levels:
            self.colorbar.setLevels(levels)
        self._set_mask(None if all_finite else ~finite)
        white = self._white_text(shown, levels, cmap, data.kind) if m.size <= MAX_VALUE_CELLS else None
        self.values.set_data(m, white)
        if last.get("title") != data.title:
            self.plot.setTitle(data.title, size="9pt")
        layout_key = ((R, C), data.row_labels, data.col_labels, data.row_blocks, data.col_blocks)
        if last.get("layout") != layout_key:
            self.image.setRect(QtCore.QRectF(-0.5, -0.5, C, R))
            self._fit()
            self.plot.getViewBox().setLimits(xMin=-0.5, xMax=C - 0.5, yMin=-0.5, yMax=R - 0.5)
            self.plot.getViewBox().setRange(xRange=(-0.5, C - 0.5), yRange=(-0.5, R - 0.5), padding=0)
        elif last.get("title") != data.title:
            self._fit()
        self._last = {"kind": data.kind, "levels": levels, "title": data.title, "layout": layout_key}
        self.set_highlight(self._highlight_row)
        self.ci.layout.activate()  # lay out now, so a picture taken right away has every label

    @staticmethod
    def _white_text(shown: np.ndarray, levels, cmap, kind: str) -> np.ndarray:
        lo, hi = levels
        frac = np.clip((shown - lo) / (hi - lo), 0, 1)
        rgb = cmap.map(frac.ravel(), mode="float")[:, :3]
        luminance = rgb @ np.array([0.299, 0.587, 0.114])
        return (luminance < 0.5).reshape(shown.shape)

    def _set_mask(self, mask: np.ndarray | None) -> None:
        path = QtGui.QPainterPath()
        if mask is not None and mask.any():
            for r in np.flatnonzero(mask.any(axis=1)):
                row = mask[r]
                # one rectangle per run of masked cells in this row
                edges = np.flatnonzero(np.diff(np.concatenate(([0], row.astype(np.int8), [0]))))
                for start, end in zip(edges[::2], edges[1::2]):
                    path.addRect(QtCore.QRectF(start - 0.5, r - 0.5, end - start, 1))
        self.mask_fill.setPath(path)
        self.mask_hatch.setPath(path)
        for item in (self.mask_fill, self.mask_hatch):  # an empty path would export as invalid SVG
            item.setVisible(not path.isEmpty())

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        # pyqtgraph's close() clears the scene and a resize may follow: nothing left to fit then
        if getattr(self, "data", None) is not None and not getattr(self, "closed", False):
            self._fit()

    def _fit(self) -> None:
        """Wrap the title and shorten or thin the labels to the space this map has now."""
        R, C = self.data.matrix.shape
        axis_font = QtGui.QFontMetrics(QtGui.QFont(self.font().family(), 8))
        plot_h = max(40, self.height() - 60)
        plot_w = max(40, self.width() - 120)
        if not self.compact:
            self._set_ticks("left", R, self.data.row_labels, self.data.row_blocks,
                            per_label_px=plot_h / R, need_px=axis_font.height(), char_px=None)
        if not self.compact:
            self._set_ticks("top", C, self.data.col_labels, self.data.col_blocks,
                            per_label_px=plot_w / C, need_px=None, char_px=axis_font.averageCharWidth())
        title = self.plot.titleLabel
        bar = 0 if self.compact else 75  # the title sits above the image only, not the colour bar
        axis = 0 if self.compact else self.plot.getAxis("left").width()
        width = max(50, self.width() - axis - bar)
        title.item.setTextWidth(-1)
        if title.item.boundingRect().width() > width:  # wrap only when it does not fit on one line
            title.item.setTextWidth(width)
            option = title.item.document().defaultTextOption()
            option.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            title.item.document().setDefaultTextOption(option)
        title.updateMin()

    def _title_min(self) -> None:
        """Replaces LabelItem.updateMin: the title wraps, so it never sets the map's minimum width."""
        title = self.plot.titleLabel
        h = title.item.boundingRect().height()
        title.setMinimumWidth(0)
        title.setMinimumHeight(h)
        title.setMaximumHeight(h)
        title.updateGeometry()

    def _set_ticks(self, side: str, n: int, labels: list[str], blocks, per_label_px: float,
                   need_px: float | None, char_px: float | None) -> None:
        if char_px:  # top axis: labels sit side by side; a label needs room for 3 characters
            need_px = char_px * 4
        step = 1
        if need_px and per_label_px < need_px:
            step = int(np.ceil(need_px / per_label_px))
        step = max(step, int(np.ceil(n / (12 if self.compact else MAX_TICKS))))
        max_chars = 14
        if char_px:  # shorten the labels to the gap between two shown labels
            max_chars = max(2, min(14, int(per_label_px * step // char_px) - 1))
        ticks = []
        for i in range(0, n, step):
            if blocks is None:
                text = labels[i] if i < len(labels) else str(i)
            else:
                start = blocks[i][0]
                text = labels[start] if start < len(labels) else str(start)
            ticks.append((i, _visible(text, max_chars)))
        axis = self.plot.getAxis(side)
        axis.setTicks([ticks])
        if side == "left":  # pyqtgraph drops labels wider than the axis; size it to the longest
            metrics = QtGui.QFontMetrics(axis.style.get("tickFont") or self.font())
            axis.setWidth(max((metrics.horizontalAdvance(t) for _, t in ticks), default=10) + 8)

    def set_highlight(self, row: int | None) -> None:
        """Outline the displayed row holding full-axis row ``row`` (None hides it)."""
        self._highlight_row = row
        if row is None or self.data is None:
            self.highlight.hide()
            return
        shown = self._display_row(row)
        if shown is None:
            self.highlight.hide()
            return
        C = self.data.matrix.shape[1]
        self.highlight.setRect(QtCore.QRectF(-0.5, shown - 0.5, C, 1))
        self.highlight.show()

    def _display_row(self, row: int) -> int | None:
        blocks = self.data.row_blocks
        if blocks is None:
            return row if 0 <= row < self.data.matrix.shape[0] else None
        for i, (start, end) in enumerate(blocks):
            if start <= row < end:
                return i
        return None

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
        d = self.data
        v = float(d.matrix[r, c])
        rname = _axis_name(d.row_labels, d.row_blocks, r)
        cname = _axis_name(d.col_labels, d.col_blocks, c)
        where = f"{rname} → {cname}" if d.pair_arrow else f"{rname}, {cname}"
        value = f"{v:.6g}" if np.isfinite(v) else format_value(v)
        text = f"{d.symbol}[{where}] = {value}"
        if d.head is not None:
            text += f", head {d.head + 1}"
        reduced = (d.row_blocks and d.row_blocks[r][1] - d.row_blocks[r][0] > 1) or (
            d.col_blocks and d.col_blocks[c][1] - d.col_blocks[c][0] > 1)
        if reduced:
            text += " (largest magnitude in this block; zoom in or export for every cell)"
        if np.isneginf(v):
            text += f" ({d.masked_reason})"
        elif not np.isfinite(v):
            text += " (not finite: overflow in this dtype)"
        return text

    def reset_zoom(self) -> None:
        if self.data is not None:
            R, C = self.data.matrix.shape
            self.plot.getViewBox().setRange(xRange=(-0.5, C - 0.5), yRange=(-0.5, R - 0.5), padding=0)

    def _context_menu(self, pos: QtCore.QPoint) -> None:
        menu = QtWidgets.QMenu(self)
        menu.addAction("Export image…", self.export_dialog)
        menu.addAction("Copy image", self.copy_image)
        menu.addSeparator()
        menu.addAction("Reset zoom", self.reset_zoom)
        menu.exec(self.mapToGlobal(pos))

    def copy_image(self) -> None:
        """Put this map, as a PNG picture, on the clipboard."""
        from .. import export

        export.copy_image(self)

    def export_dialog(self) -> None:
        """Ask for a PNG or SVG file and a pixel width, then write this map there."""
        from .. import export

        if self.data is None:
            return
        stem = self.objectName().replace("heatmap:", "").replace(":", "_head") or "map"
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Export image", f"{stem}.png", "PNG image (*.png);;SVG drawing (*.svg)")
        if not path:
            return
        width = None
        if not path.lower().endswith(".svg"):
            width, ok = QtWidgets.QInputDialog.getInt(
                self, "Export image", "Width in pixels (the picture scales as a whole):",
                max(self.width(), 800), 100, 10000, 100)
            if not ok:
                return
        try:
            export.export_image(self, path, width)
        except (OSError, ValueError) as exc:
            QtWidgets.QMessageBox.warning(self, "Export failed", str(exc))

    def _on_mouse_moved(self, scene_pos) -> None:
        cell = self.cell_at(scene_pos)
        self.setToolTip(self.describe(*cell) if cell else "")
        if cell:
            QtWidgets.QToolTip.showText(QtGui.QCursor.pos(), self.toolTip(), self)

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        cell = self.cell_at(event.scenePos())
        if cell is None:
            return
        blocks = self.data.row_blocks
        self.rowClicked.emit(blocks[cell[0]][0] if blocks else cell[0])


def highlight_rect() -> QtWidgets.QGraphicsRectItem:
    """The orange outline that marks the followed token's row (or the chosen head)."""
    rect = QtWidgets.QGraphicsRectItem()
    pen = QtGui.QPen(HIGHLIGHT)
    pen.setWidthF(2.5)
    pen.setCosmetic(True)  # the same width at every zoom
    rect.setPen(pen)
    rect.setZValue(20)
    return rect


def _visible(label: str, max_chars: int = 14) -> str:
    """Make whitespace tokens visible on an axis and keep long tokens short."""
    if label == " ":
        return "␣"
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"

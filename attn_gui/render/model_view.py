"""BertViz's model view, in one picture: every layer's and head's alpha as a grid of thumbnails.

One RGBA image holds the whole grid (6 x 12 heads of a real model), so it draws as fast
as a single map; a click picks the layer and head to open in the full views.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from .style import WEIGHTS_CMAP, highlight_rect, mask_items, mask_rects, set_mask

GAP = 2  # white pixels between thumbnails


class ModelView(pg.GraphicsLayoutWidget):
    """All heads of all layers of a model-mode frame.

    Signals
    -------
    headPicked(int, int)
        A thumbnail was clicked: layer, head (both 0-based).
    """

    headPicked = QtCore.Signal(int, int)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent=parent)
        self.setObjectName("modelView")
        self.plot = self.addPlot()
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)  # square thumbnails, as every map of alpha is square
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        for side, name in (("left", "layer"), ("top", "head")):
            axis = self.plot.getAxis(side)
            axis.setLabel(name)
            axis.setPen(pg.mkPen(None))  # no axis line, only the numbers and the name
            axis.setTextPen(pg.mkPen("k"))
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.mask_fill, self.mask_hatch = mask_items()
        for item in (self.mask_fill, self.mask_hatch):
            self.plot.addItem(item)
        # the colour of alpha's fixed 0..1 scale; the image is already coloured, so the bar stands alone
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get(WEIGHTS_CMAP), interactive=False,
                                        width=12, colorMapMenu=False)
        self.colorbar.axis.setTicks([[(v, f"{v:g}") for v in np.linspace(0, 1, 5)]])
        self.addItem(self.colorbar, row=0, col=1)
        self.selected = highlight_rect()
        self.plot.addItem(self.selected)
        self.cell = 1
        self.shape = (0, 0)
        self.scene().sigMouseClicked.connect(self._on_click)
        self.setToolTip("α of every layer (rows) and head (columns), both numbered from 1: click one to open it")

    def set_weights(self, weights: np.ndarray, layer: int, head: int, hidden: tuple[int, ...] = (),
                    seq_len: int | None = None, masked: np.ndarray | None = None,
                    other_layers: np.ndarray | None = None) -> None:
        """Show ``weights`` (layers, heads, t, t) and outline ``layer``, ``head``.

        ``hidden`` tokens are left out only when the thumbnails are not reduced (t == seq_len).
        ``masked`` (t, t) bool marks the cells a mask removed in layer ``layer`` (the same in
        every head), ``other_layers`` those of every other layer (a decoder's causal mask);
        they are hatched as in every other map of alpha.
        """
        L, H, t, _ = weights.shape
        masks = [masked if i == layer else other_layers for i in range(L)]
        masks = [m if m is not None and m.shape == (t, t) else None for m in masks]
        if hidden and t == seq_len:
            keep = [i for i in range(t) if i not in hidden]
            if keep:
                weights = weights[:, :, keep][:, :, :, keep]
                masks = [None if m is None else m[np.ix_(keep, keep)] for m in masks]
                t = len(keep)
        cell = t + GAP
        rgba = np.full((L * cell - GAP, H * cell - GAP, 4), 255, dtype=np.uint8)
        colors = pg.colormap.get(WEIGHTS_CMAP).map(np.clip(weights, 0, 1).ravel(), mode="byte")
        colors = colors.reshape(L, H, t, t, 4)
        for i in range(L):
            for j in range(H):
                rgba[i * cell:i * cell + t, j * cell:j * cell + t] = colors[i, j]
        self.image.setImage(rgba, autoLevels=False)
        rects = []
        for i, m in enumerate(masks):
            if m is not None and m.any():
                for j in range(H):
                    rects.extend(mask_rects(m, x0=j * cell, y0=i * cell))
        set_mask((self.mask_fill, self.mask_hatch), rects)
        self.cell, self.shape = cell, (L, H)
        self.plot.getAxis("left").setTicks([[(i * cell + t / 2, str(i + 1)) for i in range(L)]])
        self.plot.getAxis("top").setTicks([[(j * cell + t / 2, str(j + 1)) for j in range(H)]])
        self.plot.getViewBox().setRange(xRange=(0, H * cell - GAP), yRange=(0, L * cell - GAP), padding=0)
        self._fit_width()
        self.selected.setRect(QtCore.QRectF(head * cell - 1, layer * cell - 1, t + 2, t + 2))

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if getattr(self, "shape", (0, 0)) != (0, 0):
            self._fit_width()

    def _fit_width(self) -> None:
        """As wide as square thumbnails need, so the layer numbers and the colour bar sit beside them."""
        L, H = self.shape
        grid_h = L * self.cell - GAP
        view_h = self.plot.getViewBox().height() or self.height()
        need = max(120.0, view_h * (H * self.cell - GAP) / grid_h + self.plot.getAxis("left").width() + 4)
        if abs(self.plot.maximumWidth() - need) > 0.5:
            self.plot.setMaximumWidth(need)
            # the grid and its colour bar move left: repaint the whole view, or the pixels of
            # their old place stay on screen (seen on X11 as a second, stale model view)
            QtCore.QTimer.singleShot(0, self, self._repaint_all)  # dropped if the view is gone by then

    def _repaint_all(self) -> None:
        self.viewport().update()

    def _on_click(self, event) -> None:
        if event.button() != QtCore.Qt.MouseButton.LeftButton or self.shape == (0, 0):
            return
        p = self.plot.getViewBox().mapSceneToView(event.scenePos())
        layer, head = int(p.y() // self.cell), int(p.x() // self.cell)
        if 0 <= layer < self.shape[0] and 0 <= head < self.shape[1]:
            self.headPicked.emit(layer, head)

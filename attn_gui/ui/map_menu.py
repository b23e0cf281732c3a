"""Right-click on any map: export it as PNG or SVG, copy it, choose its colour scale.

Maps on the canvas are drawn again offscreen for the picture (``render_map``), so the
picture is the map alone at a readable size, whatever its size on the canvas.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import UserError
from ..export.images import copy_image, export_image
from ..present.maps import file_stem
from ..present.maps import MapData
from ..present.scales import SCALES, scale_choices
from ..render.heatmap import HeatmapView
from ..render.offscreen import dispose, render_map


def install(view: HeatmapView) -> None:
    """Give ``view`` the maps' context menu."""
    view.setContextMenuPolicy(QtCore.Qt.ContextMenuPolicy.CustomContextMenu)
    view.customContextMenuRequested.connect(lambda pos: _menu(view, pos))


def _menu(view: HeatmapView, pos: QtCore.QPoint) -> None:
    menu = QtWidgets.QMenu(view)
    menu.addAction("Export image…", lambda: export_dialog(view))
    menu.addAction("Copy image", lambda: copy_image(view))
    menu.addSeparator()
    menu.addAction("Reset zoom", view.reset_zoom)
    menu.exec(view.mapToGlobal(pos))


def export_dialog(view: HeatmapView) -> None:
    """Ask for a PNG or SVG file and a pixel width, then write ``view`` there."""
    if view.data is None:
        return
    stem = file_stem(view.data.field, view.data.head) if view.data.field else "map"
    path, _ = QtWidgets.QFileDialog.getSaveFileName(
        view, "Export image", f"{stem}.png", "PNG image (*.png);;SVG drawing (*.svg)")
    if not path:
        return
    width = None
    if not path.lower().endswith(".svg"):
        width, ok = QtWidgets.QInputDialog.getInt(
            view, "Export image", "Width in pixels (the picture scales as a whole):",
            max(view.width(), 800), 100, 10000, 100)
        if not ok:
            return
    try:
        export_image(view, path, width)
    except UserError as exc:
        QtWidgets.QMessageBox.warning(view, "Export failed", str(exc))


def canvas_menu(owner: QtWidgets.QWidget, data: MapData,
                choose_scale: Callable[[str], None] | None = None) -> QtWidgets.QMenu:
    """The context menu of a canvas map showing ``data``: export or copy it as a picture of its own,
    and (given ``choose_scale``, called with the chosen mode) its colour scale."""
    menu = QtWidgets.QMenu(owner)
    menu.addAction("Export image…", lambda: _offscreen(data, export_dialog))
    menu.addAction("Copy image", lambda: _offscreen(data, copy_image))
    if choose_scale is not None and data.field:
        scales = menu.addMenu("Colour scale")
        scales.setObjectName("colourScaleMenu")
        group = QtGui.QActionGroup(scales)
        for mode in scale_choices(data.kind):
            label = (SCALES[mode] if data.kind == "weights" or mode != "auto" else "Automatic (0 to the map's max)"
                     if data.kind == "angle" else "Automatic (± the map's largest)")
            action = scales.addAction(label, lambda mode=mode: choose_scale(mode))
            action.setCheckable(True)
            action.setChecked(mode == data.scale)
            action.setData(mode)
            group.addAction(action)
    return menu


def _offscreen(data: MapData, use) -> None:
    """Call ``use`` with an offscreen HeatmapView of ``data``, then dispose of it."""
    view = render_map(data)
    try:
        use(view)
    finally:
        dispose(view)

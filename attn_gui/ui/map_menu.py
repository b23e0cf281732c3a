"""Right-click on any map: export it as PNG or SVG, copy it, reset the zoom."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ..engine import UserError
from ..export.images import copy_image, export_image
from ..present.maps import file_stem
from ..render.heatmap import HeatmapView


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

"""One map as a PNG (at any pixel width) or an SVG (text stays text), written atomically."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from PySide6 import QtCore, QtGui, QtSvg
from pyqtgraph.exporters import ImageExporter, SVGExporter

from ..render.heatmap import HeatmapView
from .files import ExportError, atomic_write, scaled_size

PADDING = 10  # white border around each exported map, in layout pixels
RECT_CELLS = 128 * 128  # up to this many cells an SVG draws each as a rectangle (larger: a pixelated image)


def render_image(view: HeatmapView, width: int | None = None) -> QtGui.QImage:
    """The whole of ``view`` (title, labels, colour bar, values) as an image.

    Parameters
    ----------
    view : HeatmapView
    width : int, optional
        Pixel width of the image; default the view's own width plus a white border of
        ``PADDING`` on each side. The picture is scaled
        as a whole, text and grid lines included, so it reads the same at any width.

    Returns
    -------
    QImage
        ARGB32 on a white background.
    """
    exporter = ImageExporter(view.ci)
    source = exporter.getSourceRect()
    target = QtCore.QRectF(PADDING, PADDING, source.width(), source.height())
    w, h = scaled_size(source.width() + 2 * PADDING, source.height() + 2 * PADDING, width)
    scale = w / (source.width() + 2 * PADDING)
    image = QtGui.QImage(w, h, QtGui.QImage.Format.Format_ARGB32)
    # ImageExporter would scale the scene but not the cell values, which are painted
    # in device pixels; a device pixel ratio scales everything alike.
    image.setDevicePixelRatio(scale)
    image.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(image)
    try:
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing, True)
        painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
        exporter.setExportMode(True, {"antialias": True, "background": QtGui.QColor("white"),
                                      "painter": painter, "resolutionScale": scale})
        view.scene().render(painter, target, source)
    finally:
        exporter.setExportMode(False)
        painter.end()
    image.setDevicePixelRatio(1.0)
    return image


_EMPTY_PATH = re.compile(rb'<path[^>]*\sd=""[^>]*/>\s*')
_FONT = re.compile(rb'font-family="([^"]*)"')
GENERIC_FONTS = {b"sans serif": b"sans-serif", b"sans": b"sans-serif", b"sans-serif": b"sans-serif",
                 b"serif": b"serif", b"monospace": b"monospace"}


def _generic_font(match: re.Match) -> bytes:
    """Qt's family name as a CSS list: the font Qt really drew with, then a generic family.

    "Sans Serif" is Qt's alias, no CSS name: a browser would fall back to a serif font.
    Naming the resolved font first keeps the text's widths as Qt laid them out.
    """
    family = match.group(1).strip()
    generic = GENERIC_FONTS.get(family.lower(), b"sans-serif")
    real = QtGui.QFontInfo(QtGui.QFont(family.decode("utf-8", "replace"))).family().encode("utf-8")
    real = real.replace(b"'", b"").replace(b'"', b"")
    return b'font-family="' + (b"'" + real + b"', " if real else b"") + generic + b'"'


def readable_svg(svg: bytes) -> bytes:
    """Qt's SVG made to read the same in a browser as in Qt.

    Empty mask paths (``d=""``, which SVG readers reject) are dropped; every font list ends
    in a generic family, so a browser without Qt's font never falls back to a serif; and
    images (the cells of large maps) are scaled as crisp pixels, not blurred.
    """
    svg = _EMPTY_PATH.sub(b"", svg)
    svg = _FONT.sub(_generic_font, svg)
    return svg.replace(b"<image ", b'<image style="image-rendering:pixelated" ')


def render_svg(view: HeatmapView) -> bytes:
    """The whole of ``view`` as an SVG document (text stays text), UTF-8 bytes.

    Qt's SVG generator draws the scene directly: pyqtgraph 0.14's SVGExporter fails on
    the closed paths that Qt 6 writes (pyqtgraph issue #3495). Cells are rectangles up to
    ``RECT_CELLS`` cells, beyond that a pixelated image, so they are crisp in every reader.
    """
    exporter = SVGExporter(view.ci)
    source = exporter.getSourceRect()
    page = QtCore.QRectF(0, 0, source.width() + 2 * PADDING, source.height() + 2 * PADDING)
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    generator = QtSvg.QSvgGenerator()
    generator.setOutputDevice(buffer)
    generator.setSize(page.size().toSize())
    generator.setViewBox(page)
    generator.setResolution(96)
    generator.setTitle(view.data.title if view.data is not None else "Attention Explorer")
    generator.setDescription("Attention Explorer (attn-gui)")
    small = view.data is not None and view.data.matrix.size <= RECT_CELLS
    cells = view.cells_as_rectangles() if small else contextlib.nullcontext()
    painter = QtGui.QPainter(generator)
    try:
        with cells:
            exporter.setExportMode(True, {"antialias": True, "background": QtGui.QColor("white"),
                                          "painter": painter})
            painter.fillRect(page, QtGui.QColor("white"))
            view.scene().render(painter, page.adjusted(PADDING, PADDING, -PADDING, -PADDING), source)
    finally:
        exporter.setExportMode(False)
        painter.end()
    return readable_svg(bytes(buffer.data().data()))


def png_bytes(image: QtGui.QImage) -> bytes:
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]  # PySide6's stub: bytes only; str works
        raise ExportError("Qt could not encode the PNG image")
    return bytes(buffer.data().data())


def export_image(view: HeatmapView, path: str | os.PathLike, width: int | None = None) -> Path:
    """Save ``view`` as PNG or SVG, chosen by the suffix of ``path``, atomically.

    Parameters
    ----------
    view : HeatmapView
        A map, e.g. from ``render_map`` or one of the window's.
    path : path-like
        Ends in ``.png`` or ``.svg``.
    width : int, optional
        Pixel width of a PNG (ignored for SVG, which scales freely).

    Returns
    -------
    Path

    Raises
    ------
    ExportError
        Unknown suffix, bad width, or a folder that is missing or not writable.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        data = png_bytes(render_image(view, width))
    elif suffix == ".svg":
        data = render_svg(view)
    else:
        raise ExportError(f"cannot tell the image format of {path.name}: use .png or .svg")
    atomic_write(path, data)
    return path


def copy_image(view: HeatmapView, width: int | None = None) -> QtGui.QImage:
    """Put the PNG rendering of ``view`` on the clipboard and return it."""
    image = render_image(view, width)
    QtGui.QGuiApplication.clipboard().setImage(image)
    return image

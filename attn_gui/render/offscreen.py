"""Lay maps and the whole figure out without a screen, sized to read well as pictures."""

from __future__ import annotations

import os
import sys
from typing import cast

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..present.explain import figure_caption
from ..present.frame import Frame
from ..present.maps import MapData
from .cells import MAX_VALUE_CELLS
from .canvas import Canvas
from .collector import collect_now, collect_on_gui_thread
from .heatmap import HeatmapView

MAP_MIN_SIZE = (560, 500)
MAP_MAX_SIZE = (1800, 1400)
MAP_MARGIN = (180, 100)  # row labels + colour bar, title + column labels
CELL_SIZE = (44, 30)  # room for a value such as "-0.12" in every cell
SMALL_CELL_SIZE = (16, 16)  # matrices too big to print values get small cells
FIGURE_SIZE = (1800, 1100)  # the figure's layout, its title included (the picture is cropped to the maps)
TITLE_H = 56  # the figure's title: the sentence, then the sizes and the head shown


def _quiet_offscreen_plugin() -> None:
    """Drop the offscreen platform's one harmless warning; pass every other message on."""
    previous = None

    def handler(mode, context, message):
        if "does not support propagateSizeHints" in message:
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            sys.stderr.write(message + "\n")

    previous = QtCore.qInstallMessageHandler(handler)


MADE_HERE = "attn_gui_made"  # a QApplication property: made to draw offscreen, not by the caller's program


def ensure_app(offscreen: bool = False) -> QtWidgets.QApplication:
    """The running QApplication, created (by pyqtgraph's ``mkQApp``) if there is none.

    Parameters
    ----------
    offscreen : bool
        Use Qt's offscreen platform when creating the application, display or not
        (the command line does: it never shows a window). Without it the offscreen
        platform is chosen only when neither DISPLAY nor WAYLAND_DISPLAY is set.
        Ignored when an application already exists.

    Python's automatic garbage collection is off from here on (see ``render.collector``);
    ``dispose`` collects between pictures.
    """
    existing = QtWidgets.QApplication.instance()
    if existing is not None:
        collect_on_gui_thread()
        return cast(QtWidgets.QApplication, existing)  # the window's, or one made here: widgets need one
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if offscreen or headless:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        _quiet_offscreen_plugin()
    # made from a clean argv: Qt decodes argv itself and crashes on bytes that are not UTF-8
    # (a folder name such as b"bad\xfe2" among the command's arguments)
    app = QtWidgets.QApplication(["attn-gui"])
    app.setApplicationName("attn-gui")
    app.setProperty(MADE_HERE, True)  # no event loop of the caller's runs it: ``attn_gui.show`` runs one
    pg.mkQApp()  # adopts the application made above (pyqtgraph's own settings)
    collect_on_gui_thread()
    return app


def map_size(data: MapData) -> tuple[int, int]:
    """The (width, height) in pixels at which a map of ``data`` is laid out to read well.

    Small matrices get the size of a comfortable window (about 560 x 500); larger ones
    grow so each cell can hold its printed value, up to ``MAP_MAX_SIZE``.
    """
    rows, cols = data.matrix.shape
    cell_w, cell_h = CELL_SIZE if rows * cols <= MAX_VALUE_CELLS else SMALL_CELL_SIZE
    w = min(max(MAP_MARGIN[0] + cols * cell_w, MAP_MIN_SIZE[0]), MAP_MAX_SIZE[0])
    h = min(max(MAP_MARGIN[1] + rows * cell_h, MAP_MIN_SIZE[1]), MAP_MAX_SIZE[1])
    return w, h


def lay_out(widget: QtWidgets.QWidget, width: int, height: int) -> None:
    """Lay ``widget`` out at width x height without putting it on any screen."""
    widget.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
    widget.resize(width, height)
    widget.show()
    QtWidgets.QApplication.processEvents()


def dispose(widget: QtWidgets.QWidget) -> None:
    """Delete an offscreen widget made here, now rather than at the next turn of the event loop.

    Not ``close()``: pyqtgraph's GraphicsView.close() clears the scene while a
    HeatmapView with data still refits its labels on the resulting resize.
    """
    widget.hide()
    widget.deleteLater()
    QtCore.QCoreApplication.sendPostedEvents(widget, QtCore.QEvent.Type.DeferredDelete)
    collect_now()  # between pictures: no Qt call is under way (see render.collector)


def render_map(data: MapData, width: int | None = None, height: int | None = None) -> HeatmapView:
    """An offscreen HeatmapView showing ``data``, sized for a readable picture.

    Parameters
    ----------
    data : MapData
        The map, e.g. from ``present.maps.map_data``.
    width, height : int, optional
        The layout's size in pixels; default from the matrix shape (see ``map_size``).

    Returns
    -------
    HeatmapView
        Laid out and ready to be drawn; never on screen. The caller owns it:
        ``dispose()`` it when done, never ``close()`` it.
    """
    ensure_app()
    view = HeatmapView("export")
    view.axis_titles = True  # a picture stands alone: it names its axes
    w, h = map_size(data)
    lay_out(view, w if width is None else width, h if height is None else height)
    view.set_data(data)
    QtWidgets.QApplication.processEvents()  # let the layout take the new label widths
    return view


def render_figure(frame: Frame, figure: Canvas | None = None, head: int = 0) -> QtGui.QImage:
    """The whole figure as a QImage: a title, then every map of ``frame``, laid out as the window lays them out.

    Drawn offscreen for a picture: the title gives the sentence, the sizes and the head
    shown; there are no outlines and no hints about clicking. The canvas's layout
    (``present.layout``) places the maps, so the picture shows what the window shows;
    thumbnails below the fold are in it too.

    Parameters
    ----------
    frame : Frame
    figure : Canvas, optional
        The window's canvas: the picture shows its head, hidden tokens, focus and colour
        scales, laid out at its size or larger. Without it, ``head`` and alpha in focus laid
        out in ``FIGURE_SIZE``. Either way the picture is cropped to the maps (and the title).
    head : int
        The head shown (0-based) when there is no ``figure``.
    """
    view, head = _figure_canvas(frame, figure, head)
    try:
        body = view.render_scene()
    finally:
        dispose(view)
    return _with_title(body, *figure_caption(frame.result, head))


def _figure_canvas(frame: Frame, figure: Canvas | None, head: int) -> tuple[Canvas, int]:
    """``render_figure``'s canvas, laid out and drawn (the caller disposes of it), and the head it shows."""
    width, height = FIGURE_SIZE
    hidden: tuple[int, ...] = ()
    focus: str | None = "weights"
    scales: tuple[tuple[str, str], ...] = ()
    if figure is not None:
        width, height = max(width, figure.width()), max(height, figure.height() + TITLE_H)
        head, hidden, focus, scales = figure.head, figure.hidden, figure.focus, figure.scales
    ensure_app()
    view = Canvas(picture=True)
    try:
        lay_out(view, width, height - TITLE_H)
        view.show_frame(frame, head, None, hidden, focus, scales)
        QtWidgets.QApplication.processEvents()
    except BaseException:
        dispose(view)
        raise
    return view, head


def render_figure_svg(frame: Frame, figure: Canvas | None = None, head: int = 0) -> bytes:
    """``render_figure`` as an SVG document (its text stays text, its maps drawn by Qt's SVG generator), UTF-8
    bytes: the title and the sizes above the maps, cropped to them as the PNG is."""
    from PySide6 import QtSvg

    view, head = _figure_canvas(frame, figure, head)
    try:
        size = view.render_scene().size()  # the maps' box (the layout's, with its margin)
        title, subtitle = figure_caption(frame.result, head)
        page = QtCore.QRectF(0, 0, size.width(), size.height() + TITLE_H)
        buffer = QtCore.QBuffer()
        buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
        generator = QtSvg.QSvgGenerator()
        generator.setOutputDevice(buffer)
        generator.setSize(page.size().toSize())
        generator.setViewBox(page)
        generator.setResolution(96)
        generator.setTitle(title)
        painter = QtGui.QPainter(generator)
        try:
            painter.fillRect(page, QtGui.QColor("white"))
            font = QtGui.QFont()
            font.setPointSizeF(13)
            font.setBold(True)
            painter.setFont(font)
            painter.drawText(QtCore.QPointF(12, 22), title)
            font.setPointSizeF(10)
            font.setBold(False)
            painter.setFont(font)
            painter.drawText(QtCore.QRectF(12, 28, size.width() - 24, TITLE_H - 28),
                             int(QtCore.Qt.TextFlag.TextWordWrap), subtitle)
            source = QtCore.QRectF(0, 0, size.width(), size.height())
            view.scene().render(painter, source.translated(0, TITLE_H), source)
        finally:
            painter.end()
    finally:
        dispose(view)
    return bytes(buffer.data().data())


def _with_title(body: QtGui.QImage, title: str, subtitle: str) -> QtGui.QImage:
    """``body`` below a white band holding ``title`` and ``subtitle``: as wide as the body (a small body: as the
    title, up to ``FIGURE_SIZE``'s width), the subtitle wrapped within it, the band ``TITLE_H`` pixels or the
    taller its lines need. (SmolLM2's subtitle, nine heads and five next tokens, made the picture as wide as
    itself: half of it blank beside the maps.)"""
    font = QtGui.QFont()
    font.setPointSizeF(13)
    font.setBold(True)
    small = QtGui.QFont(font)
    small.setPointSizeF(10)
    small.setBold(False)
    width = max(body.width(), min(FIGURE_SIZE[0], QtGui.QFontMetrics(font).horizontalAdvance(title) + 24))
    wrap = QtCore.Qt.TextFlag.TextWordWrap | QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop
    title_h = QtGui.QFontMetrics(font).height()
    sub = QtGui.QFontMetrics(small).boundingRect(QtCore.QRect(0, 0, width - 24, 10_000), int(wrap), subtitle)
    band_h = max(TITLE_H, 6 + title_h + 4 + sub.height() + 6)
    image = QtGui.QImage(width, body.height() + band_h, QtGui.QImage.Format.Format_ARGB32)
    image.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(image)
    try:
        painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
        painter.setPen(QtGui.QColor(20, 20, 20))
        painter.setFont(font)
        top = QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignTop
        painter.drawText(QtCore.QRectF(12, 6, width - 24, title_h), top, QtGui.QFontMetrics(font).elidedText(
            title, QtCore.Qt.TextElideMode.ElideRight, width - 24))
        painter.setFont(small)
        painter.setPen(QtGui.QColor(60, 60, 70))
        painter.drawText(QtCore.QRectF(12, band_h - 6 - sub.height(), width - 24, sub.height()), wrap, subtitle)
        painter.drawImage(0, band_h, body)
    finally:
        painter.end()
    return image


MODEL_VIEW_SIZE = (1600, 900)  # the exported model view's least size (a grid of many heads asks for more)


def render_model_view(frame: Frame, head: int = 0) -> QtGui.QImage | None:
    """Every layer's and head's α of a model-mode ``frame`` as the Model view dock draws it (the shown layer's
    ``head`` outlined, the sink mass beside), or None where the frame holds no layer's maps but its own."""
    import numpy as np

    from .model_view import ModelView

    weights = frame.arrays.get("layer_weights")
    if weights is None:
        return None
    ensure_app()
    result = frame.result
    t = weights.shape[-1]
    scaled = frame.arrays.get("scaled")  # the shown layer's mask, as the dock draws it (ui.docks.host)
    masked = np.asarray(np.isneginf(scaled).all(axis=0)) if scaled is not None else None
    view = ModelView()
    try:
        view.set_weights(weights, result.config.layer, head, (), result.seq_len, masked,
                         other_layers=np.triu(np.ones((t, t), dtype=bool), 1) if result.resolved.causal else None,
                         kv_heads=result.resolved.dims.kv_heads, sink=frame.arrays.get("sink_mass"))
        view.resize(max(MODEL_VIEW_SIZE[0], view.minimumWidth()), max(MODEL_VIEW_SIZE[1], view.minimumHeight()))
        view.show()
        for _ in range(3):  # the grid is fitted to the view's size, then its labels to the grid's
            QtWidgets.QApplication.processEvents()
        return view.grab().toImage()
    finally:
        dispose(view)

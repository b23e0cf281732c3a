"""Write the maps, the whole figure and the tensors of a result to files, with or without a window.

Every file is written atomically: it is rendered or serialised in memory, written to a
hidden temporary file in the same folder and renamed over the target, so a failure
never leaves a half-written file behind.

What ``export_all`` writes into its folder (formats permitting):

``<field>.png``, ``<field>.svg``
    One picture per map, as the window draws it: title, token labels, colour bar and
    (where the cells are large enough) each cell's value. Per-head fields are written
    once per head as ``<field>_head<i>.png`` / ``.svg`` with ``i`` counted from 0.
``figure.png``
    The whole figure: every map, laid out as the data flows.
``<field>.npy``
    The full array of each field; per-head fields keep their head axis first.
``<field>.csv``, ``<field>_head<i>.csv``
    One matrix per file, without header, comma separated, every value with enough
    digits to read back the exact float (``inf``/``-inf``/``nan`` spelled out). Rows
    and columns follow the array; the row and column names (tokens or dimension
    indices) are in the manifest.
``manifest.json``
    The config (``AttentionConfig.from_dict`` rebuilds it), tokens, vocabulary, token
    ids, shapes, device, compute time, library versions, the time of the export and
    the list of files written.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .atomic import atomic_write
from .engine import AttentionConfig, AttentionResult

if TYPE_CHECKING:
    from PySide6 import QtGui, QtWidgets

    from .ui.heatmap import HeatmapView, MapData
    from .ui.maps import Frame

IMAGE_FORMATS = ("png", "svg")
ARRAY_FORMATS = ("npy", "csv")
FORMATS = IMAGE_FORMATS + ARRAY_FORMATS
MAX_WIDTH = 10_000
MAX_PIXELS = 100_000_000  # about 400 MB of image memory

MAP_MIN_SIZE = (560, 500)
MAP_MAX_SIZE = (1800, 1400)
MAP_MARGIN = (180, 100)  # row labels + colour bar, title + column labels
CELL_SIZE = (44, 30)  # room for a value such as "-0.12" in every cell
SMALL_CELL_SIZE = (16, 16)  # matrices too big to print values get small cells
FIGURE_SIZE = (1800, 1100)
PADDING = 10  # white border around each exported map, in layout pixels

Progress = Callable[[int, int], None]


def _quiet_offscreen_plugin() -> None:
    """Drop the offscreen platform's one harmless warning; pass every other message on."""
    from PySide6 import QtCore

    previous = None

    def handler(mode, context, message):
        if "does not support propagateSizeHints" in message:
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            sys.stderr.write(message + "\n")

    previous = QtCore.qInstallMessageHandler(handler)


def ensure_app(offscreen: bool = False) -> QtWidgets.QApplication:
    """The running QApplication, created if there is none.

    Parameters
    ----------
    offscreen : bool
        Use Qt's offscreen platform when creating the application, display or not
        (the command line does: it never shows a window). Without it the offscreen
        platform is chosen only when neither DISPLAY nor WAYLAND_DISPLAY is set.
        Ignored when an application already exists.

    Returns
    -------
    QApplication
    """
    from PySide6 import QtWidgets

    app = QtWidgets.QApplication.instance()
    if app is not None:
        return app
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if offscreen or headless:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        _quiet_offscreen_plugin()
    QtWidgets.QApplication.setApplicationName("attn-gui")
    return QtWidgets.QApplication(sys.argv[:1])


def map_size(data: MapData, width: int | None = None) -> tuple[int, int]:
    """The (width, height) in pixels at which a map of ``data`` is laid out to read well.

    Small matrices get the size of a comfortable window (about 560 x 500); larger ones
    grow so each cell can hold its printed value, up to ``MAP_MAX_SIZE``. A ``width``
    fixes the width and keeps the height.
    """
    from .ui.heatmap import MAX_VALUE_CELLS

    rows, cols = data.matrix.shape
    cell_w, cell_h = CELL_SIZE if rows * cols <= MAX_VALUE_CELLS else SMALL_CELL_SIZE
    w = min(max(MAP_MARGIN[0] + cols * cell_w, MAP_MIN_SIZE[0]), MAP_MAX_SIZE[0])
    h = min(max(MAP_MARGIN[1] + rows * cell_h, MAP_MIN_SIZE[1]), MAP_MAX_SIZE[1])
    return (w if width is None else _check_width(width)), h


def _offscreen(widget: QtWidgets.QWidget, width: int, height: int) -> None:
    """Lay ``widget`` out at width x height without putting it on any screen."""
    from PySide6 import QtCore, QtWidgets

    widget.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen, True)
    widget.resize(width, height)
    widget.show()
    QtWidgets.QApplication.processEvents()


def _dispose(widget: QtWidgets.QWidget) -> None:
    """Delete an offscreen widget made here, now rather than at the next turn of the event loop.

    Not ``close()``: pyqtgraph's GraphicsView.close() clears the scene while a
    HeatmapView with data still refits its labels on the resulting resize.
    """
    from PySide6 import QtCore

    widget.hide()
    widget.deleteLater()
    QtCore.QCoreApplication.sendPostedEvents(widget, QtCore.QEvent.Type.DeferredDelete)


def render_map(data: MapData, width: int | None = None) -> HeatmapView:
    """An offscreen HeatmapView showing ``data``, sized for a readable picture.

    Parameters
    ----------
    data : MapData
        The map, e.g. from ``ui.maps.map_data``.
    width : int, optional
        Width of the layout in pixels; default from the matrix shape (see ``map_size``).

    Returns
    -------
    HeatmapView
        Laid out and ready for ``export_image`` or ``copy_image``; never on screen.
        The caller owns it: ``deleteLater()`` it when done, never ``close()`` it (see ``_dispose``).
    """
    from PySide6 import QtWidgets

    from .ui.heatmap import HeatmapView

    ensure_app()
    view = HeatmapView("export")
    _offscreen(view, *map_size(data, width))
    view.set_data(data)
    QtWidgets.QApplication.processEvents()  # let the layout take the new label widths
    return view


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
    from PySide6 import QtCore, QtGui
    from pyqtgraph.exporters import ImageExporter

    exporter = ImageExporter(view.ci)
    source = exporter.getSourceRect()
    target = QtCore.QRectF(PADDING, PADDING, source.width(), source.height())
    w, h = _scaled_size(source.width() + 2 * PADDING, source.height() + 2 * PADDING, width)
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


def render_svg(view: HeatmapView) -> bytes:
    """The whole of ``view`` as an SVG document (text stays text), UTF-8 bytes.

    Qt's SVG generator draws the scene directly: pyqtgraph 0.14's SVGExporter fails on
    the closed paths that Qt 6 writes (pyqtgraph issue #3495).
    """
    from PySide6 import QtCore, QtGui, QtSvg
    from pyqtgraph.exporters import SVGExporter

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
    painter = QtGui.QPainter(generator)
    try:
        exporter.setExportMode(True, {"antialias": True, "background": QtGui.QColor("white"),
                                      "painter": painter})
        painter.fillRect(page, QtGui.QColor("white"))
        view.scene().render(painter, page.adjusted(PADDING, PADDING, -PADDING, -PADDING), source)
    finally:
        exporter.setExportMode(False)
        painter.end()
    # an empty mask path comes out as d="", which SVG readers reject with a warning
    return _EMPTY_PATH.sub(b"", bytes(buffer.data()))


def _png_bytes(image: QtGui.QImage) -> bytes:
    from PySide6 import QtCore

    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError("Qt could not encode the PNG image")
    return bytes(buffer.data())


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
    ValueError
        Unknown suffix or bad width.
    OSError
        The folder is missing or not writable.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        data = _png_bytes(render_image(view, width))
    elif suffix == ".svg":
        data = render_svg(view)
    else:
        raise ValueError(f"cannot tell the image format of {path.name}: use .png or .svg")
    atomic_write(path, data)
    return path


def copy_image(view: HeatmapView, width: int | None = None) -> QtGui.QImage:
    """Put the PNG rendering of ``view`` on the clipboard and return it."""
    from PySide6 import QtGui

    image = render_image(view, width)
    QtGui.QGuiApplication.clipboard().setImage(image)
    return image


def check_writable(folder: str | os.PathLike) -> Path:
    """Create ``folder`` if needed and prove a file can be written there.

    Raises
    ------
    OSError
        ``cannot write to <folder>: <reason>``; nothing is left behind.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "it is a file" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
        raise OSError(f"cannot write to {folder}: {reason}") from exc
    atomic_write(folder / ".attn-gui-write-test", b"")
    try:
        (folder / ".attn-gui-write-test").unlink()
    except OSError as exc:
        raise OSError(f"cannot write to {folder}: {exc.strerror or exc}") from exc
    return folder


def _check_width(width: Any) -> int:
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)):
        raise ValueError(f"width must be a whole number of pixels; got {width!r}")
    if not 1 <= width <= MAX_WIDTH:
        raise ValueError(f"width must be between 1 and {MAX_WIDTH} pixels; got {width}")
    return int(width)


def _scaled_size(w: float, h: float, width: int | None) -> tuple[int, int]:
    """The pixel size of a w x h picture drawn ``width`` pixels wide (ValueError if too big)."""
    if width is None:
        out = max(1, round(w)), max(1, round(h))
    else:
        width = _check_width(width)
        out = width, max(1, round(h * width / w))
    if out[0] * out[1] > MAX_PIXELS:
        raise ValueError(f"a {out[0]} x {out[1]} pixel image is too large; choose a smaller width")
    return out


def parse_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """The export formats named by ``"png,npy"`` or ``("png", "npy")``, in canonical order.

    Raises
    ------
    ValueError
        An unknown or empty list, in one line.
    """
    names = formats.split(",") if isinstance(formats, str) else list(formats)
    names = [str(n).strip().lower().lstrip(".") for n in names]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        shown = ", ".join(repr(n[:20]) for n in unknown[:3])
        raise ValueError(f"unknown export format {shown}; choose from {','.join(FORMATS)}")
    if not names:
        raise ValueError(f"no export format given; choose from {','.join(FORMATS)}")
    return tuple(f for f in FORMATS if f in names)


def _csv_bytes(matrix: np.ndarray) -> bytes:
    """Header-less CSV of a 2-D array; %.9g round-trips float32, %.17g float64."""
    fmt = "%.17g" if matrix.dtype == np.float64 else "%.9g"
    text = io.StringIO()
    np.savetxt(text, np.atleast_2d(matrix), fmt=fmt, delimiter=",")
    return text.getvalue().encode("ascii")


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def array_files(result: AttentionResult, formats: Iterable[str] = ARRAY_FORMATS) -> list[str]:
    """The file names ``write_arrays`` writes for ``result``, in order."""
    from .engine import FIELDS

    formats = parse_formats(formats)
    names = []
    for field in result.fields():
        if "npy" in formats:
            names.append(f"{field}.npy")
        if "csv" in formats:
            if FIELDS[field].per_head:
                names.extend(f"{field}_head{h}.csv" for h in range(result.heads))
            else:
                names.append(f"{field}.csv")
    return names


def write_arrays(result: AttentionResult, folder: str | os.PathLike,
                 formats: Iterable[str] = ARRAY_FORMATS, progress: Callable[[Path], None] | None = None
                 ) -> list[Path]:
    """Write every tensor field of ``result`` into ``folder`` as .npy and/or .csv.

    Parameters
    ----------
    result : AttentionResult
    folder : path-like
        Must exist and be writable.
    formats : iterable of str
        Any of "npy", "csv" (image formats are ignored here).
    progress : callable, optional
        Called with each path once it is written.

    Returns
    -------
    list of Path
        ``<field>.npy`` holds the full array (per-head fields keep the head axis);
        ``<field>.csv`` holds a 2-D field and ``<field>_head<i>.csv`` head ``i`` of a
        per-head field, header-less with full float precision.
    """
    from .engine import FIELDS

    formats = [f for f in parse_formats(formats) if f in ARRAY_FORMATS]
    folder = Path(folder)
    written: list[Path] = []

    def put(name: str, data: bytes) -> None:
        path = folder / name
        atomic_write(path, data)
        written.append(path)
        if progress is not None:
            progress(path)

    for field in result.fields():
        array = result.numpy(field)
        if "npy" in formats:
            put(f"{field}.npy", _npy_bytes(array))
        if "csv" in formats:
            if FIELDS[field].per_head:
                for h in range(array.shape[0]):
                    put(f"{field}_head{h}.csv", _csv_bytes(array[h]))
            else:
                put(f"{field}.csv", _csv_bytes(array))
    return written


def map_file_stem(field: str, head: int | None) -> str:
    """``weights_head0`` for a per-head map, ``x`` for one without heads."""
    return field if head is None else f"{field}_head{head}"


def versions() -> dict[str, str]:
    """Versions of attn-gui and the libraries that made the numbers and pictures."""
    import torch

    from . import __version__

    out = {"attn_gui": __version__, "python": sys.version.split()[0], "numpy": np.__version__,
           "torch": torch.__version__}
    try:
        import PySide6
        import pyqtgraph
        from PySide6 import QtCore

        out.update(PySide6=PySide6.__version__, Qt=QtCore.qVersion(), pyqtgraph=pyqtgraph.__version__)
    except ImportError:  # arrays only, on a machine without Qt
        pass
    return out


def manifest(result: AttentionResult, files: Iterable[str], formats: Iterable[str] = FORMATS,
             width: int | None = None) -> dict[str, Any]:
    """What ``manifest.json`` holds: enough to recompute, read and cite the export."""
    from .engine import as_dict

    info = as_dict(result)
    return {
        "attn_gui_export": 1,
        "config": result.config.to_dict(),
        "tokens": info["tokens"],
        "vocab": info["vocab"],
        "token_ids": info["token_ids"],
        "heads": result.heads,
        "shapes": info["shapes"],
        "device": info["device"],
        "elapsed_ms": info["elapsed_ms"],
        "notes": info["notes"],
        "versions": versions(),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "formats": list(formats),
        "png_width": width,
        "csv": "header-less, comma separated, one matrix per file (<field>_head<i>.csv per head); "
               "rows and columns as in the array; names of token axes are in 'tokens'",
        "files": list(files),
    }


def _hidden_by_scrolling(widget: QtWidgets.QWidget) -> tuple[int, int]:
    """(width, height) of the content of ``widget``'s scroll area that lies out of sight."""
    from PySide6 import QtWidgets

    area = widget.findChild(QtWidgets.QScrollArea)
    if area is None or area.widget() is None:
        return 0, 0
    need = area.widget().size().expandedTo(area.widget().minimumSizeHint())
    return max(0, need.width() - area.viewport().width()), max(0, need.height() - area.viewport().height())


def render_figure(frame: Frame, figure: QtWidgets.QWidget | None = None) -> QtGui.QImage:
    """The whole figure as an image: every map of ``frame``, laid out as the data flows.

    Parameters
    ----------
    frame : Frame
    figure : QWidget, optional
        The window's PipelineView. It is grabbed as it is on screen, unless part of it
        is scrolled out of sight: then a copy showing the same head and token is laid
        out offscreen, large enough for nothing to be cut off.

    Returns
    -------
    QImage
        Without ``figure``, about ``FIGURE_SIZE`` (larger if the maps need it).
    """
    from PySide6 import QtWidgets

    from .ui.pipeline import PipelineView

    width, height = FIGURE_SIZE
    head, token = 0, None
    if figure is not None:
        if _hidden_by_scrolling(figure) == (0, 0):
            return figure.grab().toImage()
        width, height = max(width, figure.width()), max(height, figure.height())
        head, token = getattr(figure, "head", 0), getattr(figure, "token", None)
    ensure_app()
    view = PipelineView()
    try:
        _offscreen(view, width, height)
        view.head, view.token = head, token
        view.show_frame(frame)
        QtWidgets.QApplication.processEvents()
        extra_w, extra_h = _hidden_by_scrolling(view)
        if extra_w or extra_h:
            view.resize(width + extra_w, height + extra_h)
            QtWidgets.QApplication.processEvents()
        return view.grab().toImage()
    finally:
        _dispose(view)


def export_all(frame: Frame, folder: str | os.PathLike, formats: str | Iterable[str] = FORMATS,
               width: int | None = None, figure: QtWidgets.QWidget | None = None,
               progress: Progress | None = None) -> list[Path]:
    """Write every map, the whole figure, every tensor and a manifest into ``folder``.

    Parameters
    ----------
    frame : Frame
        The computed result and its display arrays (``ui.maps.make_frame``).
    folder : path-like
        Created if missing. Existing files of the same names are replaced.
    formats : str or iterable of str
        Any of "png", "svg", "npy", "csv" (a comma list is accepted).
    width : int, optional
        Pixel width of each map's PNG; default the map's own size. ``figure.png``
        keeps the figure's size.
    figure : QWidget, optional
        The live figure to grab for ``figure.png`` (the window's pipeline); without it
        one is laid out offscreen at about 1800 x 1100.
    progress : callable, optional
        ``progress(done, total)`` after each file.

    Returns
    -------
    list of Path
        Every file written, ``manifest.json`` last.

    Raises
    ------
    OSError
        ``cannot write to <folder>: <reason>``, before any file is written.
    ValueError
        Unknown format or bad width.
    """
    from .ui.maps import map_data, map_keys

    formats = parse_formats(formats)
    if width is not None:
        width = _check_width(width)
    result = frame.result
    images = [f for f in IMAGE_FORMATS if f in formats]
    keys = map_keys(result) if images else []
    if "png" in formats:
        for key in keys:
            w, h = map_size(map_data(frame, *key))
            _scaled_size(w + 2 * PADDING, h + 2 * PADDING, width)
    folder = check_writable(folder)
    total = len(keys) * len(images) + ("png" in formats) + len(array_files(result, formats)) + 1
    written: list[Path] = []

    def done(path: Path) -> None:
        written.append(path)
        if progress is not None:
            progress(len(written), total)

    if images:
        ensure_app()
    for field, head in keys:
        view = render_map(map_data(frame, field, head))
        try:
            for fmt in images:
                path = folder / f"{map_file_stem(field, head)}.{fmt}"
                done(export_image(view, path, width if fmt == "png" else None))
        finally:
            _dispose(view)
    if "png" in formats:
        path = folder / "figure.png"
        atomic_write(path, _png_bytes(render_figure(frame, figure)))
        done(path)
    write_arrays(result, folder, formats, progress=done)
    info = manifest(result, [p.name for p in written], formats, width)
    path = folder / "manifest.json"
    atomic_write(path, (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    done(path)
    return written


def _display_path(folder: Path) -> str:
    text = str(folder)
    return text if text.endswith(os.sep) else text + os.sep


def run_export_cli(args, config: AttentionConfig) -> int:
    """``attn-gui export``: compute ``config`` and export it into ``args.out``.

    Parameters
    ----------
    args : argparse.Namespace
        ``out``, ``format`` (comma list) and ``width`` from the command line.
    config : AttentionConfig

    Returns
    -------
    int
        0; bad options raise ValueError, unwritable folders OSError (the caller
        prints them as one line).
    """
    from .engine import compute

    formats = parse_formats(args.format)
    width = None if args.width is None else _check_width(args.width)
    folder = Path(args.out)
    check_writable(folder)
    if any(f in IMAGE_FORMATS for f in formats):
        ensure_app(offscreen=True)
    from .ui.maps import make_frame

    result = compute(config)
    written = export_all(make_frame(0, result), folder, formats, width=width)
    heads = f"{result.heads} head" + ("s" if result.heads != 1 else "")
    print(f"wrote {len(written)} files to {_display_path(folder)} (T = {result.seq_len}, {heads})")
    return 0

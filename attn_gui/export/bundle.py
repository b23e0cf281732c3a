"""Write everything about one result into a folder: maps, figure, tensors, manifest.

What ``export_all`` writes (formats permitting):

``<field>.png``, ``<field>.svg``
    One picture per map, as the window draws it: title, token labels, colour bar and
    (where the cells are large enough) each cell's value. Per-head fields are written
    once per head as ``<field>_head<i>.png`` / ``.svg`` with ``i`` counted from 0.
``figure.png``
    The whole figure: every map, laid out as the data flows.
``<field>.npy``, ``<field>.csv``, ``<field>_head<i>.csv``
    The tensors (see ``export.arrays``).
``manifest.json``
    The config (``AttentionConfig.from_dict`` rebuilds it), tokens, vocabulary, token
    ids, shapes, device, compute time, library versions, the time of the export and
    the list of files written.

Images are drawn only when an image format is asked for, so an arrays-only export
never imports Qt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..present.frame import Frame
from ..present.maps import file_stem, map_data, map_keys
from .arrays import array_files, manifest, write_arrays
from .files import FORMATS, IMAGE_FORMATS, atomic_write, check_width, check_writable, parse_formats, scaled_size

Progress = Callable[[int, int], None]


def _check_image_sizes(frame: Frame, keys, width: int | None) -> None:
    """Refuse, before anything is written, a width that makes any PNG too large."""
    from ..render.offscreen import map_size
    from .images import PADDING

    for key in keys:
        w, h = map_size(map_data(frame, *key))
        scaled_size(w + 2 * PADDING, h + 2 * PADDING, width)


def _write_images(frame: Frame, folder: Path, keys, images: list[str], width: int | None,
                  figure: Any, done: Callable[[Path], None]) -> None:
    from ..render.offscreen import dispose, ensure_app, render_figure, render_map
    from .images import export_image, png_bytes

    ensure_app()
    for field, head in keys:
        view = render_map(map_data(frame, field, head))
        try:
            for fmt in images:
                done(export_image(view, folder / f"{file_stem(field, head)}.{fmt}", width if fmt == "png" else None))
        finally:
            dispose(view)
    if "png" in images:
        path = folder / "figure.png"
        atomic_write(path, png_bytes(render_figure(frame, figure)))
        done(path)


def export_all(frame: Frame, folder: str | os.PathLike, formats: str | Iterable[str] = FORMATS,
               width: int | None = None, figure: Any = None, progress: Progress | None = None) -> list[Path]:
    """Write every map, the whole figure, every tensor and a manifest into ``folder``.

    Parameters
    ----------
    frame : Frame
        The computed result and its display arrays (``present.frame.make_frame``).
    folder : path-like
        Created if missing. Existing files of the same names are replaced.
    formats : str or iterable of str
        Any of "png", "svg", "npy", "csv" (a comma list is accepted).
    width : int, optional
        Pixel width of each map's PNG; default the map's own size. ``figure.png``
        keeps the figure's size.
    figure : render.figure.PipelineView, optional
        The live figure to grab for ``figure.png`` (the window's); without it one is
        laid out offscreen at about 1800 x 1100.
    progress : callable, optional
        ``progress(done, total)`` after each file.

    Returns
    -------
    list of Path
        Every file written, ``manifest.json`` last.

    Raises
    ------
    ExportError
        Unknown format or bad width, before any file is written.
    WriteError
        The folder cannot be written (checked before any file is written).
    """
    formats = parse_formats(formats)
    if width is not None:
        width = check_width(width)
    result = frame.result
    images = [f for f in IMAGE_FORMATS if f in formats]
    keys = map_keys(result) if images else []
    if "png" in formats:
        _check_image_sizes(frame, keys, width)
    folder = check_writable(folder)
    total = len(keys) * len(images) + ("png" in formats) + len(array_files(result, formats)) + 1
    written: list[Path] = []

    def done(path: Path) -> None:
        written.append(path)
        if progress is not None:
            progress(len(written), total)

    if images:
        _write_images(frame, folder, keys, images, width, figure, done)
    write_arrays(result, folder, formats, progress=done)
    info = manifest(result, [p.name for p in written], formats, width)
    path = folder / "manifest.json"
    atomic_write(path, (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    done(path)
    return written

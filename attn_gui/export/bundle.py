"""Write everything about one result into a folder: maps, figure, tensors, manifest.

What ``export_all`` writes (formats permitting):

``<field>.png``, ``<field>.svg``
    One picture per map, as the window draws it: title, token labels, colour bar and
    (where the cells are large enough) each cell's value, with the axes named ("query",
    "key"); in an SVG the cells are crisp rectangles (a pixelated image for large maps).
    Per-head fields are written once per head as ``<field>_head<i>.png`` / ``.svg`` with
    ``i`` counted from 1 (head 1 is index 0 of the head axis in the .npy file).
``figure.png``
    The whole figure under a title (the sentence, the sizes, the head shown): every map,
    laid out as the data flows, without the window's outlines and hints.
``figure.svg``
    The same figure as an SVG (its text stays text).
``model_view.png``
    A model's result with every layer's maps: the Model view, every layer's and head's alpha
    (and each head's sink mass beside), as the dock draws it.
``<field>.npy``, ``<field>.csv``, ``<field>_head<i>.csv``
    The tensors (see ``export.arrays``).
``manifest.json``
    The config (``AttentionConfig.from_dict`` rebuilds it), tokens, vocabulary, token
    ids, shapes, device, compute time, library versions, the time of the export and
    the list of files written.

The folder is written whole (``export.folder``): into a hidden folder beside it, then
moved into place, so it holds the complete previous export or the complete new one.
Everything that can be checked (formats, width, image sizes, the text, the folder and
the names in it, disk space, memory) is checked before the first byte is written.

Images are drawn only when an image format is asked for, so an arrays-only export
never imports Qt.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from ..engine.base.devices import free_bytes
from ..present.frame import Frame
from ..present.maps import file_stem, map_data, map_keys
from .arrays import array_bytes, array_files, manifest, write_arrays
from .files import FORMATS, IMAGE_FORMATS, ExportError, atomic_write, check_width, human, parse_formats, scaled_size
from .folder import Cancelled, Target

Progress = Callable[[int, int], None]
IMAGE_BYTES = 4  # ARGB32, per pixel, while a PNG is drawn; encoding it takes about as much again
# on-disk size of the pictures as written, measured on MiniLM, SmolLM2 and random configs of 5 to 300 tokens
PNG_PER_PIXEL, FIGURE_BYTES = 0.07, 120_000
# an SVG: its frame and text, then each cell as a rectangle (with its value where written) or, past
# images.RECT_CELLS cells, one pixelated image (measured at 5 to 300 tokens: within 0.6 to 1.6 x)
SVG_MAP_BYTES, SVG_PER_CELL, SVG_PER_PIXEL = 40_000, 300, 0.05
CONFIRM_BYTES = 1 << 30  # an export estimated larger than this on disk waits for the user's yes
CONFIRM_SECONDS = 60.0  # and so does one estimated to take longer than this to write
# seconds to write, measured on a 2-core CPU (2026-11-25) from 5 to 2,000 tokens and 1 to 4 heads:
# a picture costs a fixed part per map and a part per pixel; tensors a part per byte on disk
PNG_SECONDS, SVG_SECONDS = (0.06, 0.08e-6), (0.04, 0.03e-6)  # (per map, per pixel)
FIGURE_SECONDS, CSV_SECONDS_PER_BYTE, NPY_SECONDS_PER_BYTE = 0.3, 20e-9, 3e-9


class ExportTooLarge(ExportError):
    """An export estimated larger than ``CONFIRM_BYTES`` on disk or longer than ``CONFIRM_SECONDS``
    to write, refused before anything is written until the user confirms it (``attn-gui export
    --yes``); ``need`` and ``seconds`` hold the estimates."""

    def __init__(self, need: int, seconds: float, limit: int | None, limit_seconds: float | None):
        if limit is not None and need > limit:
            over = f"more than {human(limit)}"
        else:  # refused for the time it would take
            assert limit_seconds is not None
            over = f"longer than {duration(limit_seconds)}"
        super().__init__(f"this export would write about {human(need)} and take about {duration(seconds)}, "
                         f"{over}; nothing was written (confirm it: attn-gui export --yes)")
        self.need, self.seconds = need, seconds


def duration(seconds: float) -> str:
    """``seconds`` as a person reads it: "40 s", "a minute", "3 min 20 s"."""
    if seconds == 60:
        return "a minute"
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"


def check_before_compute(config, formats: tuple[str, ...], confirm_over: int | None = CONFIRM_BYTES,
                         confirm_seconds: float | None = CONFIRM_SECONDS) -> None:
    """Refuse (``ExportTooLarge``) an export whose T x T arrays alone are over the limits, from the config's
    token counts, before the compute makes a single T x T tensor.

    A lower bound of what ``export_all`` estimates from the result: the scores, scaled scores and
    weights (h x T x T_k each) as .npy (their bytes) and .csv (at least "0," a value); 10,000
    tokens used to compute 4 GB of tensors before the export's own estimate refused them.
    """
    from ..engine.run.compute import MAX_TOKENS
    from ..engine.run.inputs import source_tokens_for, tokens_for

    if config.model is not None or not any(f in formats for f in ("npy", "csv")):
        return  # a model reads at most 512 tokens; images are bounded by the display's reduction
    T = len(tokens_for(config).tokens)
    source = source_tokens_for(config)
    if max(T, 0 if source is None else len(source.tokens)) > MAX_TOKENS.get(config.device.split(":")[0], 0):
        return  # over the token limit: the compute refuses it first, before allocating anything
    cells = 3 * config.dims.heads * T * (T if source is None else len(source.tokens))
    elem = 8 if config.dtype == "float64" else 4
    need = cells * (elem * ("npy" in formats) + 2 * ("csv" in formats))
    seconds = cells * (elem * NPY_SECONDS_PER_BYTE * ("npy" in formats) + 2 * CSV_SECONDS_PER_BYTE * ("csv" in formats))
    if (confirm_over is not None and need > confirm_over) or (
            confirm_seconds is not None and seconds > confirm_seconds):
        raise ExportTooLarge(need, seconds, confirm_over, confirm_seconds)


def estimate_seconds(result, formats: tuple[str, ...], maps: int, pixels: int) -> float:
    """About how long ``export_all`` takes to write ``maps`` pictures of ``pixels`` in all and the tensors."""
    seconds = 0.0
    for fmt, (per_map, per_pixel) in (("png", PNG_SECONDS), ("svg", SVG_SECONDS)):
        if fmt in formats:
            seconds += per_map * maps + per_pixel * pixels
    seconds += FIGURE_SECONDS * ("png" in formats)
    for fmt, per_byte in (("csv", CSV_SECONDS_PER_BYTE), ("npy", NPY_SECONDS_PER_BYTE)):
        if fmt in formats:
            seconds += per_byte * array_bytes(result, [fmt])
    return seconds


def image_keys(result) -> list[tuple[str, str, int | None]]:
    """(file stem, field, query head) of every map image, in data-flow order.

    A grouped-query K/V field (fewer K/V heads than query heads) is drawn once per K/V
    head, from the first query head that reads it, and named as its CSV: ``k_kv1``.
    """
    keys = []
    for field, head in map_keys(result):
        n = result.shape(field)[0] if head is not None else result.heads
        if n == result.heads:
            keys.append((file_stem(field, head), field, head))
        elif head % (result.heads // n) == 0:  # the first query head of its K/V group
            keys.append((f"{field}_kv{result.head_index(field, head) + 1}", field, head))
    return keys


def image_sizes(frame: Frame, keys, width: int | None) -> list[tuple[int, int, int]]:
    """(width, height, SVG bytes) of every map's picture; ExportError before anything is written if one
    is too large."""
    from ..render.offscreen import map_size
    from .images import PADDING, RECT_CELLS

    sizes = []
    for _, field, head in keys:
        data = map_data(frame, field, head)
        w, h = map_size(data)
        w, h = scaled_size(w + 2 * PADDING, h + 2 * PADDING, width)
        cells = data.matrix.size
        svg = SVG_MAP_BYTES + (SVG_PER_CELL * cells if cells <= RECT_CELLS else SVG_PER_PIXEL * w * h)
        sizes.append((w, h, round(svg)))
    return sizes


def _check_room(folder: Path, need_disk: int, need_memory: int) -> None:
    """Refuse an export the disk or the memory cannot hold, saying how much it needs."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        free = None
    if free is not None and need_disk > free:
        raise ExportError(f"this export needs about {human(need_disk)} on disk; {probe} has {human(free)} free")
    free = free_bytes(torch.device("cpu"))
    if free is not None and need_memory > 0.8 * free:
        raise ExportError(f"this export needs about {human(need_memory)} of memory to draw its largest "
                          f"picture; {human(free)} is free (choose a smaller --width)")


def _write_images(frame: Frame, folder: Path, keys, images: list[str], width: int | None,
                  figure: Any, done: Callable[[Path], None], head: int = 0) -> None:
    from ..render.offscreen import dispose, ensure_app, render_figure, render_figure_svg, render_map, render_model_view
    from .images import export_image, png_bytes, readable_svg

    ensure_app()
    scales = dict(figure.scales) if figure is not None else {}  # the window's colour scale choices
    for stem, field, h in keys:
        view = render_map(map_data(frame, field, h, scale=scales.get(field, "auto")))
        try:
            for fmt in images:
                done(export_image(view, folder / f"{stem}.{fmt}", width if fmt == "png" else None))
        finally:
            dispose(view)
    if "png" in images:
        path = folder / "figure.png"
        atomic_write(path, png_bytes(render_figure(frame, figure, head)))
        done(path)
        grid = render_model_view(frame, figure.head if figure is not None else head) if has_grid(frame) else None
        if grid is not None:
            path = folder / "model_view.png"
            atomic_write(path, png_bytes(grid))
            done(path)
    if "svg" in images:
        path = folder / "figure.svg"
        atomic_write(path, readable_svg(render_figure_svg(frame, figure, head)))
        done(path)


def export_all(frame: Frame, folder: str | os.PathLike, formats: str | Iterable[str] = FORMATS,
               width: int | None = None, figure: Any = None, progress: Progress | None = None,
               cancel: Callable[[], bool] | None = None, overwrite: bool = False, head: int = 0,
               confirm_over: int | None = CONFIRM_BYTES,
               confirm_seconds: float | None = CONFIRM_SECONDS) -> list[Path]:
    """Write every map, the whole figure, every tensor and a manifest into ``folder``, whole.

    Parameters
    ----------
    frame : Frame
        The computed result and its display arrays (``present.frame.make_frame``).
    folder : path-like
        Created if missing. A folder that is empty or holds only a previous export is
        replaced whole; one holding other files is refused (see ``overwrite``).
    formats : str or iterable of str
        Any of "png", "svg", "npy", "csv" (a comma list is accepted).
    width : int, optional
        Pixel width of each map's PNG; default the map's own size. ``figure.png``
        keeps the figure's size.
    figure : render.canvas.Canvas, optional
        The window's figure: ``figure.png`` shows its head and hidden tokens, at its size
        or larger; without it, ``head`` at about 1800 x 1100.
    progress : callable, optional
        ``progress(done, total)`` after each file.
    cancel : callable, optional
        Asked between files; when it returns True the export stops, its hidden folder
        is removed and ``Cancelled`` is raised (the target is unchanged).
    overwrite : bool
        Write the export's files into a folder that holds other files (each file whole,
        the manifest last); nothing else there is deleted or changed.
    head : int
        The head ``figure.png`` shows (0-based) when there is no ``figure``; every
        head's own images are written whatever it is.
    confirm_over, confirm_seconds : int and float, or None
        Refuse an export estimated larger than this many bytes on disk, or longer than
        this many seconds to write (``ExportTooLarge``, before any file); None: no limit.

    Returns
    -------
    list of Path
        Every file written (in ``folder``), ``manifest.json`` last.

    Raises
    ------
    ExportTooLarge
        Estimated larger than ``confirm_over`` bytes or longer than ``confirm_seconds``:
        before any file is written.
    ExportError
        Unknown format, bad width, an image too large, a folder holding other files,
        not enough disk or memory: before any file is written.
    WriteError
        The folder cannot be written; the target is unchanged.
    Cancelled
        ``cancel()`` returned True; the target is unchanged.
    """
    formats = parse_formats(formats)
    if width is not None:
        width = check_width(width)
    images = [f for f in IMAGE_FORMATS if f in formats]
    keys = image_keys(frame.result) if images else []
    sizes = image_sizes(frame, keys, width) if images else []
    names, manifest_bytes = _names_and_manifest(frame, formats, width, keys, images)
    target = Target(folder, overwrite=overwrite)
    target.check_names([*names, "manifest.json"])
    need_disk, biggest = _check_size(frame, formats, len(keys), sizes, len(manifest_bytes), target,
                                     confirm_over, confirm_seconds)
    return _write(frame, target, formats, (keys, images, width, figure, head), names, manifest_bytes,
                  (need_disk, biggest), progress, cancel)


def _write(frame: Frame, target: Target, formats: tuple[str, ...], pictures: tuple, names: list[str],
           manifest_bytes: bytes, needs: tuple[int, int], progress: Progress | None,
           cancel: Callable[[], bool] | None) -> list[Path]:
    """Write the export into ``target``'s hidden folder and move it into place (see ``export_all``):
    ``pictures`` are ``_write_images``'s (keys, images, width, figure, head), ``needs`` the bytes on disk
    and the largest picture's pixels (for the message when memory runs out)."""
    keys, images, width, figure, head = pictures
    need_disk, biggest = needs
    total = len(names) + 1
    written: list[Path] = []

    def check_cancel() -> None:
        if cancel is not None and cancel():
            raise Cancelled(target.shown)

    def done(path: Path) -> None:
        written.append(target.path / path.name)
        if progress is not None:
            progress(len(written), total)
        check_cancel()

    check_cancel()
    stage = target.open()
    try:
        try:
            if images:
                _write_images(frame, stage, keys, images, width, figure, done, head)
            write_arrays(frame.result, stage, formats, progress=done)
        except MemoryError:
            raise ExportError(f"out of memory while writing the export (about {human(need_disk)} of files, "
                              f"{human(2 * IMAGE_BYTES * biggest)} for the largest picture)") from None
        atomic_write(stage / "manifest.json", manifest_bytes)
        check_cancel()
        target.commit([*names, "manifest.json"])
    except BaseException:
        target.abort()
        raise
    done_manifest = target.path / "manifest.json"
    written.append(done_manifest)
    if progress is not None:
        progress(len(written), total)
    return written


def has_grid(frame: Frame) -> bool:
    """Whether ``frame`` holds every layer's maps (a model's whole run): its model view is exported."""
    return "layer_weights" in frame.arrays


def _names_and_manifest(frame: Frame, formats: tuple[str, ...], width: int | None, keys,
                        images: list[str]) -> tuple[list[str], bytes]:
    """The names of the files an export writes (the manifest's left out) and the manifest's bytes, made first:
    text that cannot be written as UTF-8 is refused here (``ExportError``)."""
    result = frame.result
    names = [f"{stem}.{fmt}" for stem, _, _ in keys for fmt in images]
    names += ["figure.png"] if "png" in formats else []
    names += ["model_view.png"] if "png" in formats and has_grid(frame) else []
    names += ["figure.svg"] if "svg" in formats else []
    names += array_files(result, formats)
    info = manifest(result, names, formats, width)
    try:
        manifest_bytes = (json.dumps(info, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ExportError(f"the export's text is not valid UTF-8 ({exc.reason}); nothing was written") from None
    return names, manifest_bytes


def _check_size(frame: Frame, formats: tuple[str, ...], maps: int, sizes: list[tuple[int, int, int]],
                manifest_size: int, target: Target, confirm_over: int | None,
                confirm_seconds: float | None) -> tuple[int, int]:
    """Refuse an export larger or longer than asked (``ExportTooLarge``) or without the room for it on disk or
    in memory (``ExportError``); returns the bytes it asks of the disk and its largest picture's pixels."""
    result = frame.result
    biggest = max((w * h for w, h, _ in sizes), default=0) if "png" in formats else 0
    pixels = sum(w * h for w, h, _ in sizes)
    svg = sum(b for _, _, b in sizes) * ("svg" in formats)
    estimate = (array_bytes(result, formats) + manifest_size + svg
                + ("png" in formats) * (PNG_PER_PIXEL * pixels + FIGURE_BYTES))
    # the room to ask of the disk: a PNG is never larger than its raw pixels, an SVG allowed twice its estimate
    need_disk = array_bytes(result, formats) + manifest_size + ("png" in formats) * pixels + 2 * svg
    seconds = estimate_seconds(result, formats, maps, pixels)
    if (confirm_over is not None and estimate > confirm_over) or (
            confirm_seconds is not None and seconds > confirm_seconds):
        raise ExportTooLarge(round(estimate), seconds, confirm_over, confirm_seconds)
    _check_room(target.path, need_disk, 2 * IMAGE_BYTES * max(biggest, 1800 * 1100 * ("png" in formats)))
    return need_disk, biggest

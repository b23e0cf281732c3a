"""The tensors of a result as .npy and .csv files, and the manifest that describes them. No Qt.

``<field>.npy`` holds the full array of each field (per-head fields keep their head axis
first, indexed from 0 as numpy indexes); ``<field>.csv`` a 2-D field and
``<field>_head<i>.csv`` head ``i`` (counted from 1, as the window counts) of a per-head field, header-less, comma
separated, every value with enough digits to read back the
exact float (``inf``/``-inf``/``nan`` spelled out).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from ..engine import FIELDS, AttentionResult, as_dict
from ..present.maps import file_stem
from .files import ARRAY_FORMATS, FORMATS, atomic_write, parse_formats
from .metrics import METRICS_FILE, write_head_metrics


def write_csv(f: BinaryIO, matrix: np.ndarray) -> None:
    """Header-less CSV of a 2-D array into the binary file ``f``, row by row (never whole in memory).

    %.9g round-trips float32, %.17g float64.
    """
    fmt = "%.17g" if matrix.dtype == np.float64 else "%.9g"
    np.savetxt(f, np.atleast_2d(matrix), fmt=fmt, delimiter=",", encoding="ascii")


def write_npy(f: BinaryIO, array: np.ndarray) -> None:
    """``array`` as .npy into the binary file ``f`` (numpy writes a real file without a copy)."""
    np.save(f, array, allow_pickle=False)


def array_bytes(result: AttentionResult, formats: Iterable[str] = ARRAY_FORMATS) -> int:
    """About how many bytes ``write_arrays`` writes: exact for .npy, an upper bound for .csv."""
    formats = parse_formats(formats)
    total = 0
    for field in result.fields():
        t = getattr(result, field)
        if "npy" in formats:
            total += t.numel() * t.element_size() + 128
        if "csv" in formats:
            total += t.numel() * (25 if t.dtype == torch.float64 else 16)
    return total


def _array_items(result: AttentionResult, field: str, formats: tuple[str, ...]):
    """(file name, format, head or None) of every file of ``field``, in order."""
    if "npy" in formats:
        yield f"{field}.npy", "npy", None
    if "csv" in formats:
        n = result.shape(field)[0] if FIELDS[field].per_head else None
        for head in (range(n) if n is not None else [None]):
            if head is not None and n != result.heads:  # grouped-query K, V: one file per K/V head, named so
                yield f"{field}_kv{head + 1}.csv", "csv", head  # as its images: k_kv1.png
            else:
                yield f"{file_stem(field, head)}.csv", "csv", head


def array_files(result: AttentionResult, formats: Iterable[str] = ARRAY_FORMATS) -> list[str]:
    """The file names ``write_arrays`` writes for ``result``, in order."""
    formats = parse_formats(formats)
    return [name for field in result.fields() for name, _, _ in _array_items(result, field, formats)] + (
        [METRICS_FILE] if "csv" in formats else [])


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
    list of Path, in the order of ``array_files``.

    Raises
    ------
    TooLargeError
        ``result`` is streamed and its full tensors do not fit in the device's free memory.
    """
    formats = tuple(f for f in parse_formats(formats) if f in ARRAY_FORMATS)
    folder = Path(folder)
    written: list[Path] = []
    if formats:
        result = result.full()  # a streamed result (the window's, for long inputs) is computed in full once
    for field in result.fields():
        array = result.numpy(field)
        for name, fmt, head in _array_items(result, field, formats):
            if fmt == "npy":
                atomic_write(folder / name, functools.partial(write_npy, array=array))
            else:
                matrix = array if head is None else array[head]
                atomic_write(folder / name, functools.partial(write_csv, matrix=matrix))
            written.append(folder / name)
            if progress is not None:
                progress(folder / name)
    if "csv" in formats:
        written.append(write_head_metrics(result, folder))
        if progress is not None:
            progress(written[-1])
    return written


def versions() -> dict[str, str]:
    """Versions of attn-gui and the libraries that made the numbers and pictures.

    Qt's own version is given only when Qt was loaded (an export with images); the
    packages' versions are read from their metadata, which imports nothing.
    """

    from .. import __version__

    out = {"attn_gui": __version__, "python": sys.version.split()[0], "numpy": np.__version__,
           "torch": torch.__version__}
    for package, key in (("PySide6-Essentials", "PySide6"), ("pyqtgraph", "pyqtgraph")):
        with contextlib.suppress(metadata.PackageNotFoundError):  # an arrays-only install without Qt
            out[key] = metadata.version(package)
    qtcore = sys.modules.get("PySide6.QtCore")
    if qtcore is not None:
        out["Qt"] = qtcore.qVersion()
    return out


def manifest(result: AttentionResult, files: Iterable[str], formats: Iterable[str] = FORMATS,
             width: int | None = None) -> dict[str, Any]:
    """What ``manifest.json`` holds: enough to recompute, read and cite the export."""
    info = as_dict(result)
    decoder = {} if info["next_tokens"] is None else {"next_tokens": info["next_tokens"]}  # a decoder's top 5
    return {
        "attn_gui_export": 1,
        "config": result.config.to_dict(),
        "tokens": info["tokens"],
        "vocab": info["vocab"],
        "token_ids": info["token_ids"],
        **{key: info[key] for key in ("source_tokens", "source_token_ids") if key in info},
        "heads": result.heads,
        "shapes": info["shapes"],
        "device": info["device"],
        "elapsed_ms": info["elapsed_ms"],
        "notes": info["notes"],
        **{key: info[key] for key in ("not_captured",) if key in info},  # read through transformers: no file
        **decoder,
        "versions": versions(),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "formats": list(formats),
        "png_width": width,
        "csv": "header-less, comma separated, one matrix per file (<field>_head<i>.csv per head, "
               "i counted from 1; grouped-query K/V fields: <field>_kv<g>.csv per K/V head g, from 1; "
               "in the .npy files the head axis is indexed from 0); "
               "rows and columns as in the array; names of token axes are in 'tokens' (cross-attention: "
               "the key axes and the rows of k, v and x_source in 'source_tokens')",
        "files": list(files),
    }

"""Files: export formats and sizes checked up front, and writes that are whole or absent.

No Qt here: the arrays-only export runs on a machine without PySide6 (so Qt's QSaveFile,
which does what ``present.files.atomic_write`` does, is not used).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..engine import UserError
from ..present.files import WriteError, atomic_write

IMAGE_FORMATS = ("png", "svg")
ARRAY_FORMATS = ("npy", "csv")
FORMATS = IMAGE_FORMATS + ARRAY_FORMATS
MAX_WIDTH = 10_000
MAX_PIXELS = 100_000_000  # about 400 MB of image memory


class ExportError(UserError):
    """An export that cannot be made as asked (unknown format, bad width, too large an image).

    A folder or file that cannot be written raises ``WriteError`` (an OSError too).
    """


def check_writable(folder: str | os.PathLike) -> Path:
    """Create ``folder`` if needed and prove a file can be written there.

    The probe has a name of its own (never a user's file) and is removed at once.
    (``export_all`` does not need it: it writes into a folder of its own, see ``folder``.)

    Raises
    ------
    WriteError
        ``cannot write to <folder>: <reason>``; nothing is left behind.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = "it is a file" if isinstance(exc, FileExistsError) else (exc.strerror or str(exc))
        raise WriteError(f"cannot write to {folder}: {reason}") from exc
    probe = folder / f".attn-gui-probe-{uuid.uuid4().hex}"
    atomic_write(probe, b"")
    try:
        probe.unlink()
    except OSError as exc:
        raise WriteError(f"cannot write to {folder}: {exc.strerror or exc}") from exc
    return folder


def human(n: float) -> str:
    """A byte count for people: 512 B, 3.4 MiB, 1.2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def check_width(width: Any) -> int:
    """``width`` as a pixel count between 1 and MAX_WIDTH, else ExportError."""
    if isinstance(width, bool) or not isinstance(width, int) and not hasattr(width, "__index__"):
        raise ExportError(f"width must be a whole number of pixels; got {width!r}")
    width = int(width)
    if not 1 <= width <= MAX_WIDTH:
        raise ExportError(f"width must be between 1 and {MAX_WIDTH} pixels; got {width}")
    return width


def scaled_size(w: float, h: float, width: int | None) -> tuple[int, int]:
    """The pixel size of a w x h picture drawn ``width`` pixels wide (ExportError if too big)."""
    if width is None:
        out = max(1, round(w)), max(1, round(h))
    else:
        width = check_width(width)
        out = width, max(1, round(h * width / w))
    if out[0] * out[1] > MAX_PIXELS:
        raise ExportError(f"a {out[0]} x {out[1]} pixel image is too large; choose a smaller width")
    return out


def parse_formats(formats: str | Iterable[str]) -> tuple[str, ...]:
    """The export formats named by ``"png,npy"`` or ``("png", "npy")``, in canonical order.

    Raises
    ------
    ExportError
        An unknown or empty list, in one line.
    """
    names = formats.split(",") if isinstance(formats, str) else list(formats)
    names = [str(n).strip().lower().lstrip(".") for n in names]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        shown = ", ".join(repr(n[:20]) for n in unknown[:3])
        raise ExportError(f"unknown export format {shown}; choose from {','.join(FORMATS)}")
    if not names:
        raise ExportError(f"no export format given; choose from {','.join(FORMATS)}")
    return tuple(f for f in FORMATS if f in names)

"""Write a file whole or not at all: a temporary file beside it, then a rename."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from ..engine import UserError


class WriteError(UserError, OSError):
    """A file could not be written; the message names it and says why."""


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``.

    An interrupted or failed write leaves the old file (or none), never half a file.
    Raises WriteError naming the file and the reason.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise WriteError(f"cannot write to {path.parent}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass  # the temporary name was never created, or is already gone
        if isinstance(exc, OSError):
            raise WriteError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise

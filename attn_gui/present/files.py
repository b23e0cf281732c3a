"""Files read within a bound and written whole or not at all.

Reads accept only regular files (never a FIFO, a device or a folder, which could block or
never end) and count the bytes while reading, so a file that grows or lies about its size
is still refused. Writes go to a temporary file beside the target, then a rename.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ..engine import UserError
from ..engine.base import disk
from ..engine.base.disk import kind_of

Writer = Callable[[BinaryIO], None]
CHUNK = 1 << 16


class WriteError(UserError, OSError):
    """A file could not be written; the message names it and says why."""


class ReadError(UserError, OSError):
    """A file could not be read, or is not a regular file, or is too large; the message says which."""


def read_regular(path: str | os.PathLike, limit: int, what: str = "file") -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes.

    The file is opened without blocking (a FIFO with no writer answers at once) and
    checked with ``fstat`` on the open descriptor; the size is counted while reading.

    Raises
    ------
    ReadError
        Missing, unreadable, a symlink loop, not a regular file, or over ``limit``.
    """
    path = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = "a symbolic link loop" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise ReadError(f"cannot read {path.name}: {reason}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ReadError(f"cannot read {path.name}: it is {kind_of(mode)}, not a {what}")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ReadError(f"{path.name} is over {limit:,} bytes; a {what} is at most {limit:,}")
        return b"".join(chunks)
    except OSError as exc:
        if isinstance(exc, ReadError):
            raise
        raise ReadError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def is_temp_name(name: str) -> bool:
    """True for the temporary names ``atomic_write`` uses: ``.<name>.<8 hex>.tmp``."""
    parts = name.rsplit(".", 2)
    return (name.startswith(".") and len(parts) == 3 and parts[2] == "tmp" and len(parts[1]) == 8
            and all(c in "0123456789abcdef" for c in parts[1]))


def atomic_write(path: str | os.PathLike, data: bytes | Writer) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``.

    ``data`` is bytes, or a callable that streams the content into the open binary
    file (so a large file never sits whole in memory). An interrupted or failed write
    leaves the old file (or none), never half a file. Raises WriteError naming the file
    and the reason.
    """
    path = Path(path)
    try:
        disk.write_atomic(path, data, suffix=".tmp")
    except OSError as exc:
        if isinstance(exc, UserError):
            raise
        created = exc.filename is not None and exc.filename2 is None and is_temp_name(Path(exc.filename).name)
        where = f"to {path.parent}" if created else str(path)  # the temporary file could not be created
        raise WriteError(f"cannot write {where}: {exc.strerror or exc}") from exc

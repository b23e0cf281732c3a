"""Files the engine reads and writes: only regular files read, every write whole or not at all.

- ``open_regular`` opens a file without blocking and checks, on the open descriptor, that it is a
  regular file: a FIFO, a device or a folder is never read (a FIFO with no writer would block
  forever, ``/dev/zero`` never ends).
- ``write_atomic`` writes to a temporary file of a name no other writer uses (two runs writing the
  same file never share one), then renames it into place; on any failure the temporary file is
  removed and the old file, or none, stays (``present.files.atomic_write`` is it, said as a
  ``WriteError``).
- ``read_json`` and ``json_object`` read a model's JSON (config.json, tokenizer.json, a shard index) with a
  bound on its size, refused in one line (a ``ConfigError``) when it cannot be read.
- ``save_safetensors`` is safetensors' ``save_file`` whose write errors (a ``SafetensorError``,
  not an ``OSError``) are raised as ``OSError``, so a full disk is said as one.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import ConfigError


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (for one that is not a regular file)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


class NotRegular(OSError):
    """A path that is not a regular file (a FIFO, a device, a folder, a socket); ``strerror`` says which."""


def open_regular(path: str | os.PathLike) -> io.BufferedReader:
    """``path`` opened for binary reading, if it is a regular file.

    Opened with ``O_NONBLOCK`` (a FIFO with no writer answers at once) and checked with ``fstat`` on
    the descriptor, so what is checked is what is read.

    Raises
    ------
    NotRegular
        For a FIFO, a device, a folder or a socket.
    OSError
        For a file that cannot be opened (missing, no permission).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(errno.EINVAL, f"it is {kind_of(mode)}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file ``path``; ``OSError`` (EFBIG) past ``limit`` bytes, counted as read."""
    with open_regular(path) as f:
        if os.fstat(f.fileno()).st_size > limit:
            raise OSError(errno.EFBIG, f"it is over {limit:,} bytes")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"it is over {limit:,} bytes")
    return data


def write_atomic(path: str | os.PathLike, data: bytes | Callable[[BinaryIO], object], suffix: str = ".part") -> None:
    """Write ``data`` (bytes, or a callable writing into the open binary file) to ``path`` whole or not at all.

    The temporary file beside ``path`` has a name of its own (``.NAME.<8 hex>SUFFIX``, created
    exclusively), is flushed to the disk and renamed over ``path``; on any error, or an interrupt,
    it is removed. Raises the ``OSError`` of the write (a full disk, a folder gone); one raised
    creating the temporary file names it alone (``filename``, no ``filename2``).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}{suffix}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # already gone
            os.unlink(tmp)
        raise


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """safetensors' ``save_file``; its write errors (its message names an "os error N") raised as ``OSError``."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    try:
        save_file(tensors, str(path), metadata=metadata)
    except SafetensorError as exc:
        found = re.search(r"os error (\d+)", str(exc))
        if found is None:  # not the disk's: a tensor it cannot store
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code)) from None


JSON_BYTES = 64 * 2**20  # config.json, the shard index: a few kB in every real folder


def read_json(file: Path, what: str):
    """The JSON in ``file``; ``ConfigError`` for an unreadable, oversized, invalid or too deeply nested one."""
    try:
        if file.stat().st_size > JSON_BYTES:
            raise ConfigError(f"{what} is over {JSON_BYTES // 2**20} MiB, not a model's")
        return json.loads(file.read_bytes())
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply to be a model's") from None
    except (OSError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"{what} cannot be read: {exc!s:.80}") from None


def json_object(file: Path, what: str) -> dict:
    """The JSON object in ``file`` (config.json, tokenizer.json): an object of settings, nothing else."""
    data = read_json(file, what)
    if not isinstance(data, dict):
        raise ConfigError(f"{what} must hold an object of settings; it holds {type(data).__name__}")
    return data

"""A circuit task's JSONL file of pairs, read as a corpus is: a regular file only (a FIFO or a device is refused
at once, never read), at most ``MAX_TASK_BYTES``, UTF-8, one pair a line ending in ``\\n``; each value text, each
refusal one line naming the line and the field."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ...base import disk
from ...base.errors import ConfigError

MAX_TASK_BYTES = 64 << 20  # a task file is read whole: a FIFO, a device or a larger file is refused, never read
MAX_LINE_CHARS = 1 << 20  # one pair's line: a prompt this long is far past any model's context
FIELDS = ("clean", "corrupt", "answer", "wrong")


def _task_lines(file: Path) -> list[str]:
    """The lines of the regular file ``file`` (at most ``MAX_TASK_BYTES``, UTF-8), split at ``\\n`` alone (a
    ``\\r`` before it dropped): a form feed or U+2028 inside a line is the line's."""
    try:
        data = disk.read_regular(file, MAX_TASK_BYTES)
    except OSError as exc:
        raise ConfigError(f"cannot read pairs from {file.name}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"{file.name} line {number}: not UTF-8 text") from None
    return [line.removesuffix("\r") for line in text.split("\n")]


def _text(row: dict, field: str, where: str) -> str | None:
    """``row[field]`` if it is text (None where an optional "wrong" is left out); ``ConfigError`` for a number,
    null, true, a list or an object, which would otherwise become their text ("None", "True")."""
    if field not in row:
        if field == "wrong":
            return None
        raise ConfigError(f"{where}: no {field!r}; a pair is a JSON object with clean, corrupt and answer")
    value = row[field]
    if not isinstance(value, str):
        shown = "an object" if isinstance(value, dict) else "a list" if isinstance(value, list) else \
            json.dumps(value)[:40]  # null, true, 3, NaN
        raise ConfigError(f"{where}: {field!r} is {shown}, not text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{where}: {field!r} holds a lone surrogate (a \\ud800 escape), not text") from None
    if field != "wrong" and not value.strip():
        raise ConfigError(f"{where}: {field!r} is empty")
    return value


def _row(line: str, where: str) -> tuple[str, str, str, str | None]:
    if len(line) > MAX_LINE_CHARS:
        raise ConfigError(f"{where}: {len(line):,} characters; a pair's line is at most {MAX_LINE_CHARS:,}")
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise ConfigError(f"{where}: not JSON ({getattr(exc, 'msg', exc)})") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to read") from None
    if not isinstance(row, dict):
        raise ConfigError(f"{where}: not a JSON object with clean, corrupt and answer")
    clean, corrupt, answer, wrong = (_text(row, field, where) for field in FIELDS)
    assert clean is not None and corrupt is not None and answer is not None
    return clean, corrupt, answer, wrong


def read_rows(path: str | os.PathLike) -> list[tuple[str, str, str, str, str | None]]:
    """The pairs of a JSONL file as text: (where, clean, corrupt, answer, wrong or None), ``where`` naming the file
    and the line for the refusals that follow (the tokenizer's); ``ConfigError`` in one line for the rest."""
    file = Path(path)
    rows = []
    for number, line in enumerate(_task_lines(file), 1):
        if line.strip():
            where = f"{file.name} line {number}"
            rows.append((where, *_row(line, where)))
    return rows

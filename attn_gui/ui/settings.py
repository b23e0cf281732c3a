"""Saved settings: one module, typed reads, unknown keys are errors.

The file lives in the user's config folder; ``ATTN_GUI_CONFIG_DIR`` points it
elsewhere (the tests use a temporary folder).

Hostile or corrupt settings never stop the window: a file that is not a regular file
(a FIFO would hang QSettings) or is too large is not opened at all, and a value of the
wrong type, too large, too deeply nested or invalid reads as its default. Each such
fallback adds a line to ``Settings.notes`` for the status bar.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from PySide6 import QtCore

from ..engine import UserError, check_tokens_now
from ..present.fast_path import read_choices
from ..present.session import MAX_BYTES, old_state, with_old_defaults
from ..present.state import ViewState

_DEFAULTS: dict[str, Any] = {
    "state": "",  # the ViewState as JSON
    "config": "",  # before version 0.2: the AttentionConfig alone, as JSON
    "geometry": QtCore.QByteArray(),
    "window_state": QtCore.QByteArray(),
    "splitter": QtCore.QByteArray(),
    "export_dir": "",
    "session_dir": "",
    "model_dir": "",  # where Open model… starts
    "recent_sessions": "[]",  # JSON list of paths, newest first
    "recent_models": "[]",  # JSON list of model folders opened, newest first
    "lesson": "",  # the open lesson and step, "name:step" (step from 1)
    "matmuls": "{}",  # JSON: model -> "bfloat16" or "float32", the matmuls chosen for it (present.fast_path)
}
MAX_CHOICES = 64  # models whose matmuls are remembered (the newest kept)
MAX_RECENT = 8
MAX_FILE_BYTES = 4 * MAX_BYTES  # the state, the old config and the layout, each as large as a session
MAX_PATH = 4096


def _unusable(path: Path) -> str | None:
    """Why the settings file must not be opened (QSettings would block or load it whole), or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink loop, a folder in the way
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a pipe or a device)"
    if st.st_size > MAX_FILE_BYTES:
        return f"is {st.st_size:,} bytes (at most {MAX_FILE_BYTES:,})"
    return None


class _Memory:
    """Settings kept in memory only: what ``Settings`` uses when the file cannot be."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def value(self, key: str, default: Any) -> Any:
        return self._values.get(key, default)

    def setValue(self, key: str, value: Any) -> None:  # noqa: N802 (QSettings' name)
        self._values[key] = value

    def sync(self) -> None:
        pass


def settings_path() -> Path:
    base = os.environ.get("ATTN_GUI_CONFIG_DIR")
    if not base:
        base = QtCore.QStandardPaths.writableLocation(
            QtCore.QStandardPaths.StandardLocation.GenericConfigLocation) + "/attn-gui"
    return Path(base) / "settings.ini"


class Settings:
    """Typed access to the settings file."""

    def __init__(self, path: Path | None = None, memory_only: bool = False):
        self.path = path or settings_path()
        self.notes: list[str] = []
        problem = None if memory_only else _unusable(self.path)
        if problem:
            self.notes.append(f"{self.path} {problem}: using the defaults; settings are not saved this time")
        if memory_only or problem:
            self._qs: Any = _Memory()
        else:
            self._qs = QtCore.QSettings(str(self.path), QtCore.QSettings.Format.IniFormat)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def get(self, key: str) -> Any:
        """The saved value of ``key``, or its default when absent or unusable (with a note)."""
        if key not in _DEFAULTS:
            raise KeyError(f"unknown setting {key!r}")
        default = _DEFAULTS[key]
        value = self._qs.value(key, default)
        if value is None:
            return default
        if not isinstance(value, type(default)):  # the ini file can hold lists, numbers, anything
            self._note(f"the saved {key} is not a {type(default).__name__}; using the default")
            return default
        if len(value) > (MAX_PATH if key.endswith("_dir") else MAX_BYTES):
            self._note(f"the saved {key} is {len(value):,} long; using the default")
            return default
        return value

    def lesson(self, names: list[str]) -> tuple[str, int, str | None]:
        """The saved lesson of ``names`` and step (from 1), and None; else the first lesson's first step and a
        note (also in ``notes``) saying why: a lesson no longer there, or a step that is no number ("2-qkv:²",
        or thousands of digits)."""
        saved, _, number = self.get("lesson").partition(":")
        if saved in names and number.isascii() and number.isdigit() and len(number) <= 6:
            return saved, int(number), None
        note = None
        if saved or number:
            note = f"the saved lesson {saved[:40]!r} step {number[:12]!r} is not one here; starting at the first"
            self._note(note)
        return names[0], 1, note

    def set(self, key: str, value: Any) -> None:
        if key not in _DEFAULTS:
            raise KeyError(f"unknown setting {key!r}")
        self._qs.setValue(key, value)

    def state(self) -> ViewState | None:
        """The last view state (or, from older settings, the last config), or None when absent or invalid.

        An invalid one (bad JSON, deep nesting, wrong types, out-of-range or huge values,
        too many tokens) adds a note saying why. Every field is saved, so one that is
        missing was saved before it had a new default: it reads as it was made
        (``present.session.OLD_DEFAULTS``: no ``inputs`` means "embedding").
        """
        try:
            if text := self.get("state"):
                state = ViewState.from_dict(old_state(json.loads(text)), check=False)
                state, notes = state.defaults_where_off()
                for note in notes:
                    self._note(f"the saved view: {note}")
            elif text := self.get("config"):
                state = ViewState.from_dict({"config": with_old_defaults(json.loads(text))})
            else:
                return None
            check_tokens_now(state.config)  # a model not yet loaded: the worker checks
            return state
        except RecursionError:
            reason = "it is nested too deeply"
        except UserError as exc:
            reason = str(exc)
        except (ValueError, TypeError) as exc:  # not JSON, or a number of thousands of digits
            reason = f"it is not valid JSON ({str(exc)[:80]})"
        self._note(f"the saved view could not be used ({reason[:200]}); starting from the defaults")
        return None

    def set_state(self, state: ViewState) -> None:
        self.set("state", json.dumps(state.to_dict()))

    def recent_sessions(self) -> list[str]:
        return self.recent("sessions")

    def add_recent_session(self, path: str) -> None:
        self.add_recent("sessions", path)

    def recent(self, kind: str) -> list[str]:
        """The paths of ``kind`` ("sessions" or "models") opened lately, newest first (bad entries dropped)."""
        try:
            paths = json.loads(self.get(f"recent_{kind}"))
        except (ValueError, RecursionError):
            return []
        if not isinstance(paths, list):
            return []
        return [p for p in paths if isinstance(p, str) and 0 < len(p) < MAX_PATH and "\0" not in p][:MAX_RECENT]

    def add_recent(self, kind: str, path: str) -> None:
        """Put ``path`` first among the recent ``kind`` ("sessions" or "models")."""
        paths = [path] + [p for p in self.recent(kind) if p != path]
        self.set(f"recent_{kind}", json.dumps(paths[:MAX_RECENT]))

    def matmuls(self, model: str) -> str | None:
        """The matmuls chosen for ``model`` ("bfloat16" or "float32"), None where none was."""
        return read_choices(self.get("matmuls")).get(model)

    def set_matmuls(self, model: str, choice: str) -> None:
        choices = read_choices(self.get("matmuls"))
        choices.pop(model, None)
        choices[model] = choice
        self.set("matmuls", json.dumps(dict(list(choices.items())[-MAX_CHOICES:])))

    def sync(self) -> None:
        self._qs.sync()

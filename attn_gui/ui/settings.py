"""Saved settings: one module, typed reads, unknown keys are errors.

The file lives in the user's config folder; ``ATTN_GUI_CONFIG_DIR`` points it
elsewhere (the tests use a temporary folder).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from PySide6 import QtCore

from ..engine import AttentionConfig
from ..present.state import ViewState

_DEFAULTS: dict[str, Any] = {
    "state": "",  # the ViewState as JSON
    "config": "",  # before version 0.2: the AttentionConfig alone, as JSON
    "geometry": QtCore.QByteArray(),
    "window_state": QtCore.QByteArray(),
    "splitter": QtCore.QByteArray(),
    "export_dir": "",
    "session_dir": "",
    "recent_sessions": "[]",  # JSON list of paths, newest first
}
MAX_RECENT = 8


def settings_path() -> Path:
    base = os.environ.get("ATTN_GUI_CONFIG_DIR")
    if not base:
        base = QtCore.QStandardPaths.writableLocation(
            QtCore.QStandardPaths.StandardLocation.GenericConfigLocation) + "/attn-gui"
    return Path(base) / "settings.ini"


class Settings:
    """Typed access to the settings file."""

    def __init__(self, path: Path | None = None):
        self.path = path or settings_path()
        self._qs = QtCore.QSettings(str(self.path), QtCore.QSettings.Format.IniFormat)

    def get(self, key: str) -> Any:
        if key not in _DEFAULTS:
            raise KeyError(f"unknown setting {key!r}")
        default = _DEFAULTS[key]
        value = self._qs.value(key, default)
        if isinstance(default, QtCore.QByteArray):
            return value if isinstance(value, QtCore.QByteArray) else default
        return type(default)(value) if value is not None else default

    def set(self, key: str, value: Any) -> None:
        if key not in _DEFAULTS:
            raise KeyError(f"unknown setting {key!r}")
        self._qs.setValue(key, value)

    def state(self) -> ViewState | None:
        """The last view state (or, from older settings, the last config), or None when absent or invalid."""
        try:
            if text := self.get("state"):
                return ViewState.from_dict(json.loads(text))
            if text := self.get("config"):
                return ViewState(AttentionConfig.from_dict(json.loads(text)))
        except (ValueError, TypeError, RecursionError):
            return None
        return None

    def set_state(self, state: ViewState) -> None:
        self.set("state", json.dumps(state.to_dict()))

    def recent_sessions(self) -> list[str]:
        try:
            paths = json.loads(self.get("recent_sessions"))
        except ValueError:
            return []
        return [p for p in paths if isinstance(p, str)][:MAX_RECENT] if isinstance(paths, list) else []

    def add_recent_session(self, path: str) -> None:
        paths = [path] + [p for p in self.recent_sessions() if p != path]
        self.set("recent_sessions", json.dumps(paths[:MAX_RECENT]))

    def sync(self) -> None:
        self._qs.sync()

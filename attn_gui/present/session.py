"""Saved sessions: a small JSON file with the view state, the window layout and a version.

Loading is strict: a file that is not exactly what ``save_session`` writes (too big,
truncated, wrong version, wrong types, extra keys, deep nesting) raises ``ValueError``
with a message a person understands, and nothing is changed. No pickle anywhere.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

from ..engine import AttentionConfig
from ..engine.model.plan import check_model
from .files import atomic_write, read_regular
from .state import MAX_WINDOW_CHARS, ViewState, check_window_text

SESSION_VERSION = 3  # 1: the config alone; 2: the whole view state; 3: "stable" inputs are the default
# The defaults a file written before version 3 was made under, for the fields it may leave out:
# such a file without "inputs" meant the table over the sorted vocabulary, the default then.
OLD_DEFAULTS: dict[str, Any] = {"inputs": "embedding"}
# the two longest sentences the window shows (JSON escapes a character in at most 12 bytes), plus the layout
MAX_BYTES = 2 * 12 * MAX_WINDOW_CHARS + 256_000
LAYOUT_KEYS = ("geometry", "window_state", "splitter")


def session_dict(state: ViewState, layout: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "app": "attn-gui",
        "version": SESSION_VERSION,
        "state": state.to_dict(),
        "layout": dict(layout or {}),
    }


def save_session(path: str | os.PathLike, state: ViewState, layout: dict[str, str] | None = None) -> None:
    """Save ``state`` and the window ``layout`` (base64 strings) as JSON, atomically."""
    text = json.dumps(session_dict(state, layout), indent=2, ensure_ascii=False)
    atomic_write(path, text.encode("utf-8"))


def with_old_defaults(config: Any) -> Any:
    """A config dict written before version 3, with the defaults it was made under filled in.

    Anything but a dict is returned as it is (``AttentionConfig.from_dict`` says what is wrong).
    """
    return {**OLD_DEFAULTS, **config} if isinstance(config, dict) else config


def old_state(state: Any) -> Any:
    """A view-state dict written before version 3 (``with_old_defaults`` on its config)."""
    if not isinstance(state, dict):
        return state
    return {**state, "config": with_old_defaults(state.get("config", {}))}


def parse_session(text: str | bytes) -> tuple[ViewState, dict[str, str]]:
    """Validate a session's text; returns (state, layout) or raises ValueError.

    Version 1 files (a config, no view choices) still load, with the default view. Files
    before version 3 load as they were saved: a config without ``inputs`` keeps the
    "embedding" inputs it was made with (``OLD_DEFAULTS``).
    """
    if len(text) > MAX_BYTES:
        raise ValueError(f"this file is {len(text):,} bytes; a session is at most {MAX_BYTES:,}")
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError("this file is nested too deeply to be a session") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"this is not a session file (not valid JSON: {exc})") from None
    except ValueError:  # Python's own limit on the digits of an integer (CVE-2020-10735)
        raise ValueError("this file holds a number with thousands of digits; it is not a session") from None
    if not isinstance(data, dict) or data.get("app") != "attn-gui":
        raise ValueError("this is not an Attention Explorer session file")
    version = data.get("version")
    if version not in (1, 2, SESSION_VERSION) or isinstance(version, bool):
        raise ValueError(f"session version {str(version)[:40]} is not supported (this app reads versions 1 "
                         f"to {SESSION_VERSION})")
    body = "config" if version == 1 else "state"
    extra = sorted(set(data) - {"app", "version", body, "layout"})
    if extra:
        raise ValueError(f"unknown session field(s): {', '.join(map(str, extra))[:200]}")
    if body not in data:
        raise ValueError(f"the session has no {body}")
    try:
        if version == 1:
            state = ViewState(AttentionConfig.from_dict(with_old_defaults(data["config"])))
            check_window_text(state.config.sentence)
        else:
            state = ViewState.from_dict(data["state"] if version == SESSION_VERSION else old_state(data["state"]))
    except (TypeError, RecursionError) as exc:
        raise ValueError(f"the session's {body} is not valid: {exc}") from None
    check_model(state.config)  # a layer or a struck head its model lacks: refused as the file loads
    layout = data.get("layout", {})
    if not isinstance(layout, dict) or not all(
            k in LAYOUT_KEYS and isinstance(v, str) and len(v) < 64_000 and _is_base64(v)
            for k, v in layout.items()):
        raise ValueError("the session's window layout is not valid")
    return state, layout


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        return False
    return True


def load_session(path: str | os.PathLike) -> tuple[ViewState, dict[str, str]]:
    """Read and validate a session file; ``ReadError`` or ValueError with a clear message.

    Only a regular file is read, and at most ``MAX_BYTES`` of it (a FIFO, a device, a
    folder or a symlink loop is refused at once).
    """
    return parse_session(read_regular(Path(path), MAX_BYTES, what="session"))

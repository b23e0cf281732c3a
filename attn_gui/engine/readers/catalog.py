"""A model's spec by name: a bundled or registered model's, else read from a folder's config.json or a .gguf
file's header (spec only, never weights: what the open dialog and the CLI's ``--layer`` check need).

A folder or file is read again when its files change (``files_identity``: each file's size, modification time
and inode), and whatever the engine keeps of the model by name is dropped then (``on_change``): a folder
rewritten in place is never shown as its first reading."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from ..base.errors import ConfigError
from ..specs.catalog import MODELS, REGISTERED
from ..specs.spec import ModelSpec

_SEEN: dict[str, tuple] = {}  # a path's files' identity when its spec was last given
_CHANGED: list[Callable[[str], None]] = []  # what to drop of a model whose files changed, by its name
_LOCK = threading.Lock()


def on_change(clear: Callable[[str], None]) -> Callable[[str], None]:
    """Call ``clear(name)`` whenever the files of the model at path ``name`` are found changed."""
    _CHANGED.append(clear)
    return clear


def files_identity(name: str) -> tuple:
    """(file name, size, mtime_ns, inode) of the file at ``name`` or of every file in the folder at ``name``
    (links followed: the Hugging Face cache's blobs); () where nothing can be read (the reader says why)."""
    path = Path(name).expanduser()
    try:
        if not path.is_dir():
            st = path.stat()
            return ((path.name, st.st_size, st.st_mtime_ns, st.st_ino),)
        found = []
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    st = entry.stat()
                except OSError:
                    continue
                found.append((entry.name, st.st_size, st.st_mtime_ns, st.st_ino))
        return tuple(sorted(found))
    except OSError:
        return ()


def model_spec(name: str) -> ModelSpec:
    """The spec of model ``name``: a bundled model's, else the folder's or the .gguf file's (read again when its
    files change); ``ConfigError`` in one line saying why not."""
    if not isinstance(name, str) or name in ("", "none"):
        raise ConfigError(f"model must be one of {', '.join(MODELS)}, a model folder, a .gguf file or none; "
                          f"got {name!r:.40}")
    if name in MODELS:
        return MODELS[name]
    if name in REGISTERED:
        return REGISTERED[name]
    if name.lower().endswith(".gguf"):
        from .gguf.spec import spec_for
    else:
        from .hf.spec import spec_for
    stamp = files_identity(name)
    with _LOCK:
        changed = _SEEN.get(name, stamp) != stamp
        _SEEN[name] = stamp
    if changed:
        for clear in _CHANGED:
            clear(name)
    return spec_for(name, stamp)

"""The models in memory: one cache for every source, encoders and decoders alike.

The last ``KEEP`` models used stay loaded (the one shown and the one before it: switching
back is instant); loading a third drops the least recently used, and with it whatever a
source keeps of its weights (``on_drop``), so its memory (mapped files included) is freed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

KEEP = 2


class Loaded:
    """Loaded models by name, least recently used first."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self._models: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.RLock()
        self._on_drop: list[Callable[[], None]] = []

    def get(self, name: str, read: Callable[[], object]):
        """The model ``name``, from memory, else ``read()`` (once: other threads wait for it) and kept."""
        with self._lock:
            if name in self._models:
                self._models.move_to_end(name)
                return self._models[name]
            model = self._models[name] = read()
            if len(self._models) > self.keep:
                self._models.popitem(last=False)
                self._dropped()
            return model

    def forget(self, name: str) -> None:
        """Drop model ``name`` from memory (the next use reads it again; for tests and the bench)."""
        with self._lock:
            self._models.pop(name, None)
        self._dropped()

    def __contains__(self, name: str) -> bool:
        return name in self._models

    def on_drop(self, clear: Callable[[], None]) -> Callable[[], None]:
        """Call ``clear`` whenever a model leaves memory (a source's caches of weights on a device)."""
        self._on_drop.append(clear)
        return clear

    def _dropped(self) -> None:
        for clear in self._on_drop:
            clear()


LOADED = Loaded()

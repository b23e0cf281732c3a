"""How far a long model run has gone, and a way to stop it, without a parameter through every call.

A caller (the window's compute thread) runs the work inside ``watching(watch)``; the model forwards call
``at(done, total)`` after each layer and ``check()`` within one (each block of query rows). Both do nothing
outside ``watching``, so the engine's other callers (the CLI, tests, the other docks' threads) are unchanged.
The watch is the thread's own: a run on another thread neither reports to it nor stops with it.

    watch = Watch(report=lambda done, total: ...)   # called on the working thread
    with watching(watch):
        compute(config)            # raises Cancelled within a block of rows once watch.cancel() was called
    watch.cancel()                 # from any thread

``Cancelled`` is not a ``UserError``: it is the caller's own request, never a message about the input.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

Report = Callable[[int, int], None]


class Cancelled(Exception):
    """The run was stopped by ``Watch.cancel``; nothing it made is kept."""


class Watch:
    """One run's progress report and its stop flag.

    Parameters
    ----------
    report : callable (done, total), optional
        Called on the working thread as layers end (``at``): ``done`` of ``total`` layers.
    """

    def __init__(self, report: Report | None = None):
        self.report = report
        self._stop = threading.Event()

    def cancel(self) -> None:
        """Stop the run at its next ``check`` or ``at`` (any thread may call it)."""
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()


_local = threading.local()


@contextlib.contextmanager
def watching(watch: Watch) -> Iterator[Watch]:
    """Run the block with ``watch`` as this thread's: ``at`` reports to it and ``check`` obeys it."""
    before = getattr(_local, "watch", None)
    _local.watch = watch
    try:
        yield watch
    finally:
        _local.watch = before


def at(done: int, total: int) -> None:
    """A model run has finished ``done`` of its ``total`` layers: report it, then stop if asked."""
    watch = getattr(_local, "watch", None)
    if watch is None:
        return
    if watch.report is not None:
        watch.report(done, total)
    if watch.cancelled:
        raise Cancelled


def check() -> None:
    """Stop here if the run was cancelled (called within a layer, once per block of rows)."""
    watch = getattr(_local, "watch", None)
    if watch is not None and watch.cancelled:
        raise Cancelled

"""Python's garbage collector, run on the GUI thread only.

Python collects reference cycles in whichever thread happens to allocate, and the worker
threads allocate a lot (a model's first load, a compute). A cycle holding Qt wrappers (a
closed dialog, a window's menus) collected there deletes QObjects on that thread while the
GUI thread deletes their neighbours: the two then wait for each other's locks (Qt's
signal-slot mutex and Python's GIL), and the window freezes. This was seen as a hang in the
tests: the compute thread in ``QObject::~QObject`` waiting for the GIL, the GUI thread holding
it in ``QAction::~QAction`` waiting for Qt's mutex. pyqtgraph's ``GarbageCollector`` is the
known cure: automatic collection off, and a collection on a GUI-thread timer instead.

A single thread is not safe either: an automatic collection can start inside a Qt call that
holds the signal-slot mutex (``QObject::disconnect``) and delete a QMenu whose destructor
takes the same mutex. The test suite hung so in an in-process ``attn-gui export``, before any
window had turned collection off. So the offscreen drawing (``render.offscreen``) turns it
off too, and collects between pictures (``collect_now``), where no Qt call is under way.
"""

from __future__ import annotations

from pyqtgraph.util.garbage_collector import GarbageCollector

_COLLECTOR: GarbageCollector | None = None


def collect_on_gui_thread(interval_s: float = 1.0) -> None:
    """Collect garbage on a timer of the GUI thread from now on (once per process; idempotent)."""
    global _COLLECTOR
    if _COLLECTOR is None:
        _COLLECTOR = GarbageCollector(interval=interval_s)


def collect_now() -> None:
    """Collect what the generations' thresholds ask for, here (a point where no Qt call runs)."""
    if _COLLECTOR is not None:
        _COLLECTOR.check()

"""One worker thread computes; only the newest request is ever computed or shown.

Tiny configs (the tutorials' sizes) are computed in the GUI thread at once, since that
takes less time than handing them over; everything else goes to the thread. The rules
of who wins are in ``present.runner``; this module only moves work between threads.

Frames are also let go on the worker thread: the service keeps the frame it delivered
last, so when the window swaps in a new one, the service holds the only reference to
the old one and hands it to the thread, where its tensors are freed (tens of
milliseconds for a large frame) instead of on the GUI thread.

Every thread made here is stopped before the interpreter ends (``stop_all``, at exit): Qt
aborts the process when a running QThread is destroyed, which a script that builds a
window and ends while a worker runs would otherwise do.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import traceback
import weakref
from typing import Any
from collections.abc import Callable

from PySide6 import QtCore

from ..engine import AttentionConfig, UserError
from ..present.frame import Frame
from ..engine.base.progress import Watch
from ..present.runner import Failure, LatestWins, is_partial, is_small, run_request, shares_run, torch_threads


_RUNNING: weakref.WeakSet = weakref.WeakSet()  # every ComputeService and TaskThread whose thread may run


def stop_all() -> None:
    """Stop every worker thread still running, each after its task in progress (at exit, and for ``show``)."""
    for owner in list(_RUNNING):
        with contextlib.suppress(RuntimeError):  # its Qt object is gone: so is its thread
            owner.shutdown()


atexit.register(stop_all)


class _Worker(QtCore.QObject):
    finished = QtCore.Signal(object)  # Frame or Failure
    progress = QtCore.Signal(int, int, int)  # request id, done, total (a model's first load)
    layers = QtCore.Signal(int, int, int)  # request id, layers done, layers (the model's run)

    def __init__(self, queue: LatestWins):
        super().__init__()
        self._queue = queue
        self._lock = threading.Lock()
        self._retired: list[Frame] = []
        self.running: tuple[int, AttentionConfig, Watch] | None = None  # the request computed now

    def retire(self, frame: Frame) -> None:
        """Keep ``frame`` until ``release`` runs on the worker thread (called on the GUI thread)."""
        with self._lock:
            self._retired.append(frame)

    @QtCore.Slot()
    def release(self) -> None:
        with self._lock:
            retired, self._retired = self._retired, []
        del retired  # the last references: the tensors are freed here, on this thread

    @QtCore.Slot()
    def process(self) -> None:
        job = self._queue.take()
        if job is not None:  # None: a newer request already took this wake-up's work
            request_id, config = job
            report = lambda done, total: self.progress.emit(request_id, done, total)  # noqa: E731
            watch = Watch(lambda done, total: self.layers.emit(request_id, done, total))
            with self._lock:
                self.running = (request_id, config, watch)
            try:  # both halves of a large decoder's request under one watch: a cancel stops either
                outcome = run_request(request_id, config, report, watch, first=True)
                self.finished.emit(outcome)  # a large decoder's first maps: shown while the rest of its run goes on
                if is_partial(outcome) and self._queue.is_latest(request_id):  # else a newer request resumes it
                    outcome = run_request(request_id, config, report, watch)
                    self.finished.emit(outcome)
            finally:
                with self._lock:
                    self.running = None

    def cancel(self, unless: AttentionConfig | None = None) -> bool:
        """Stop the request in progress (any thread), unless ``unless`` reads the same model run; whether
        one was stopped."""
        with self._lock:
            running = self.running
        if running is None or (unless is not None and shares_run(running[1], unless)):
            return False
        running[2].cancel()
        return True


class ComputeService(QtCore.QObject):
    """Owns the worker thread; ``submit`` a config, get ``resultReady`` for the newest one.

    Signals
    -------
    resultReady(Frame)
        The newest request's frame (stale ones are never emitted). A large decoder's request gives
        two: its first maps (``present.runner.is_partial``), then the whole run's frame; a newer
        request stops the run after its layer in progress.
    failed(Failure)
        The newest request failed.
    loadProgress(int, int)
        The newest request's model is being converted on its first load: done, total steps.
    layerProgress(int, int)
        The newest request's model run: layers done, layers.
    """

    resultReady = QtCore.Signal(object)
    failed = QtCore.Signal(object)
    loadProgress = QtCore.Signal(int, int)
    layerProgress = QtCore.Signal(int, int)
    _wake = QtCore.Signal()
    _release = QtCore.Signal()

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.queue = LatestWins()
        self._thread = QtCore.QThread()
        self._thread.setObjectName("attn-gui compute")
        self._worker = _Worker(self.queue)
        self._worker.moveToThread(self._thread)
        self._wake.connect(self._worker.process, QtCore.Qt.ConnectionType.QueuedConnection)
        self._release.connect(self._worker.release, QtCore.Qt.ConnectionType.QueuedConnection)
        self._delivered: Frame | None = None
        self._worker.finished.connect(self._deliver)
        self._worker.progress.connect(self._on_progress)
        self._worker.layers.connect(self._on_layers)
        self._thread.start()
        _RUNNING.add(self)

    @property
    def latest_id(self) -> int:
        return self.queue.latest_id

    def submit(self, config: AttentionConfig) -> int:
        """Queue ``config``, replacing any request not yet started; returns its id.

        A tiny config is computed right here instead (see ``present.runner.is_small``).
        """
        small = is_small(config)
        self._worker.cancel(unless=config)  # a run this request cannot use is stopped, not waited for
        request_id = self.queue.submit(config, pending=not small)
        if small:
            with torch_threads(1):
                self._deliver(run_request(request_id, config))
        else:
            self._wake.emit()
        return request_id

    def cancel(self) -> bool:
        """Stop the request in progress (within a block of rows, ``engine.base.progress``); whether one ran. Its
        ``failed`` comes with ``Failure.cancelled``."""
        return self._worker.cancel()

    @property
    def working(self) -> bool:
        """Whether the thread is computing a request now."""
        return self._worker.running is not None

    def _on_progress(self, request_id: int, done: int, total: int) -> None:
        if self.queue.is_latest(request_id):
            self.loadProgress.emit(done, total)

    def _on_layers(self, request_id: int, done: int, total: int) -> None:
        if self.queue.is_latest(request_id):
            self.layerProgress.emit(done, total)

    def _deliver(self, outcome: Frame | Failure) -> None:
        if not self.queue.is_latest(outcome.request_id):
            return
        if isinstance(outcome, Frame):
            previous, self._delivered = self._delivered, outcome
            self.resultReady.emit(outcome)  # the window swaps it in: previous is now ours alone
            if previous is not None:
                self._worker.retire(previous)
                del previous
                self._release.emit()
        else:
            self.failed.emit(outcome)

    def shutdown(self) -> None:
        """Stop the thread (a model run in progress stops within a block of rows)."""
        self.queue.clear()
        self._worker.cancel()
        self._delivered = None
        self._thread.quit()
        self._thread.wait()
        _RUNNING.discard(self)


class _Task(QtCore.QObject):
    finished = QtCore.Signal(object, object)  # (token, outcome)

    @QtCore.Slot(object, object, object)
    def run(self, token: object, function: Callable[[], Any], _unused: object = None) -> None:
        try:
            outcome = function()
        except UserError as exc:
            outcome = exc
        except Exception as exc:  # noqa: BLE001 - a task must never take the window down
            outcome = RuntimeError(f"unexpected error: {exc}\n{''.join(traceback.format_exception(exc))}")
        self.finished.emit(token, outcome)


class TaskThread(QtCore.QObject):
    """One more thread for work that is not a frame (a generation step): ``start`` a callable, get ``done``.

    Signals
    -------
    done(object, object)
        The token given to ``start`` and the callable's return value, or the exception it raised
        (a ``UserError`` as raised; anything else a ``RuntimeError`` with the traceback).
    """

    done = QtCore.Signal(object, object)
    _run = QtCore.Signal(object, object, object)

    def __init__(self, name: str, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._thread = QtCore.QThread()
        self._thread.setObjectName(name)
        self._task = _Task()
        self._task.moveToThread(self._thread)
        self._run.connect(self._task.run, QtCore.Qt.ConnectionType.QueuedConnection)
        self._task.finished.connect(self.done)
        self._thread.start()
        _RUNNING.add(self)

    def start(self, token: object, function: Callable[[], Any]) -> None:
        """Run ``function()`` on the thread (after any task before it); ``done(token, outcome)`` follows."""
        self._run.emit(token, function, None)

    def shutdown(self) -> None:
        """Stop the thread (waits for a task in progress to finish)."""
        self._thread.quit()
        self._thread.wait()
        _RUNNING.discard(self)

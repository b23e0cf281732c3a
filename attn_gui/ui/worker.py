"""One worker thread computes; only the newest request is ever computed or shown.

Tiny configs (the tutorials' sizes) are computed in the GUI thread at once, since
that takes less time than handing them over; everything else goes to the thread.

Like napari's slicer: each request carries an id; a request that is superseded
before the worker reaches it is never computed, and a result whose id is not the
latest is dropped by the window. The GUI thread only stores the pending request.
"""

from __future__ import annotations

import itertools
import threading
import traceback

from PySide6 import QtCore

from ..engine import AttentionConfig, DeviceError, compute, tokens_for
from .maps import Frame, make_frame


SMALL_CELLS = 8 * 64 * 64  # h * T * T
SMALL_PARAMS = 1_000_000  # weights to draw


def is_small(config: AttentionConfig) -> bool:
    """Whether ``config`` computes in about a millisecond (then the GUI thread does it)."""
    if config.model is not None or config.device != "cpu":
        return False
    T, h, d = len(tokens_for(config).tokens), config.dims.heads, config.dims.d_model
    d_k, d_v = config.dims.d_k, config.dims.d_v
    return h * T * T <= SMALL_CELLS and h * d * (2 * d_k + 2 * d_v) <= SMALL_PARAMS


def run_request(request_id: int, config: AttentionConfig) -> Frame | tuple[str, bool]:
    """Compute one request: its Frame, or (message, whether the device was at fault)."""
    try:
        return make_frame(request_id, compute(config))
    except DeviceError as exc:
        return str(exc), True
    except (ValueError, MemoryError) as exc:
        return str(exc) or type(exc).__name__, False
    except Exception as exc:  # noqa: BLE001 - a compute must never take the window down
        detail = "".join(traceback.format_exception(exc))
        return f"unexpected error: {exc}\n{detail}", False


class _Worker(QtCore.QObject):
    done = QtCore.Signal(object)  # Frame
    failed = QtCore.Signal(int, object, str, bool)  # id, config, message, is_device_error

    def __init__(self, service: "ComputeService"):
        super().__init__()
        self._service = service

    @QtCore.Slot()
    def process(self) -> None:
        job = self._service._take()
        if job is None:  # a newer request already took this wake-up's work
            return
        outcome = run_request(*job)
        if isinstance(outcome, Frame):
            self.done.emit(outcome)
        else:
            self.failed.emit(job[0], job[1], *outcome)


class ComputeService(QtCore.QObject):
    """Owns the worker thread; ``submit`` a config, get ``resultReady`` for the newest one.

    Signals
    -------
    resultReady(Frame)
        The newest request's frame (stale ones are never emitted).
    failed(int, AttentionConfig, str, bool)
        The newest request failed: id, config, message, whether the device was at fault.
    """

    resultReady = QtCore.Signal(object)
    failed = QtCore.Signal(int, object, str, bool)
    _wake = QtCore.Signal()

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: tuple[int, AttentionConfig] | None = None
        self.latest_id = 0
        self._thread = QtCore.QThread()
        self._thread.setObjectName("attn-gui compute")
        self._worker = _Worker(self)
        self._worker.moveToThread(self._thread)
        self._wake.connect(self._worker.process, QtCore.Qt.ConnectionType.QueuedConnection)
        self._worker.done.connect(self._on_done)
        self._worker.failed.connect(self._on_failed)
        self._thread.start()

    def submit(self, config: AttentionConfig) -> int:
        """Queue ``config``, replacing any request not yet started; returns its id.

        A tiny config is computed right here instead: handing it to the thread would cost
        more (a GIL hand-over behind the window's repaint) than the compute itself.
        """
        with self._lock:
            request_id = next(self._ids)
            self.latest_id = request_id
            small = is_small(config)
            self._pending = None if small else (request_id, config)
        if small:
            self._worker_run(request_id, config)
        else:
            self._wake.emit()
        return request_id

    def _worker_run(self, request_id: int, config: AttentionConfig) -> None:
        outcome = run_request(request_id, config)
        if isinstance(outcome, Frame):
            self._on_done(outcome)
        else:
            self._on_failed(request_id, config, *outcome)

    def _take(self) -> tuple[int, AttentionConfig] | None:
        with self._lock:
            job, self._pending = self._pending, None
            return job

    def _on_done(self, frame: Frame) -> None:
        if frame.request_id == self.latest_id:
            self.resultReady.emit(frame)

    def _on_failed(self, request_id: int, config, message: str, device: bool) -> None:
        if request_id == self.latest_id:
            self.failed.emit(request_id, config, message, device)

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._pending is not None

    def shutdown(self) -> None:
        """Stop the thread (waits for a compute in progress to finish)."""
        with self._lock:
            self._pending = None
        self._thread.quit()
        self._thread.wait()

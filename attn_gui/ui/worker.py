"""One worker thread computes; only the newest request is ever computed or shown.

Like napari's slicer: each request carries an id; a request that is superseded
before the worker reaches it is never computed, and a result whose id is not the
latest is dropped by the window. The GUI thread only stores the pending request.
"""

from __future__ import annotations

import itertools
import threading
import traceback

from PySide6 import QtCore

from ..engine import AttentionConfig, DeviceError, compute
from .maps import Frame, make_frame


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
        request_id, config = job
        try:
            frame = make_frame(request_id, compute(config))
        except DeviceError as exc:
            self.failed.emit(request_id, config, str(exc), True)
        except (ValueError, MemoryError) as exc:
            self.failed.emit(request_id, config, str(exc) or type(exc).__name__, False)
        except Exception as exc:  # noqa: BLE001 - the worker must survive anything a compute throws
            detail = "".join(traceback.format_exception(exc))
            self.failed.emit(request_id, config, f"unexpected error: {exc}\n{detail}", False)
        else:
            self.done.emit(frame)


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
        """Queue ``config``, replacing any request not yet started; returns its id."""
        with self._lock:
            request_id = next(self._ids)
            self._pending = (request_id, config)
            self.latest_id = request_id
        self._wake.emit()
        return request_id

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

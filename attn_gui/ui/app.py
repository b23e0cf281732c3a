"""Start the window: application names, an error hook that logs and shows a dialog."""

from __future__ import annotations

import contextlib
import sys
import threading
import traceback
from pathlib import Path

from ..engine import AttentionConfig


def log_path() -> Path:
    from PySide6 import QtCore

    base = QtCore.QStandardPaths.writableLocation(QtCore.QStandardPaths.StandardLocation.AppDataLocation)
    return Path(base or Path.home() / ".attn-gui") / "attn-gui.log"


def install_error_hook(app) -> None:
    from PySide6 import QtGui, QtWidgets

    def hook(exc_type, exc, tb):
        detail = "".join(traceback.format_exception(exc_type, exc, tb))
        path = log_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(detail + "\n")
        except OSError:
            pass
        shown = any(w.isVisible() and w.objectName() == "mainWindow" for w in QtWidgets.QApplication.topLevelWidgets())
        after = ("The window keeps the last good result." if shown
                 else "The window could not open; try again, or start with saved settings moved aside.")
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Critical, "Unexpected error",
                                    f"Something went wrong: {str(exc)[:500]}\n\n{after} Details were logged to {path}.")
        copy = box.addButton("Copy details", QtWidgets.QMessageBox.ButtonRole.ActionRole)
        box.addButton(QtWidgets.QMessageBox.StandardButton.Close)
        box.setDetailedText(detail)
        box.exec()
        if box.clickedButton() is copy:
            QtGui.QGuiApplication.clipboard().setText(detail)

    sys.excepthook = hook


def run_gui(config: AttentionConfig | None = None, head: int | None = None, focus: str | None = None,
            all_maps: bool = False, dock: str | None = None, geometry: tuple[int, int] | None = None,
            lesson: tuple[str, int] | None = None, scales: dict[str, str] | None = None) -> int:
    """Open the window (on ``config`` if given, showing ``head``, 0-based, if given) and run until it closes.

    ``focus`` (a field) or ``all_maps`` choose the canvas's view, ``dock`` (one of
    ``present.state.DOCKS``) the dock in front, ``geometry`` (width, height) the window's size;
    ``lesson`` (name, step from 1) opens the Lessons dock at that step; ``scales`` maps a field
    to its colour scale mode (``present.scales``).
    """
    app = prepare_app()
    window = open_window(config)
    if head is not None:
        window.set_state(window.state.replace(head=head))
    if focus is not None or all_maps:
        window.focus_on(focus)
    for field, mode in (scales or {}).items():
        window.set_scale(field, mode)
    if geometry is not None:
        window.resize(*geometry)
    window.show()  # first: a dock hidden until now (the model view) joins its tab group as the window shows
    if dock is not None:
        window.show_dock(dock, keep=True)
    if lesson is not None:
        window.open_lessons(*lesson)
    with _closed_by_signals(app, window) as interrupted:
        status = app.exec()
    _delete_now(window)
    if interrupted():
        print("attn-gui: interrupted", file=sys.stderr)
        return 130
    return status


def _delete_now(window) -> None:
    """Delete the closed window, its docks and its maps' scenes while Python and Qt are whole. Left to the
    interpreter's exit, PySide deletes what remains in no set order, and a pyqtgraph item's Python event handler
    could run on a half-deleted parent: a segmentation fault after the window had closed (about one run in three
    of tests/ui/test_open_trained.py, gdb: ``QGraphicsWidget::~QGraphicsWidget`` → ``QGraphicsWidget::event``)."""
    import shiboken6

    if shiboken6.isValid(window):
        shiboken6.delete(window)


@contextlib.contextmanager
def _closed_by_signals(app, window):
    """Within it, Ctrl-C and SIGTERM close ``window`` as File → Quit does (its settings saved, its compute
    stopped within a second) and end the event loop; yields whether one came. Python runs a signal's handler
    only between its own steps, and Qt's loop is C++: the signal's byte on a socket (``signal.set_wakeup_fd``)
    wakes the loop, whose Python slot lets the handler run at once. The handlers before are put back after."""
    import signal
    import socket

    from PySide6 import QtCore

    came: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield lambda: False
        return
    read, write = socket.socketpair()
    for end in (read, write):
        end.setblocking(False)
    notifier = QtCore.QSocketNotifier(read.fileno(), QtCore.QSocketNotifier.Type.Read, app)
    notifier.activated.connect(lambda *_: read.recv(512))

    def close(signum, _frame) -> None:
        came.append(signum)
        QtCore.QTimer.singleShot(0, lambda: (window.close(), app.quit()))

    before = {sig: signal.signal(sig, close) for sig in (signal.SIGINT, signal.SIGTERM)}
    wakeup = signal.set_wakeup_fd(write.fileno())
    try:
        yield lambda: bool(came)
    finally:
        signal.set_wakeup_fd(wakeup)
        for sig, handler in before.items():
            signal.signal(sig, handler)
        notifier.setEnabled(False)
        notifier.deleteLater()  # before its socket closes: Qt never polls a closed descriptor
        read.close()
        write.close()


def prepare_app():
    """The QApplication (the running one, else a new one) named, with its icon and the error hook."""
    from PySide6 import QtGui, QtWidgets

    from .. import __version__
    from ..present.resources import path_of

    QtWidgets.QApplication.setApplicationName("attn-gui")
    QtWidgets.QApplication.setOrganizationName("attn-gui")
    QtWidgets.QApplication.setApplicationDisplayName("Attention Explorer")
    QtWidgets.QApplication.setApplicationVersion(__version__)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    app.setWindowIcon(QtGui.QIcon(path_of("icon.svg")))
    install_error_hook(app)
    return app


def open_window(config: AttentionConfig | None = None, settings=None):
    """The main window on ``config`` (else the saved state), whatever the saved settings hold.

    Settings that still break the window (a bug's way in) are set aside for this run: the
    window opens on the defaults, and the status bar says so, as it does for every
    setting that fell back to its default.
    """
    from .main_window import MainWindow
    from .settings import Settings

    settings = settings or Settings()
    try:
        window = MainWindow(config, settings=settings)
    except (ValueError, TypeError, RecursionError) as exc:
        fallback = Settings(settings.path, memory_only=True)
        fallback.notes = [*settings.notes, f"the saved settings could not be used ({str(exc)[:120]}); "
                                           f"starting from the defaults, not saving"]
        _log(exc)
        window, settings = MainWindow(config, settings=fallback), fallback
    if settings.notes:
        window.statusBar().showMessage("⚠ " + " · ".join(settings.notes), 20000)
    return window


def _log(exc: BaseException) -> None:
    try:
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)) + "\n")
    except OSError:
        pass

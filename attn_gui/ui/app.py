"""Start the window: application names, an error hook that logs and shows a dialog."""

from __future__ import annotations

import sys
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
        box = QtWidgets.QMessageBox(QtWidgets.QMessageBox.Icon.Critical, "Unexpected error",
                                    f"Something went wrong: {exc}\n\nThe window keeps the last good result. "
                                    f"Details were logged to {path}.")
        copy = box.addButton("Copy details", QtWidgets.QMessageBox.ButtonRole.ActionRole)
        box.addButton(QtWidgets.QMessageBox.StandardButton.Close)
        box.setDetailedText(detail)
        box.exec()
        if box.clickedButton() is copy:
            QtGui.QGuiApplication.clipboard().setText(detail)

    sys.excepthook = hook


def run_gui(config: AttentionConfig | None = None) -> int:
    """Open the window (on ``config`` if given) and run until it closes."""
    from PySide6 import QtGui, QtWidgets

    from .. import __version__

    QtWidgets.QApplication.setApplicationName("attn-gui")
    QtWidgets.QApplication.setOrganizationName("attn-gui")
    QtWidgets.QApplication.setApplicationDisplayName("Attention Explorer")
    QtWidgets.QApplication.setApplicationVersion(__version__)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    from ..present.resources import path_of

    app.setWindowIcon(QtGui.QIcon(path_of("icon.svg")))
    install_error_hook(app)
    from .main_window import MainWindow

    window = MainWindow(config)
    window.show()
    return app.exec()

import sys

from PySide6 import QtWidgets

from attn_gui.ui import app as app_mod


def test_unexpected_errors_are_logged_and_shown(qtbot, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(app_mod, "log_path", lambda: tmp_path / "logs" / "attn-gui.log")
    monkeypatch.setattr(QtWidgets.QMessageBox, "exec", lambda box: shown.append(box.text()) or 0)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    app_mod.install_error_hook(QtWidgets.QApplication.instance())
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    assert "boom" in shown[0] and "last good result" in shown[0]
    log = (tmp_path / "logs" / "attn-gui.log").read_text()
    assert "RuntimeError: boom" in log and "Traceback" in log

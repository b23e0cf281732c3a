import sys

from PySide6 import QtWidgets

from attn_gui.ui import app as app_mod


def raise_through_the_hook(tmp_path, monkeypatch) -> list[str]:
    shown = []
    monkeypatch.setattr(app_mod, "log_path", lambda: tmp_path / "logs" / "attn-gui.log")
    monkeypatch.setattr(QtWidgets.QMessageBox, "exec", lambda box: shown.append(box.text()) or 0)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    app_mod.install_error_hook(QtWidgets.QApplication.instance())
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    return shown


def test_unexpected_errors_are_logged_and_shown(window, tmp_path, monkeypatch):
    shown = raise_through_the_hook(tmp_path, monkeypatch)
    assert "boom" in shown[0] and "The window keeps the last good result" in shown[0]
    log = (tmp_path / "logs" / "attn-gui.log").read_text()
    assert "RuntimeError: boom" in log and "Traceback" in log


def test_with_no_window_the_dialog_does_not_speak_of_one(qtbot, tmp_path, monkeypatch):
    shown = raise_through_the_hook(tmp_path, monkeypatch)
    assert "The window could not open" in shown[0] and "last good result" not in shown[0]

import json

from PySide6 import QtWidgets

from attn_gui.engine import AttentionConfig


def test_save_and_open_session(window, qtbot, tmp_path):
    window.panel.headsSpin.setValue(2)
    qtbot.waitUntil(lambda: window.frame.result.config.heads == 2, timeout=10000)
    path = tmp_path / "two-heads.json"
    window.save_session(str(path))
    data = json.loads(path.read_text())
    assert data["version"] == 1 and data["config"]["heads"] == 2 and "geometry" in data["layout"]
    window.panel.set_config(AttentionConfig(sentence="something else"))
    qtbot.waitUntil(lambda: window.frame.result.config.sentence == "something else", timeout=10000)
    assert window.open_session(str(path))
    qtbot.waitUntil(lambda: window.frame.result.config.heads == 2, timeout=10000)
    assert window.frame.result.config.sentence == AttentionConfig().sentence
    assert window.settings.recent_sessions()[0] == str(path)


def test_hostile_session_changes_nothing(window, qtbot, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warnings.append(a[2]))
    before = window.frame
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"app": "attn-gui", "version": 1, "config": {"d_model": 10**9}}))
    assert not window.open_session(str(path))
    assert "d_model must be between" in warnings[-1]
    assert not window.open_session(str(tmp_path / "missing.json"))
    assert "No such file" in warnings[-1]
    assert window.frame is before
    assert window.panel.config() == AttentionConfig()

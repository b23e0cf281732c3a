import json

from PySide6 import QtWidgets

from attn_gui.cli import build_parser, config_from_args
from attn_gui.engine import AttentionConfig
from attn_gui.present.state import ViewState
from attn_gui.ui import MainWindow


def test_save_and_open_session(window, qtbot, tmp_path):
    window.panel.headsSpin.setValue(2)
    qtbot.waitUntil(lambda: window.frame.result.config.heads == 2, timeout=10000)
    window.select_head(1)
    window.select_token(3)
    path = tmp_path / "two-heads.json"
    window.files.save_session(str(path))
    data = json.loads(path.read_text())
    assert data["version"] == 3 and data["state"]["config"]["heads"] == 2 and "geometry" in data["layout"]
    assert (data["state"]["head"], data["state"]["token"]) == (1, 3)
    window.set_state(ViewState(AttentionConfig(sentence="something else")))
    qtbot.waitUntil(lambda: window.frame.result.config.sentence == "something else", timeout=10000)
    assert window.files.open_session(str(path))
    qtbot.waitUntil(lambda: window.frame.result.config.heads == 2, timeout=10000)
    assert window.frame.result.config.sentence == AttentionConfig().sentence
    assert (window.state.head, window.state.token) == (1, 3)
    assert window.canvas.item_of("weights:1").isVisible()
    assert window.settings.recent_sessions()[0] == str(path)


def test_hostile_session_changes_nothing(window, qtbot, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warnings.append(a[2]))
    before = window.frame
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"app": "attn-gui", "version": 1, "config": {"d_model": 10**9}}))
    assert not window.files.open_session(str(path))
    assert "d_model must be between" in warnings[-1]
    assert not window.files.open_session(str(tmp_path / "missing.json"))
    assert "No such file" in warnings[-1]
    assert window.frame is before
    assert window.state.config == AttentionConfig()


EXACT = AttentionConfig(seed=2**40, weight_seed=2**63 - 1, temperature=0.123, heads=128, d_k=2, d_v=2)


def test_values_the_widgets_never_held_round_trip_through_the_window(window, qtbot, tmp_path):
    """A 64-bit seed, a temperature with three decimals and the most heads show and save exactly."""
    path = tmp_path / "exact.json"
    path.write_text(json.dumps({"app": "attn-gui", "version": 1, "config": EXACT.to_dict(), "layout": {}}))
    assert window.files.open_session(str(path))
    qtbot.waitUntil(lambda: window.frame.result.config == EXACT, timeout=30000)
    p = window.panel
    assert p.seedSpin.value() == 2**40 and p.seedSpin.text() == str(2**40)
    assert p.weightSeedSpin.value() == 2**63 - 1
    assert p.temperatureSpin.value() == 0.123 and p.temperatureSpin.text() == "0.123"
    assert p.headsSpin.value() == 128
    p.causalCheck.setChecked(True)  # an unrelated edit must not disturb the rest
    qtbot.waitUntil(lambda: window.frame.result.config.causal, timeout=30000)
    assert window.state.config == EXACT.replace(causal=True)
    window.files.save_session(str(tmp_path / "again.json"))
    saved = json.loads((tmp_path / "again.json").read_text())["state"]["config"]
    assert (saved["seed"], saved["weight_seed"], saved["temperature"], saved["heads"]) == (
        2**40, 2**63 - 1, 0.123, 128)


def test_gui_flags_show_exactly_what_they_say(qtbot, settings):
    args = build_parser().parse_args(["gui", "--seed", str(2**40), "--temperature", "0.123", "--heads", "128",
                                      "--d-k", "2", "--d-v", "2", "--weight-seed", str(2**63 - 1)])
    win = MainWindow(config_from_args(args), settings=settings)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: win.frame is not None, timeout=30000)
    assert win.frame.result.config == EXACT == win.state.config
    assert (win.panel.seedSpin.value(), win.panel.temperatureSpin.text()) == (2**40, "0.123")
    win.service.shutdown()


def test_an_out_of_range_value_gives_a_message_not_a_change(window, tmp_path, monkeypatch):
    path = tmp_path / "bad.json"
    bad = {**AttentionConfig().to_dict(), "heads": 129}
    path.write_text(json.dumps({"app": "attn-gui", "version": 1, "config": bad, "layout": {}}))
    messages = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: messages.append(a[-1]))
    assert not window.files.open_session(str(path))
    assert "heads must be between 1 and 128; got 129" in messages[0]
    assert window.state.config == AttentionConfig()

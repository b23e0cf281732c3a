"""Hostile or corrupt settings fall back to the defaults with a note; the window always appears."""

import json
import os
import subprocess
import sys

import pytest

from attn_gui.engine import AttentionConfig
from attn_gui.present.state import ViewState
from attn_gui.ui.settings import Settings


def saved(tmp_path, **values) -> Settings:
    s = Settings(tmp_path / "settings.ini")
    for key, value in values.items():
        s.set(key, value)
    s.sync()
    return Settings(tmp_path / "settings.ini")


def test_the_state_round_trips(tmp_path):
    state = ViewState(AttentionConfig(heads=2, causal=True), head=1, focus="weights")
    s = Settings(tmp_path / "settings.ini")
    s.set_state(state)
    s.sync()
    again = Settings(tmp_path / "settings.ini")
    assert again.state() == state and again.notes == []


def test_settings_saved_before_stable_inputs_read_as_they_were_made(tmp_path):
    # every field is saved: one without "inputs" was saved when "embedding" was the default
    config = AttentionConfig(heads=2).to_dict()
    del config["inputs"]
    s = saved(tmp_path, state=json.dumps({"config": config, "head": 1}))
    assert s.state() == ViewState(AttentionConfig(heads=2, inputs="embedding"), head=1)
    s = saved(tmp_path, state="", config=json.dumps(config))
    assert s.state().config == AttentionConfig(heads=2, inputs="embedding")
    s = saved(tmp_path, state=json.dumps(ViewState(AttentionConfig(inputs="embedding")).to_dict()))
    assert s.state().config.inputs == "embedding" and s.notes == []


@pytest.mark.parametrize("text,reason", [
    ('{"config": ' * 5000 + "}" * 5000, "nested too deeply|not valid JSON"),
    ('{"config": {"d_model": "five"}}', "d_model must be a whole number"),
    ('{"config": {"d_model": 1e300}}', "d_model must be a whole number"),
    ('{"config": {"heads": ' + "9" * 5000 + "}}", "not valid JSON"),
    ('{"config": {"sentence": "' + "x" * 20_000 + '"}}', "without a space"),
    ("[1, 2]", "mapping"),
    ("not json", "not valid JSON"),
])
def test_a_bad_saved_state_gives_the_defaults_and_a_note(tmp_path, text, reason):
    s = saved(tmp_path, state=text)
    assert s.state() is None
    assert len(s.notes) == 1 and "starting from the defaults" in s.notes[0]
    import re

    assert re.search(reason, s.notes[0]), s.notes[0]


def test_values_of_the_wrong_type_read_as_defaults(tmp_path):
    path = tmp_path / "settings.ini"
    path.write_text("[General]\nstate=a, b, c\nexport_dir=@Variant(\\0\\0\\0\\x2\\0\\0\\0\\x5)\n"
                    "recent_sessions=\"[1, \\\"/x\\\", {}]\"\ngeometry=123\n")
    s = Settings(path)
    assert s.get("state") == "" and s.get("geometry").isEmpty()
    assert s.recent_sessions() == ["/x"]
    assert any("state is not a str" in n for n in s.notes)


def test_a_settings_file_that_is_a_fifo_is_not_opened(tmp_path):
    os.mkfifo(tmp_path / "settings.ini")
    s = Settings(tmp_path / "settings.ini")  # QSettings would block here for ever
    assert s.state() is None and "is not a regular file" in s.notes[0]
    s.set("export_dir", "/tmp")  # kept in memory for this run
    assert s.get("export_dir") == "/tmp"


CODE = """
import sys
from PySide6 import QtCore
from attn_gui.ui import app as app_mod
from attn_gui.ui.main_window import MainWindow
orig = MainWindow.show_frame
def show_frame(self, frame):
    orig(self, frame)
    def report():  # after start-up: the first frame may come inside MainWindow()
        print("first frame", frame.result.config.heads, "|", self.statusBar().currentMessage(), flush=True)
        self.close()
    QtCore.QTimer.singleShot(0, report)
MainWindow.show_frame = show_frame
sys.exit(app_mod.run_gui(None))
"""


@pytest.mark.parametrize("setup,note", [
    ("fifo", "is not a regular file"),
    ("deep", "could not be used"),
])
def test_the_window_appears_whatever_the_settings_hold(tmp_path, setup, note):
    path = tmp_path / "settings.ini"
    if setup == "fifo":
        os.mkfifo(path)
    else:
        deep = '{"config": ' * 3000 + "}" * 3000
        path.write_text("[General]\nstate=" + json.dumps(deep).replace("\\", "\\\\") + "\n")
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTN_GUI_CONFIG_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "first frame 1 | ⚠" in proc.stdout and note in proc.stdout
    assert "Traceback" not in proc.stderr


def test_the_last_state_comes_back_at_start(tmp_path):
    Settings(tmp_path / "settings.ini").set_state(ViewState(AttentionConfig(heads=3)))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTN_GUI_CONFIG_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "first frame 3 |" in proc.stdout


def test_a_saved_view_that_disagrees_with_its_config_falls_back_field_by_field(tmp_path):
    settings = Settings(tmp_path / "settings.ini")
    state = ViewState(AttentionConfig(sentence="the cat sat", heads=2), head=1, token=1)
    settings.set("state", json.dumps({**state.to_dict(), "head": 4}))
    loaded = settings.state()
    assert loaded.config == state.config and loaded.head == 0 and loaded.token == 1
    assert any("head 5" in note and "reset" in note for note in settings.notes)

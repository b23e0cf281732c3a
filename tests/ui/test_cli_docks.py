"""``attn-gui --dock NAME``: the dock asked for is in front when the first result shows, with random
weights and with a model that loads first (whose first frame would bring the model view in front).

The window runs in a subprocess (a second QApplication in the pytest process would abort); each
run of the command line there reports the docks on screen after its first frame, then closes.
"""

import json
import os
import subprocess
import sys

import pytest

from attn_gui.present.docks import DOCK_ROWS

CODE = """
import json, os, sys
from PySide6 import QtCore
from attn_gui import cli
from attn_gui.ui.main_window import MainWindow
from attn_gui.ui.sight import in_sight

orig = MainWindow.show_frame
def show_frame(self, frame):
    orig(self, frame)
    if getattr(self, "reported", False):
        return
    self.reported = True
    def report():
        docks = {d.objectName(): d for d in self.findChildren(QtWidgets.QDockWidget)}
        print("FRONT", json.dumps(sorted(name for name, d in docks.items() if in_sight(d))), flush=True)
        self.close()
    QtCore.QTimer.singleShot(50, report)
MainWindow.show_frame = show_frame
from PySide6 import QtWidgets
for i, args in enumerate(json.loads(sys.argv[1])):
    os.environ["ATTN_GUI_CONFIG_DIR"] = os.path.join(sys.argv[2], str(i))  # a first start each time
    print("RUN", json.dumps(args), flush=True)
    assert cli.main(args) == 0
"""

# the dock's object name in the window, for each --dock choice (the dock table's rows)
NAMES = {row.name: row.object_name for row in DOCK_ROWS}
DOCKS = tuple(NAMES)


def fronts(tmp_path, runs: list[list[str]]) -> list[list[str]]:
    """The object names of the docks on screen after each run's first frame."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", CODE, json.dumps(runs), str(tmp_path)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return [json.loads(line[6:]) for line in proc.stdout.splitlines() if line.startswith("FRONT ")]


def test_every_dock_choice_is_the_one_in_front(tmp_path):
    runs = [["--dock", name, "--geometry", "1366x768"] for name in DOCKS]
    for name, shown in zip(DOCKS, fronts(tmp_path, runs), strict=True):
        assert NAMES[name] in shown, (name, shown)
        assert "modelViewDock" not in shown or name == "model-view", (name, shown)


@pytest.mark.parametrize("docks", [("kv-cache", "walk", "train"), ("lessons", "metrics", "model-view")])
def test_a_dock_stays_in_front_while_the_model_loads(tmp_path, docks):
    # a model folder loads on the worker: its first frame enters model mode, which brings the model
    # view in front unless the command line asked for another dock
    from tests.ui.test_open_model import _word_level_llama

    folder = _word_level_llama(tmp_path / "m", layers=2)
    runs = [["--model", folder, "--sentence", "the cat sat", "--dock", name] for name in docks]
    for name, shown in zip(docks, fronts(tmp_path, runs), strict=True):
        assert NAMES[name] in shown, (name, shown)
        assert "modelViewDock" not in shown or name == "model-view", (name, shown)


SHOWN = """
import sys
from PySide6 import QtCore
from attn_gui import cli
from attn_gui.engine.model.registry import source
from attn_gui.ui.main_window import MainWindow

init = MainWindow.__init__
def made(self, *args, **kwargs):
    loaded = source(sys.argv[1]).loaded()  # the command line has not loaded it: the window's worker does
    init(self, *args, **kwargs)
    print("MADE loaded", loaded, "|", self.panel.loadNote.text(), flush=True)
MainWindow.__init__ = made
frame = MainWindow.show_frame
def show_frame(self, f):
    frame(self, f)
    print("FRAME", f.result.config.model == sys.argv[1], flush=True)
    QtCore.QTimer.singleShot(0, self.close)
MainWindow.show_frame = show_frame
sys.exit(cli.main(["--model", sys.argv[1], "--sentence", "the cat sat"]))
"""


def test_the_window_opens_before_the_model_loads_and_says_what_comes(tmp_path):
    # attn-gui --model X loaded (converted, ~45 s for SmolLM2) the model before any window showed
    from tests.ui.test_open_model import _word_level_llama

    folder = _word_level_llama(tmp_path / "m", layers=2)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTN_GUI_CONFIG_DIR": str(tmp_path / "config")}
    proc = subprocess.run([sys.executable, "-c", SHOWN, folder], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "MADE loaded False | loading m… then computing the first result", lines
    assert lines[1] == "FRAME True"

"""Start the app in a subprocess (a second QApplication in the pytest process would abort)."""

import os
import subprocess
import sys

CODE = """
import sys
from PySide6 import QtCore, QtWidgets
from attn_gui.ui import app as app_mod
from attn_gui.ui.main_window import MainWindow
orig = MainWindow.show_frame
def show_frame(self, frame):
    orig(self, frame)
    print("first frame", frame.result.weights.shape, flush=True)
    QtCore.QTimer.singleShot(0, self.close)
MainWindow.show_frame = show_frame
sys.exit(app_mod.run_gui(None))
"""


def test_app_starts_draws_and_quits(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "ATTN_GUI_CONFIG_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "first frame torch.Size([1, 5, 5])" in proc.stdout
    assert "Traceback" not in proc.stderr

"""The window imports what a model's first open imports before it shows (``main_window.preload_model_readers``):
imported later by the worker thread, gguf's and safetensors' extension modules held the interpreter lock for
over 100 ms while they initialised, a stall of the window (docs/benchmarks.md, session 13)."""

import os
import subprocess
import sys

CODE = """
import sys
from PySide6 import QtWidgets
app = QtWidgets.QApplication([])
from attn_gui.ui.main_window import MODEL_READERS, MainWindow
before = [name for name in MODEL_READERS if name in sys.modules]
window = MainWindow()
print(before, [name for name in MODEL_READERS if name in sys.modules])
window.close()
"""


def test_the_model_readers_are_imported_before_the_window_shows():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[] ['gguf.quants', 'safetensors.torch']"

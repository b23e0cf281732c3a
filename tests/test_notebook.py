"""docs/python.ipynb runs from top to bottom (its cells in one Python process, as a kernel runs them).

nbclient and ipykernel are not among the project's dependencies, so the cells run in a plain
interpreter: ``%gui qt`` becomes what it does (a QApplication whose events the window's
``wait`` runs), and each cell's code runs in order; any failure, the notebook's own check
against transformers included, fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

NOTEBOOK = Path(__file__).parent.parent / "docs" / "python.ipynb"
GUI_QT = "from PySide6 import QtWidgets\n_app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])\n"


def script(notebook: Path) -> str:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    parts = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        parts.append(GUI_QT if source.strip() == "%gui qt" else source)
    assert not any(line.lstrip().startswith(("%", "!")) for part in parts for line in part.splitlines()), \
        "a magic other than %gui qt: plain Python cannot run it"
    check = "assert page._repr_html_().startswith('<iframe srcdoc=') and page.result is window.result\n"
    return "\n".join(parts) + "\n" + check + "window.close()\nprint('notebook ran')\n"


def test_the_notebook_runs(tmp_path):
    assert all(not cell.get("outputs") for cell in json.loads(NOTEBOOK.read_text())["cells"]), "saved without outputs"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", ATTN_GUI_CONFIG_DIR=str(tmp_path / "config"))
    run = subprocess.run([sys.executable, "-c", script(NOTEBOOK)], capture_output=True, text=True, timeout=300,
                         env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "notebook ran" in run.stdout and "QThread" not in run.stderr

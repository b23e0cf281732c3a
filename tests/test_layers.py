"""The house's boundaries at run time: the Qt-free layers work with PySide6 and pyqtgraph unimportable."""

import json
import subprocess
import sys

BLOCK_QT = "import sys\nfor name in ('PySide6', 'pyqtgraph', 'shiboken6'):\n    sys.modules[name] = None\n"


def run_without_qt(code: str, tmp_path):
    return subprocess.run([sys.executable, "-c", BLOCK_QT + code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def test_engine_and_present_import_without_qt(tmp_path):
    code = ("import importlib, pkgutil, attn_gui.engine, attn_gui.present, attn_gui.export.arrays\n"
            "for m in pkgutil.walk_packages(attn_gui.present.__path__, 'attn_gui.present.'):\n"
            "    importlib.import_module(m.name)\n"
            "from attn_gui.engine import AttentionConfig, compute\n"
            "from attn_gui.present.frame import make_frame\n"
            "from attn_gui.present.maps import map_data\n"
            "print(map_data(make_frame(0, compute(AttentionConfig())), 'weights', 0).title)\n")
    proc = run_without_qt(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "softmax" in proc.stdout


def test_arrays_only_export_runs_without_qt(tmp_path):
    code = ("from attn_gui.cli import main\n"
            "sys.exit(main(['export', '--format', 'npy,csv', '--heads', '2', '--out', 'figs']))\n")
    proc = run_without_qt(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "figs" / "manifest.json").read_text())
    assert "weights.npy" in manifest["files"] and {"weights_head1.csv", "weights_head2.csv"} <= set(manifest["files"])
    assert "Qt" not in manifest["versions"]  # Qt was never loaded
    assert not any(name.endswith((".png", ".svg")) for name in manifest["files"])


def test_images_without_qt_fail_in_one_line(tmp_path):
    code = "from attn_gui.cli import main\nsys.exit(main(['export', '--format', 'png', '--out', 'figs']))\n"
    proc = run_without_qt(code, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "PySide6" in proc.stderr and "npy,csv" in proc.stderr
    assert not (tmp_path / "figs").exists()

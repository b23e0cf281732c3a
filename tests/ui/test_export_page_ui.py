"""File → Export page…: the page of what the window shows (its head and followed token)."""

import json
import re


def test_export_page_writes_the_windows_state(window, tmp_path):
    window.edit_config({"heads": 2})
    window.wait()
    window.set_state(window.state.replace(head=1, token=3))
    assert window.menus.export_page.text() == "Export page…"
    path = window.files.export_page(str(tmp_path / "shared.html"))
    page = path.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="attn-data">(.*?)</script>', page, re.S)[1])
    weights = {m["field"]: m["cells"] for m in data["maps"]}["weights"]
    alpha = window.result.weights[1]  # head 2, as the window shows it
    assert weights["head"] == 1 and weights["values"][3][0] == f"{float(alpha[3, 0]):.6g}"
    assert data["token"] == 3 and "Exported the page" in window.statusBar().currentMessage()


def test_export_page_refuses_a_wrong_name_in_a_dialog(window, tmp_path, monkeypatch):
    from PySide6 import QtWidgets

    said = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: said.append(a[2]))
    assert window.files.export_page(str(tmp_path / "shared.png")) is None
    assert "name it .html" in said[0] and not list(tmp_path.iterdir())

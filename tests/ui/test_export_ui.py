"""Export all from the window: whole folders, and a Cancel button that changes nothing."""

import json
import os

from PySide6 import QtWidgets

from attn_gui.ui import file_actions


def test_export_all_writes_a_whole_folder(window, tmp_path):
    written = window.files.export_all(str(tmp_path / "out"))
    info = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert sorted(os.listdir(tmp_path / "out")) == sorted(info["files"] + ["manifest.json"])
    assert len(written) == len(info["files"]) + 1


def test_cancel_stops_the_export_and_changes_nothing(window, tmp_path, monkeypatch):
    out = tmp_path / "out"
    window.files.export_all(str(out))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = file_actions.export_all

    def press_cancel_after_two_files(frame, folder, progress, cancel, **kw):
        def report(done, total):
            progress(done, total)
            if done == 2:
                window.findChildren(QtWidgets.QProgressDialog, "exportProgress")[-1].cancel()  # the Cancel button
        return real(frame, folder, progress=report, cancel=cancel, **kw)

    monkeypatch.setattr(file_actions, "export_all", press_cancel_after_two_files)
    window.edit_config({"heads": 2})
    assert window.files.export_all(str(out)) is None
    assert window.statusBar().currentMessage() == f"Export cancelled; nothing changed in {out}"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


def test_a_folder_with_other_files_is_refused_in_the_status_bar(window, tmp_path):
    (tmp_path / "notes.txt").write_text("keep me")
    assert window.files.export_all(str(tmp_path)) is None
    assert "holds files that are not an export's" in window.statusBar().currentMessage()
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_large_export_asks_first_and_writes_nothing_on_no(window, tmp_path, monkeypatch):
    from attn_gui.export import bundle

    monkeypatch.setattr(bundle, "CONFIRM_BYTES", 1000)
    answers, asked = [QtWidgets.QMessageBox.StandardButton.No, QtWidgets.QMessageBox.StandardButton.Yes], []
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or answers.pop(0))
    out = tmp_path / "out"
    assert window.files.export_all(str(out)) is None and not out.exists()
    assert "nothing was written" in window.statusBar().currentMessage() and "Write it?" in asked[0]
    assert window.files.export_all(str(out)) and (out / "manifest.json").exists() and len(asked) == 2

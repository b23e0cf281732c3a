"""File → Open model… lists the models on disk (fake Hugging Face cache, Ollama and LM Studio layouts made
here): each with its size and family, the unsupported ones greyed with their reason; choosing one opens it
as transformers computes it."""

import os
import shutil

import pytest
import torch
from PySide6 import QtCore, QtWidgets

pytest.importorskip("gguf")  # installed with attn-gui[models], which the test extra includes

from disk_models import blobs_size, empty_home, hf_snapshot, ollama_manifest  # noqa: E402


@pytest.fixture
def disk(tmp_path, monkeypatch, qwen2_gguf):
    """LM Studio holding the tiny Qwen2 GGUF, a broken Ollama manifest and a T5 folder in the HF cache."""
    home = empty_home(tmp_path, monkeypatch)
    studio = home / ".lmstudio" / "models" / "someone" / "qwen2-tiny-GGUF"
    studio.mkdir(parents=True)
    shutil.copy(qwen2_gguf[0], studio / "qwen2-tiny.gguf")
    ollama_manifest(home / ".ollama" / "models", "broken", "latest", "not json")
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text('{"model_type": "t5"}')
    (tmp_path / "t5" / "tokenizer.json").write_text("{}")
    t5 = hf_snapshot(home / ".cache" / "huggingface" / "hub", "google/t5-tiny", tmp_path / "t5")
    return str(studio / "qwen2-tiny.gguf"), blobs_size(t5)


def _listed(window, qtbot):
    window.menus.open_model.trigger()
    dialog = window.files.modelsDialog
    qtbot.waitUntil(lambda: dialog.discovery is not None, timeout=20000)
    return dialog


def test_open_model_lists_the_models_on_disk_and_opens_one(window, qtbot, disk, qwen2_gguf):
    path, hf = qwen2_gguf
    disk, t5_bytes = disk
    window.edit_config({"sentence": "the cat sat on a mat"})
    dialog = _listed(window, qtbot)
    assert dialog.isVisible()
    rows = [[item.text(c) for c in range(4)] for item in dialog.items()]
    assert [row[:3] for row in rows] == [["google/t5-tiny", f"{t5_bytes} B", "t5"],
                                         ["broken:latest", "?", "?"],
                                         ["someone/qwen2-tiny-GGUF/qwen2-tiny.gguf",
                                          f"{os.stat(path).st_size / 1024:.1f} KiB", "Qwen2"]]
    t5, broken, qwen2 = dialog.items()
    assert rows[0][3].startswith("google/t5-tiny is a 't5' model; supported model_types")
    assert rows[1][3].startswith("its manifest is not JSON")
    for item in (t5, broken):
        assert not item.flags() & QtCore.Qt.ItemFlag.ItemIsEnabled  # greyed
        assert item.toolTip(0) == f"Cannot be opened here: {item.text(3)}"
    assert qwen2.flags() & QtCore.Qt.ItemFlag.ItemIsEnabled and rows[2][3] == disk
    heads = [dialog.tree.topLevelItem(i).text(0) for i in range(dialog.tree.topLevelItemCount())]
    home = os.environ["HOME"]
    assert heads == [f"Hugging Face cache: {home}/.cache/huggingface/hub", f"Ollama: {home}/.ollama/models",
                     f"LM Studio: {home}/.lmstudio/models",
                     f"LM Studio (older folder): {home}/.cache/lm-studio/models  (no models here)"]

    assert dialog.tree.currentItem() is qwen2 and dialog.openButton.isEnabled()
    dialog.openButton.click()
    assert window.state.config.model == disk and not dialog.isVisible()
    qtbot.waitUntil(lambda: window.frame.result.config.model == disk, timeout=20000)
    r = window.frame.result
    with torch.no_grad():
        out = hf(torch.tensor(r.token_ids.tolist())[None], output_attentions=True)
    assert torch.allclose(r.weights, out.attentions[0][0], atol=1e-5, rtol=0)
    assert window.settings.recent("models")[0] == disk


def test_the_list_offers_a_folder_elsewhere(window, qtbot, disk, monkeypatch):
    asked = []
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", lambda *a: asked.append(a) or "")
    dialog = _listed(window, qtbot)
    dialog.folderButton.click()
    assert asked and not dialog.isVisible() and window.state.config.model is None


def test_a_scan_that_fails_is_said_in_the_dialog(qtbot):
    from attn_gui.ui.models_dialog import ModelsDialog

    def scan():
        raise PermissionError("a folder that cannot be listed")

    dialog = ModelsDialog(scan=scan)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: "could not be listed" in dialog.note.text(), timeout=20000)
    assert dialog.note.text().endswith("PermissionError: a folder that cannot be listed")
    assert dialog.items() == [] and not dialog.openButton.isEnabled()

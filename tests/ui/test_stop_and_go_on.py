"""Esc, then F5, on a long input of a decoder (issue 62, item 7): the stop's red line goes when F5 computes again,
F5 goes on from the layer the streamed run stopped at, and the model view greys the previous text's grid.
Peer: transformers' eager run of the same tiny Llama (its next-token probabilities)."""

import threading

import pytest
import torch

from attn_gui.engine.model.decoder import forward as llama
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.present import runner
from tiny_decoders import SENTENCE, WORDS, tiny_decoder  # tests/

LONG = " ".join(WORDS[3:] * 20)  # 600 tokens: past MODEL_FULL (512), so the run is streamed


@pytest.fixture
def llama3(tmp_path):
    decoder._drop_streamed()
    hf = tiny_decoder("llama", tmp_path, layers=3, max_position_embeddings=1024)
    return str(tmp_path), hf


def test_escape_then_f5_on_a_long_input_goes_on_where_it_stopped(window, qtbot, llama3, monkeypatch):
    from PySide6 import QtCore
    from PySide6.QtTest import QTest

    path, hf = llama3
    shown, failed = [], []
    window.frameShown.connect(lambda frame: shown.append(frame) if frame.result.config.model == path else None)
    window.computeFailed.connect(failed.append)
    assert window.edit_config({"sentence": SENTENCE, "model": path, "layer": 0})
    qtbot.waitUntil(lambda: bool(shown) and not runner.is_partial(shown[-1]), timeout=60000)
    qtbot.waitUntil(lambda: window.modelView.shape != (0, 0), timeout=20000)  # the short text's grid
    assert not window.modelView.stale

    gates = {1: threading.Event()}  # a layer waits here until its event is set
    ran, layer = [], llama.layer_pieces

    def holding(h, w, index, *args, **kwargs):
        ran.append(index)
        if index in gates:
            gates[index].wait(60)
        return layer(h, w, index, *args, **kwargs)

    monkeypatch.setattr(llama, "layer_pieces", holding)
    before = len(shown)
    assert window.edit_config({"sentence": LONG})
    qtbot.waitUntil(lambda: 1 in ran, timeout=60000)  # layer 2 of 3 runs, held
    assert window.cover.covering and window.modelView.stale  # the grid is the short text's
    QTest.keyClick(window.canvas, QtCore.Qt.Key.Key_Escape)
    gates[1].set()
    qtbot.waitUntil(lambda: bool(failed), timeout=60000)
    assert failed[0].startswith("Stopped after 1 of 3 layers")  # layer 2 stopped midway: layer 1 is kept
    assert window.modelView.stale and window.panel.messageLabel.isVisible()  # still the short text's grid

    ran.clear()
    gates = {2: threading.Event()}
    window.recompute()  # F5
    qtbot.waitUntil(lambda: 2 in ran, timeout=60000)
    # while it computes, the stop's line is gone from under the sentence and from the status bar
    assert not window.panel.messageLabel.isVisible()
    assert "Stopped" not in window.statusLabel.text() and "computing" in window.statusLabel.text()
    gates[2].set()
    qtbot.waitUntil(lambda: len(shown) > before and not runner.is_partial(shown[-1]), timeout=60000)
    assert ran == [1, 2]  # went on from the kept run: layers 2 and 3 (before the fix: 1, 2 and 3)
    whole = shown[-1].result
    assert whole.streamed and whole.config.sentence == LONG and not window.modelView.stale
    ids = whole.token_ids.cpu()
    with torch.no_grad():
        probs = torch.softmax(hf(ids[None]).logits[0, -1].double(), -1).topk(len(whole.next_tokens))
    assert [p for _, p in whole.next_tokens] == pytest.approx(probs.values.tolist(), abs=1e-4)

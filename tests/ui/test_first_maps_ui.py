"""A large decoder in the window: its first maps are shown while the rest of its run goes on, then the whole run's
frame (next tokens, every layer's α). Peer: transformers' eager attentions and softmax on the dequantized weights of
a tiny Q4_0 GGUF, counted as large here (``engine.plan.FIRST_MAPS_FROM``)."""

import gguf
import pytest
import torch

from attn_gui.engine.model.registry import source
import attn_gui.engine.model.plan as planning
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.present import runner
from gguf_writing import quantized_llama  # (tests/)
from tiny_decoders import SENTENCE  # (tests/)


@pytest.fixture
def q4(tmp_path, monkeypatch):
    monkeypatch.setattr(planning, "FIRST_MAPS_FROM", 0)
    decoder._run.cache_clear()
    path, hf = quantized_llama(tmp_path / "q4_0.gguf", lambda _: gguf.GGMLQuantizationType.Q4_0)
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    return path, out


def test_the_window_shows_the_first_maps_then_the_whole_run(window, qtbot, q4):
    path, out = q4
    shown = []  # each frame of the model, with the status line, the model view's grid and the next tokens as drawn
    panel = window.panel.decoderPanel
    window.frameShown.connect(lambda frame: shown.append((frame, window.statusLabel.text(), window.modelView.shape,
                                                          panel.bars[0].format(), panel.pairs))
                              if frame.result.config.model == path else None)
    assert window.edit_config({"sentence": SENTENCE, "model": path, "layer": 1})
    qtbot.waitUntil(lambda: len(shown) == 2, timeout=60000)
    (first, status, grid, bar, pairs), (whole, later, _, _, _) = shown
    assert runner.is_partial(first) and first.result.model_run.pending == 1  # layer 1 of 2 has run
    assert torch.allclose(first.result.weights, out.attentions[1][0], atol=1e-5, rtol=0)
    assert "first maps: 1 of 2 layers run" in status and grid == (0, 0)  # no grid until the whole run
    assert pairs == () and bar == "computing the rest of the run…"  # no number before the run has made it
    assert not runner.is_partial(whole) and "first maps" not in later
    for layer in range(2):
        assert torch.allclose(whole.result.layer_weights[layer], out.attentions[layer][0], atol=1e-5, rtol=0)
    probs = torch.softmax(out.logits[0, -1].double(), dim=-1).topk(len(window.panel.decoderPanel.pairs))
    assert [p for _, p in window.panel.decoderPanel.pairs] == pytest.approx(probs.values.tolist(), abs=1e-4)
    assert window.wait() is whole.result  # a script waits for the whole run


def test_escape_stops_the_rest_of_the_run_and_f5_goes_on_from_there(window, qtbot, q4, monkeypatch):
    """Esc on the first maps stops the rest of the run (the worker's one watch, ``engine.progress``); the first maps
    stay, and F5 finishes the kept run, equal to transformers."""
    import threading

    from PySide6 import QtCore
    from PySide6.QtTest import QTest

    from attn_gui.engine.model.decoder import forward as llama

    path, out = q4
    held, layer = threading.Event(), llama.layer_pieces

    def holding(h, w, index, *args, **kwargs):  # the rest's layer waits until Esc is pressed
        if index == 1:
            held.wait(60)
        return layer(h, w, index, *args, **kwargs)

    monkeypatch.setattr(llama, "layer_pieces", holding)
    shown = []
    window.frameShown.connect(lambda frame: shown.append(frame) if frame.result.config.model == path else None)
    failed = []
    window.computeFailed.connect(failed.append)
    assert window.edit_config({"sentence": SENTENCE, "model": path, "layer": 1})
    qtbot.waitUntil(lambda: len(shown) == 1, timeout=60000)
    assert runner.is_partial(shown[0])
    QTest.keyClick(window.canvas, QtCore.Qt.Key.Key_Escape)
    held.set()
    qtbot.waitUntil(lambda: bool(failed), timeout=60000)
    assert "Stopped after" in failed[0] and "this text's first maps" in failed[0]
    assert window.frame is shown[0] and len(shown) == 1  # the first maps stay
    window.recompute()  # F5
    qtbot.waitUntil(lambda: len(shown) >= 2 and not runner.is_partial(shown[-1]), timeout=60000)
    for index in range(2):
        assert torch.allclose(shown[-1].result.layer_weights[index], out.attentions[index][0], atol=1e-5, rtol=0)

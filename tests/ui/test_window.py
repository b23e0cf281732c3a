"""Drive the real window through its controls' objectNames and check the maps' data."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6 import QtCore, QtGui, QtWidgets

from attn_gui.engine import AttentionConfig, compute, preset, tokens_for
from attn_gui.ui import MainWindow
from attn_gui.present.frame import DISPLAY_MAX
from attn_gui.present.runner import is_small


def heatmap(win, name):
    view = win.canvas.item_of(name)
    assert view is not None, f"no map heatmap:{name}"
    return view


def shown(win, name):
    return heatmap(win, name).image.image


def wait_for(qtbot, win, predicate):
    """Wait for a frame whose config meets ``predicate``, drawn whole (the canvas draws in steps)."""
    qtbot.waitUntil(lambda: win.frame is not None and predicate(win.frame.result.config) and not win.canvas.busy,
                    timeout=10000)


def test_opens_on_the_tutorial_default(window):
    cfg = window.frame.result.config
    assert cfg == AttentionConfig()
    expected = compute(AttentionConfig())
    np.testing.assert_allclose(shown(window, "weights:0"), expected.numpy("weights")[0], atol=1e-6)
    np.testing.assert_allclose(shown(window, "x"), expected.numpy("x"), atol=1e-6)
    for name in ("x", "w_q:0", "w_k:0", "w_v:0", "q:0", "k:0", "v:0", "scores:0", "scaled:0", "weights:0",
                 "head_outputs:0", "concat", "w_o", "output"):
        assert heatmap(window, name).isVisible(), name
    assert shown(window, "w_q:0").shape == (5, 3) and shown(window, "output").shape == (5, 5)
    assert "α = softmax(ω / √d_k)" in heatmap(window, "weights:0").data.title
    assert "(5\u00a0×\u00a05)" in heatmap(window, "weights:0").data.title  # never wrapped inside
    assert "T = 5" in window.statusLabel.text() and "cpu" in window.statusLabel.text()


def test_typing_recomputes_live(window, qtbot):
    box = window.panel.sentenceInput
    box.moveCursor(box.textCursor().MoveOperation.End)
    qtbot.keyClicks(box, " today")
    wait_for(qtbot, window, lambda c: c.sentence.endswith("today"))
    assert shown(window, "weights:0").shape == (6, 6)
    assert heatmap(window, "weights:0").data.row_labels[-1] == "today"
    assert "today" in window.panel.tokenChips.text()


def test_chips_number_tokens_by_position_and_name_vocabulary_ids_apart(window):
    # "doubt" is x_3 (positions count from 1, as the walk does); its id in the sorted vocabulary is 1
    chips = window.panel.tokenChips
    assert '&nbsp;doubt<sub style="color:#6a7a99;">3</sub>' in chips.text()
    assert '&nbsp;When<sub style="color:#6a7a99;">1</sub>' in chips.text()
    assert "doubt 1, look 4, intelligent 3" in chips.toolTip()


def test_weights_rows_sum_to_one_and_hover_reads_out(window):
    w = shown(window, "weights:0")
    np.testing.assert_allclose(w.sum(axis=1), np.ones(5), atol=1e-5)
    text = heatmap(window, "weights:0").describe(1, 4)
    assert text.startswith("α[in → intelligent] = ") and text.endswith("head 1")
    assert f"{w[1, 4]:.4f}"[:5] in text


def test_second_head_appears_and_can_be_selected(window, qtbot):
    window.panel.headsSpin.setValue(2)
    wait_for(qtbot, window, lambda c: c.heads == 2)
    expected = compute(AttentionConfig(heads=2))
    overview = window.canvas.strip[:2]
    assert all(v.isVisible() for v in overview)
    np.testing.assert_allclose(overview[1].image.image, expected.numpy("weights")[1], atol=1e-6)
    window.select_head(1)
    np.testing.assert_allclose(shown(window, "weights:1"), expected.numpy("weights")[1], atol=1e-6)
    np.testing.assert_allclose(shown(window, "q:1"), expected.numpy("q")[1], atol=1e-6)
    assert shown(window, "concat").shape == (5, 6)


def test_causal_masks_the_upper_triangle(window, qtbot):
    window.panel.causalCheck.setChecked(True)
    wait_for(qtbot, window, lambda c: c.causal)
    upper = np.triu(np.ones((5, 5), dtype=bool), 1)
    assert np.all(shown(window, "weights:0")[upper] == 0)
    scaled = heatmap(window, "scaled:0")
    assert np.all(np.isneginf(scaled.data.matrix[upper]))
    assert not scaled.mask_hatch.path().isEmpty()  # masked cells are drawn hatched, not as a colour
    assert "masked" in scaled.describe(0, 4)
    alpha = heatmap(window, "weights:0")  # alpha's masked zeros too, so they never read as a real 0
    assert alpha.mask_hatch.path().boundingRect() == scaled.mask_hatch.path().boundingRect()
    assert "masked" in alpha.describe(0, 4)


def test_every_knob_reaches_the_engine(window, qtbot):
    p = window.panel
    p.dModelSpin.setValue(8)
    p.dKSpin.setValue(4)
    p.dVSpin.setValue(2)
    p.seedSpin.setValue(7)
    p.sameStreamCheck.setChecked(False)
    p.weightSeedSpin.setValue(11)
    p.layoutCombo.setCurrentIndex(p.layoutCombo.findData("column"))
    p.initCombo.setCurrentIndex(p.initCombo.findData("scaled_normal"))
    p.inputsCombo.setCurrentIndex(p.inputsCombo.findData("uniform"))
    p.positionalCombo.setCurrentIndex(p.positionalCombo.findData("sinusoidal"))
    p.similarityCombo.setCurrentIndex(p.similarityCombo.findData("cosine"))
    p.temperatureSpin.setValue(0.5)
    p.scaleCheck.setChecked(False)
    p.dtypeCombo.setCurrentIndex(p.dtypeCombo.findData("float64"))
    want = AttentionConfig(d_model=8, d_k=4, d_v=2, seed=7, weight_seed=11, layout="column",
                           init="scaled_normal", inputs="uniform", positional="sinusoidal", similarity="cosine",
                           temperature=0.5, scale=False, dtype="float64")
    wait_for(qtbot, window, lambda c: c == want)
    expected = compute(want)
    np.testing.assert_allclose(shown(window, "weights:0"), expected.numpy("weights")[0], atol=1e-9)
    assert shown(window, "w_q:0").shape == (4, 8)  # column layout: W is d_k x d


def test_projections_off_hides_the_weight_maps(window, qtbot):
    window.panel.projectionsCheck.setChecked(False)
    wait_for(qtbot, window, lambda c: not c.projections)
    assert window.canvas.item_of("w_q:0") is None
    assert window.pipeline.noProjection.isVisible()
    assert not window.panel.dKSpin.isEnabled()


def test_preset_reproduces_the_tutorial(window, qtbot):
    combo = window.panel.presetCombo
    combo.activated.emit(combo.findData("tutorial-uniform"))
    wait_for(qtbot, window, lambda c: c == preset("tutorial-uniform"))
    np.testing.assert_allclose(shown(window, "weights:0")[2], [0.2773, 0.2594, 0.2700, 0.1933], atol=1e-4)
    np.testing.assert_allclose(shown(window, "head_outputs:0")[2], [0.6762, 0.3120], atol=1e-4)


def test_bad_input_says_why_and_keeps_the_last_good_maps(window, qtbot):
    before = shown(window, "weights:0").copy()
    with qtbot.waitSignal(window.inputInvalid, timeout=5000) as blocker:
        window.panel.sentenceInput.setPlainText("?! ...")
    assert "no tokens" in blocker.args[0]
    assert window.panel.messageLabel.isVisible() and "no tokens" in window.panel.messageLabel.text()
    assert "last valid input" in window.statusLabel.text()
    np.testing.assert_array_equal(shown(window, "weights:0"), before)
    window.panel.sentenceInput.setPlainText("back again")
    wait_for(qtbot, window, lambda c: c.sentence == "back again")
    assert not window.panel.messageLabel.isVisible()


@pytest.mark.skipif(torch.cuda.is_available(), reason="simulates a missing CUDA device")
def test_failing_device_says_why_and_falls_back(window, qtbot):
    combo = window.panel.deviceCombo
    combo.addItem("CUDA 0 (gone)", "cuda:0")
    before = shown(window, "weights:0").copy()
    with qtbot.waitSignal(window.computeFailed, timeout=5000) as blocker:
        combo.setCurrentIndex(combo.findData("cuda:0"))
    assert "CUDA is not available" in blocker.args[0] and "back on cpu" in blocker.args[0]
    assert combo.currentData() == "cpu"
    assert "CUDA is not available" in window.panel.messageLabel.text()
    np.testing.assert_array_equal(shown(window, "weights:0"), before)


def test_only_the_newest_request_is_drawn(window, qtbot):
    seen = []
    window.frameShown.connect(lambda f: seen.append(f.result.config.seed))
    big = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(150)), heads=2)
    assert not is_small(big)  # goes to the worker thread
    for seed in range(1, 30):
        window.service.submit(big.replace(seed=seed))
    qtbot.waitUntil(lambda: bool(seen) and seen[-1] == 29, timeout=20000)
    assert len(seen) < 29  # superseded requests were skipped, not queued
    assert seen == sorted(seen)
    np.testing.assert_allclose(shown(window, "x"), compute(big.replace(seed=29)).numpy("x"))


def test_tiny_configs_are_drawn_at_once(window):
    assert is_small(AttentionConfig())
    window.panel.seedSpin.setValue(77)  # computed and drawn before setValue returns
    assert window.frame.result.config.seed == 77


def test_clicking_a_row_follows_that_token(window, qtbot):
    view = heatmap(window, "weights:0")
    scene_pt = view.plot.getViewBox().mapViewToScene(QtCore.QPointF(2, 1))
    window.canvas.ensureVisible(view)
    pos = window.canvas.mapFromScene(scene_pt)
    with qtbot.waitSignal(window.canvas.tokenSelected, timeout=3000) as blocker:
        qtbot.mouseClick(window.canvas.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    assert blocker.args == [1]
    assert heatmap(window, "q:0").highlight.isVisible()
    text = window.focus.toPlainText()
    assert "Following x2 “in”" in text
    alpha = shown(window, "weights:0")[1]
    assert f"{alpha[3]:.4f}" in text
    z = compute(AttentionConfig()).numpy("head_outputs")[0, 1]
    assert f"{z[0]:.2f}" in text


def test_settings_persist_between_runs(window, qtbot, settings):
    window.panel.sentenceInput.setPlainText("remember me please")
    wait_for(qtbot, window, lambda c: c.sentence == "remember me please")
    window.close()
    again = MainWindow(settings=type(settings)())
    qtbot.addWidget(again)
    qtbot.waitUntil(lambda: again.frame is not None, timeout=10000)
    assert again.frame.result.config.sentence == "remember me please"
    again.service.shutdown()


def test_long_input_is_reduced_for_display(window, qtbot):
    words = " ".join(f"w{i}" for i in range(700))
    window.panel.sentenceInput.setPlainText(words)
    wait_for(qtbot, window, lambda c: len(tokens_for(c).tokens) == 700)
    view = heatmap(window, "weights:0")
    assert view.image.image.shape == (DISPLAY_MAX, DISPLAY_MAX)
    assert view.data.row_blocks is not None
    assert window.frame.result.streamed  # only the shown maps were computed; compare with a full compute
    full = compute(window.frame.result.config).weights[0]
    # each shown cell is the maximum of the block it stands for
    r0, r1 = view.data.row_blocks[3]
    c0, c1 = view.data.col_blocks[5]
    assert view.image.image[3, 5] == pytest.approx(float(full[r0:r1, c0:c1].max()))
    assert f"shown {DISPLAY_MAX} × {DISPLAY_MAX}" in view.data.title.replace("\u00a0", " ")
    # the status bar says what is held: the pooled α, not a T x T one
    held = window.frame.result.shown["weights"].shape
    assert held == (1, DISPLAY_MAX, DISPLAY_MAX) and full.shape == (700, 700)
    assert f"alpha 1×{DISPLAY_MAX}×{DISPLAY_MAX} pooled from 700×700" in window.statusLabel.text()


def test_right_click_exports_and_copies(window, qtbot, tmp_path, monkeypatch):
    data = heatmap(window, "weights:0").data
    target = tmp_path / "alpha.png"
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    monkeypatch.setattr(QtWidgets.QInputDialog, "getInt", lambda *a, **k: (1000, True))
    menus = []
    make = window.map_menu

    class Shown:  # the menu the window would show, kept instead of run
        def __init__(self, data):
            menus.append(make(data))

        def exec(self, pos):
            pass

    monkeypatch.setattr(window, "map_menu", Shown)
    rect = window.canvas.rect_of("weights:0")
    window.canvas.customContextMenuRequested.emit(rect.center())
    actions = {a.text(): a for a in menus[-1].actions()}
    assert {"Export image…", "Copy image"} <= set(actions)
    actions["Export image…"].trigger()
    image = QtGui.QImage(str(target))
    assert image.width() == 1000
    actions["Copy image"].trigger()
    assert QtGui.QGuiApplication.clipboard().image().width() > 100
    assert menus[-1].parent() is window.canvas and data.field == "weights"


def test_export_all_from_the_window(window, tmp_path):
    written = window.files.export_all(str(tmp_path / "all"))
    names = {Path(p).name for p in written}
    assert {"weights_head1.png", "weights_head1.svg", "weights.npy", "figure.png", "manifest.json"} <= names


def test_example_sentences_are_shipped_and_offered(window, qtbot):
    from attn_gui.present.resources import example_sentences

    sentences = example_sentences()
    assert sentences[0] == "When in doubt look intelligent" and len(sentences) >= 5
    menu = window.findChild(QtWidgets.QMenu, "examplesMenu")
    action = next(a for a in menu.actions() if "trophy" in a.text())
    action.trigger()
    wait_for(qtbot, window, lambda c: "trophy" in c.sentence)


def test_a_late_frame_does_not_hide_a_newer_problem(window, qtbot):
    big = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(300)), heads=8)
    window.set_state(window.state.replace(config=big))  # goes to the worker
    window.panel.sentenceInput.setPlainText("")  # invalid before the frame arrives
    qtbot.waitUntil(lambda: window.frame.result.seq_len == 300, timeout=30000)
    assert window.panel.messageLabel.isVisible() and "no tokens" in window.panel.messageLabel.text()


def test_a_million_character_paste_is_refused_before_it_lands(window, qtbot):
    box = window.panel.sentenceInput
    QtGui.QGuiApplication.clipboard().setText("word " * 200_000)
    box.selectAll()
    box.paste()
    assert box.toPlainText() == AttentionConfig().sentence  # nothing landed
    assert "not pasted" in window.panel.messageLabel.text() and "50,000" in window.panel.messageLabel.text()
    assert window.state.config == AttentionConfig()
    QtGui.QGuiApplication.clipboard().setText("a fine short paste")
    box.selectAll()
    box.paste()
    qtbot.waitUntil(lambda: window.state.config.sentence == "a fine short paste")


def test_a_first_start_focuses_alpha_and_esc_shows_every_map(qtbot, settings):
    win = MainWindow(settings=settings)  # no saved state
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.frame is not None, timeout=10000)
    assert win.state.focus == "weights"
    canvas = win.canvas
    alpha = canvas.item_of("weights:0")
    assert alpha is not None and not alpha.compact
    np.testing.assert_allclose(alpha.image.image, compute(AttentionConfig()).numpy("weights")[0], atol=1e-6)
    boxes = canvas.plan.boxes
    assert all(boxes[mid].right <= boxes["weights:0"].x for mid in ("scores:0", "scaled:0"))  # its neighbours
    assert all(boxes[mid].x >= boxes["weights:0"].right for mid in ("head_outputs:0", "concat"))  # in the flow
    assert canvas.item_of("x").compact  # the rest: thumbnails
    with qtbot.waitSignal(win.stateChanged):
        canvas.focusRequested.emit("head_outputs")  # a thumbnail or neighbour clicked
    assert win.state.focus == "head_outputs"
    escape = next(s for s in win.findChildren(QtGui.QShortcut) if s.key().toString() == "Esc")
    escape.activated.emit()  # offscreen windows are never active, so the key itself cannot be sent
    assert win.state.focus is None
    win.focus_on("weights")
    qtbot.mouseClick(win.pipeline.backButton, QtCore.Qt.MouseButton.LeftButton)
    assert win.state.focus is None and not canvas.item_of("x").compact
    win.service.shutdown()


def test_small_maps_beside_the_focused_one_keep_their_room_for_the_matrix(window, qtbot):
    """Found by looking at 1366 x 768: with 4 heads the side maps' titles took four lines."""
    window.set_state(window.state.replace(config=AttentionConfig(heads=4, kv_heads=2, d_model=16, d_k=4, d_v=4),
                                          focus="k"))
    qtbot.waitUntil(lambda: window.frame is not None and window.frame.result.config.heads == 4)
    k = window.canvas.item_of("k:0")
    assert "K/V\u00a0head\u00a01/2" in k.plot.titleLabel.text
    for mid in ("q:0", "v:0"):
        item = window.canvas.item_of(mid)
        title = item.plot.titleLabel.text
        assert "head" not in title and title.endswith(")"), title  # formula and shape only
        assert item.data.title != title and item.data.brief_title == title

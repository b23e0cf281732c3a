"""The second sentence box, what it refuses, the shift of positions, and the variant presets, through
the real window."""

import numpy as np
import torch

from attn_gui.engine import AttentionConfig, PRESETS, compute, preset


def heatmap(win, name):
    view = win.canvas.item_of(name)
    assert view is not None, f"no map heatmap:{name}"
    return view


def wait_for(qtbot, win, predicate):
    qtbot.waitUntil(lambda: win.frame is not None and predicate(win.frame.result.config), timeout=10000)


def test_a_second_sentence_makes_cross_attention_and_an_empty_one_self_attention(window, qtbot):
    box = window.panel.sourceSentenceInput
    qtbot.keyClicks(box, "le chat dort")
    wait_for(qtbot, window, lambda c: c.source_sentence == "le chat dort")
    alpha = heatmap(window, "weights:0").data
    assert alpha.matrix.shape == (5, 3)
    assert alpha.row_labels == ["When", "in", "doubt", "look", "intelligent"]
    assert alpha.col_labels == ["le", "chat", "dort"]
    expected = compute(AttentionConfig(source_sentence="le chat dort")).numpy("weights")[0]
    np.testing.assert_allclose(alpha.matrix, expected, atol=1e-6)
    assert heatmap(window, "x_source").isVisible() and heatmap(window, "k:0").data.row_labels == ["le", "chat", "dort"]
    assert "T_k = 3" in window.panel.sourceChips.text() and "alpha 1×5×3" in window.statusLabel.text()
    box.clear()  # empty: self-attention again
    wait_for(qtbot, window, lambda c: c.source_sentence is None)
    assert heatmap(window, "weights:0").data.matrix.shape == (5, 5) and window.canvas.item_of("x_source") is None
    assert not window.panel.sourceChips.isVisible()


def test_what_needs_one_sentence_is_refused_and_the_last_result_kept(window, qtbot):
    window.edit_config({"source_sentence": "le chat dort"})
    wait_for(qtbot, window, lambda c: c.cross)
    good = window.frame
    for changes, words in (({"causal": True}, "causal mask"), ({"window": 2}, "sliding window"),
                           ({"positional": "rope", "d_k": 4}, "RoPE"), ({"positional": "alibi"}, "ALiBi")):
        with qtbot.waitSignal(window.inputInvalid) as blocker:
            assert not window.edit_config(changes)
        assert words in blocker.args[0] and "second sentence" in blocker.args[0]
        assert window.panel.messageLabel.isVisible() and words in window.panel.messageLabel.text()
        assert window.frame is good and window.state.config == good.result.config
    with qtbot.waitSignal(window.inputInvalid) as blocker:
        window.edit_config({"source_sentence": "... !"})
    assert "the second sentence has no tokens" in blocker.args[0] and window.frame is good


def test_shifting_the_sentence_keeps_ropes_scores_and_moves_sinusoidal_ones(window, qtbot):
    docks = window.docks
    docks.docks["difference"].raise_()  # the button is clicked where it is seen; a dock behind a tab computes nothing
    for positional, changes in (("rope", dict(positional="rope", d_k=4)), ("sinusoidal",
                                                                           dict(positional="sinusoidal"))):
        window.set_state(window.state.replace(config=AttentionConfig(dtype="float64", **changes)))
        wait_for(qtbot, window, lambda c, p=positional: c.positional == p and c.position_offset == 0)
        docks.panels["difference"].shiftButton.click()
        wait_for(qtbot, window, lambda c, p=positional: c.positional == p and c.position_offset == 1)
        qtbot.waitUntil(lambda: docks.panels["difference"].map.data is not None
                        and docks.panels["difference"].map.data.field == "scores_minus_pinned", timeout=10000)
        qtbot.waitUntil(lambda: "moved from position 0 to 1" in docks.panels["difference"].message.text(),
                        timeout=10000)
        delta = np.abs(docks.panels["difference"].map.data.matrix).max()
        if positional == "rope":
            assert delta < 1e-12 and "i − j only" in docks.panels["difference"].message.text()
        else:
            assert delta > 1e-3 and "added to X" in docks.panels["difference"].message.text()


def test_every_variant_preset_is_in_the_menu_and_shows_its_variant(window, qtbot):
    menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Presets")
    names = [a.text() for a in menu.actions() if not a.menu()]
    assert names == list(PRESETS)
    for name in ("rope", "alibi", "grouped-query", "sliding-window", "attention-sinks", "annotated-transformer",
                 "cross-attention"):
        assert window.panel.presetCombo.findData(name) > 0
        window.apply_preset(name)
        wait_for(qtbot, window, lambda c, n=name: c == preset(n))
    cross = window.frame.result
    assert cross.source_tokens == ("le", "chat", "était", "assis", "sur", "le", "tapis")


def test_the_rope_preset_scores_a_repeated_phrase_by_distance():
    r = compute(preset("rope").replace(dtype="float64"))
    assert r.tokens == ("the", "cat", "saw") * 2 + ("the", "cat")
    # "the" -> "cat" one position on, three times: the same q and k before rotation, the same distance
    scores = [float(r.scores[0, i, i + 1]) for i in (0, 3, 6)]
    np.testing.assert_allclose(scores, scores[0], rtol=1e-12)
    assert not torch.allclose(r.scores[0, 0, 1], r.scores[0, 0, 4])  # further away: another score

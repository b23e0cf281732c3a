"""The insight docks in the window: saturation and its fix, difference maps, head metrics, rollout."""

import numpy as np
import pytest
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import is_available
from attn_gui.present.state import ViewState


def show(window, qtbot, config):
    window.set_state(ViewState(config))
    qtbot.waitUntil(lambda: window.frame.result.config == config, timeout=20000)


def test_saturation_is_said_in_plain_words_and_fixed_in_one_click(window, qtbot):
    show(window, qtbot, AttentionConfig(d_model=64, inputs="uniform", init="uniform"))
    insight = window.docks
    assert insight.fixButton.isVisible()
    assert "one-hot" in window.statusLabel.text() and "span ±" in window.statusLabel.text()
    alpha = window.canvas.item_of("weights:0")
    assert "one-hot" in alpha.data.title
    # the fix is a config edit: scaled-normal weights keep the softmax soft
    with qtbot.waitSignal(window.frameShown, timeout=10000):
        insight.fixButton.click()
    assert window.state.config.init == "scaled_normal"
    assert not insight.fixButton.isVisible() and "one-hot" not in alpha.data.title
    # the why-scaling panel: the selected query's softmax both ways, the sweep with the current d_k
    insight.docks["why-scaling"].raise_()
    qtbot.waitUntil(lambda: insight.panels["why-scaling"].sweep is not None, timeout=10000)
    assert 3 in insight.panels["why-scaling"].sweep.d_ks
    scores = compute(window.state.config).scores[0, 1]
    bars = insight.panels["why-scaling"].plot.unscaled_bars.opts["height"]
    np.testing.assert_allclose(bars, torch.softmax(scores, -1).numpy(), atol=1e-6)


def test_difference_map_is_now_minus_pinned(window, qtbot):
    base = AttentionConfig(heads=2)
    show(window, qtbot, base)
    window.docks.docks["difference"].raise_()
    panel = window.docks.panels["difference"]
    panel.pinButton.click()
    window.edit_config({"temperature": 2.0})
    qtbot.waitUntil(lambda: window.frame.result.config.temperature == 2.0, timeout=10000)
    window.select_head(1)
    qtbot.waitUntil(lambda: panel.map.data is not None and "head 2/2" in panel.map.data.title, timeout=5000)
    expected = compute(base.replace(temperature=2.0)).weights[1] - compute(base).weights[1]
    np.testing.assert_allclose(panel.map.image.image, expected.numpy(), atol=1e-6)
    assert "temperature 1" in panel.map.data.title and panel.map.data.kind == "signed"
    panel.modeCombo.setCurrentIndex(1)  # head minus head
    panel.headA.setValue(2)
    panel.headB.setValue(1)
    w = compute(base.replace(temperature=2.0)).weights
    np.testing.assert_allclose(panel.map.image.image, (w[1] - w[0]).numpy(), atol=1e-6)


@pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")
def test_metrics_grid_opens_a_head_and_rollout_follows_its_slider(window, qtbot):
    config = AttentionConfig(sentence="the cat sat on the mat", model="minilm-l6", layer=1)
    show(window, qtbot, config)
    insight = window.docks
    grid = insight.panels["metrics"].grid
    insight.docks["metrics"].raise_()  # a dock behind another tab computes nothing until it is shown
    qtbot.waitUntil(lambda: grid.data is not None and grid.data.matrix.shape == (6, 12), timeout=5000)
    lw = compute(config).layer_weights
    T = lw.shape[-1]
    by_hand = torch.stack([lw[:, :, i, i - 1] for i in range(1, T)], -1).mean(-1)
    np.testing.assert_allclose(grid.image.image, by_hand.numpy(), atol=1e-6)  # coloured by previous token
    assert insight.panels["metrics"].table.rowCount() == 72
    with qtbot.waitSignal(window.frameShown, timeout=20000):
        grid.headPicked.emit(0, 2)
    assert (window.state.config.layer, window.state.head) == (0, 2)
    insight.docks["rollout"].raise_()
    panel = insight.panels["rollout"]
    qtbot.waitUntil(lambda: panel.map.data is not None, timeout=5000)
    panel.layerSlider.setValue(0)
    fused = 0.5 * lw[0].mean(0) + 0.5 * torch.eye(T)
    np.testing.assert_allclose(panel.map.image.image, (fused / fused.sum(-1, keepdim=True)).numpy(), atol=1e-6)
    assert "rollout after layer 1" in panel.map.data.title and panel.layerLabel.text() == "1"  # from 1


def test_why_scaling_sweeps_only_even_sizes_with_rope(window, qtbot):
    """RoPE rotates pairs of dimensions: the sweep must not ask for d_k = 1 (found by looking)."""
    from attn_gui.engine.analysis.scaling import sweep_d_ks

    assert sweep_d_ks(6, top=16, even=True) == (2, 4, 6, 8, 16)
    window.edit_config({"positional": "rope", "d_k": 4, "d_v": 4})
    qtbot.waitUntil(lambda: window.frame.result.config.positional == "rope")
    window.docks.docks["why-scaling"].show()
    window.docks.docks["why-scaling"].raise_()
    qtbot.waitUntil(lambda: window.docks.panels["why-scaling"].sweep is not None, timeout=10000)
    assert 1 not in window.docks.panels["why-scaling"].sweep.d_ks


def test_docks_behind_another_tab_compute_nothing(window, qtbot):
    """Qt keeps tabbed docks visible and moves them out of the window: only the front tab computes."""
    insight = window.docks
    window.focusDock.raise_()
    qtbot.waitUntil(lambda: not window.focusDock.visibleRegion().isEmpty())
    calls = []
    insight.panels["why-scaling"].show_frame = lambda *a: calls.append(a)
    window.edit_config({"seed": 7})
    qtbot.waitUntil(lambda: window.frame.result.config.seed == 7)
    qtbot.waitUntil(lambda: window.focus.toPlainText().startswith("Following"))
    assert calls == [] and insight.docks["why-scaling"].isVisible()  # tabbed out of sight, not hidden
    with qtbot.waitSignal(insight.docks["why-scaling"].visibilityChanged):
        insight.docks["why-scaling"].raise_()
    qtbot.waitUntil(lambda: len(calls) == 1)  # shown: it computes the frame now in the window
    assert calls[0][0] is window.frame


def test_the_insight_docks_need_no_window(qtbot):
    """The docks take frames and states through their methods and ask through signals: no window is needed.
    The fix asked is the saturation note's own (``present.saturation``)."""
    from attn_gui.present.frame import make_frame
    from attn_gui.ui.docks import FACTORIES
    from attn_gui.ui.docks.scaling import SaturationFix

    fix_button, difference = SaturationFix(), FACTORIES["difference"](None)
    config = AttentionConfig(d_model=64, inputs="uniform", init="uniform")
    frame = make_frame(1, compute(config))
    assert frame.saturation is not None
    fix_button.show_frame(frame)
    assert not fix_button.isHidden() and fix_button.text() == frame.saturation.fix_label
    with qtbot.waitSignal(fix_button.editRequested) as fix:
        fix_button.click()
    assert fix.args == [dict(frame.saturation.fix)]
    with qtbot.waitSignal(difference.editRequested) as shift:
        difference.shiftButton.click()
    assert shift.args == [{"position_offset": config.position_offset + 1}]

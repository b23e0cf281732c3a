"""The heads strip and the model view: square cells, numbered axes, a colour bar, masks, K/V groups."""

import numpy as np
import pytest
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import is_available
from attn_gui.present.heads import kv_groups
from attn_gui.render.model_view import ModelView


@pytest.mark.parametrize("heads, kv", [(4, 2), (6, 3), (6, 1), (3, 3)])
def test_kv_groups_are_the_heads_that_read_one_key_value_head(heads, kv):
    result = compute(AttentionConfig(heads=heads, kv_heads=kv, d_model=6, d_k=2))
    groups = kv_groups(result)
    # the peer: transformers' repeat_kv repeats each K/V head heads // kv times, in order
    owner = torch.arange(kv).repeat_interleave(heads // kv)
    assert groups == [torch.nonzero(owner == g).flatten().tolist() for g in range(kv)]
    q, k = result.numpy("q"), result.numpy("k")
    for g, members in enumerate(groups):
        for h in members:  # alpha of head h is softmax(Q_h K_g^T / sqrt(d_k)): head h reads K/V head g
            alpha = torch.softmax(torch.tensor(q[h] @ k[g].T) / np.sqrt(2), dim=-1).numpy()
            np.testing.assert_allclose(result.numpy("weights")[h], alpha, atol=1e-5)


def test_the_strip_brackets_heads_sharing_a_key_value_head(window, qtbot, drawn):
    window.edit_config({"heads": 4, "kv_heads": 2})
    qtbot.waitUntil(lambda: window.frame.result.config.kv_heads == 2 and window.frame.result.heads == 4)
    drawn(window)
    canvas = window.canvas
    assert canvas.brackets == [("K/V 1: heads 1–2", [0, 1]), ("K/V 2: heads 3–4", [2, 3])]
    assert [members for _, members in canvas.brackets] == kv_groups(window.frame.result)
    for g, members in enumerate(kv_groups(window.frame.result)):  # each bracket spans its heads' thumbnails
        bracket = canvas.plan.boxes[f"group:{g}"]
        for h in members:
            thumb = canvas.plan.boxes[f"strip:{h}"]
            assert bracket.x <= thumb.x and thumb.right <= bracket.right
    window.edit_config({"kv_heads": 4})  # no grouping: no brackets
    qtbot.waitUntil(lambda: window.frame.result.config.kv_heads == 4)
    drawn(window)
    assert canvas.brackets == []


def test_strip_cells_are_square_masked_cells_hatched_and_the_bar_is_alphas(window, qtbot, drawn):
    window.panel.headsSpin.setValue(3)
    window.panel.causalCheck.setChecked(True)
    qtbot.waitUntil(lambda: window.frame.result.heads == 3 and window.frame.result.config.causal)
    drawn(window)
    thumb = window.canvas.strip[2]
    px, py = thumb.plot.getViewBox().viewPixelSize()
    assert px == pytest.approx(py, rel=0.02)
    assert thumb.mask_hatch.isVisible()
    # the hatched cells are exactly the upper triangle a causal mask removes (torch's triu)
    masked = torch.ones(5, 5, dtype=torch.bool).triu(1).numpy()
    np.testing.assert_array_equal(thumb.data.masked, masked)
    bar = window.canvas.stripBar
    full = window.canvas.item_of("weights:0").colorbar
    assert tuple(bar.levels()) == tuple(full.levels()) == (0.0, 1.0)
    assert np.array_equal(bar.colorMap().getLookupTable(nPts=16), full.colorMap().getLookupTable(nPts=16))


def test_the_model_view_numbers_layers_and_heads_from_1_and_hatches_masks(qtbot):
    view = ModelView()
    qtbot.addWidget(view)
    view.resize(700, 300)
    view.show()
    t, L, H = 4, 3, 5
    causal = torch.ones(t, t, dtype=torch.bool).triu(1)
    weights = torch.softmax(torch.randn(L, H, t, t).masked_fill(causal, float("-inf")), dim=-1).numpy()
    view.set_weights(weights, layer=1, head=2, masked=causal.numpy(), other_layers=causal.numpy())  # a decoder
    left, top = view.plot.getAxis("left"), view.plot.getAxis("top")
    assert [label for _, label in left._tickLevels[0]] == ["1", "2", "3"]
    assert [label for _, label in top._tickLevels[0]] == ["1", "2", "3", "4", "5"]
    assert left.labelText == "layer" and top.labelText == "head"
    assert tuple(view.colorbar.levels()) == (0.0, 1.0)
    assert view.mask_hatch.isVisible()
    hatched = view.mask_hatch.path().boundingRect()  # the first thumbnail's top right to the last one's
    cell = t + 2
    assert (hatched.left(), hatched.top()) == (1, 0)
    assert (hatched.right(), hatched.bottom()) == ((H - 1) * cell + t, (L - 1) * cell + t - 1)
    px, py = view.plot.getViewBox().viewPixelSize()
    assert px == pytest.approx(py, rel=0.02)
    # an encoder with the causal option: only the shown layer was computed with the mask (found in review)
    view.set_weights(weights, layer=1, head=2, masked=causal.numpy())
    hatched = view.mask_hatch.path().boundingRect()
    assert (hatched.top(), hatched.bottom()) == (cell, cell + t - 1)


@pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")
def test_leaving_model_mode_brings_the_walk_back(window, qtbot):
    window.panel.sourceCombo.setCurrentIndex(window.panel.sourceCombo.findData("minilm-l6"))
    qtbot.waitUntil(lambda: window.frame.result.config.model == "minilm-l6", timeout=20000)
    assert window.modelDock.isVisible()
    window.panel.sourceCombo.setCurrentIndex(0)
    qtbot.waitUntil(lambda: window.frame.result.config.model is None, timeout=20000)
    assert not window.modelDock.isVisible() and window.focusDock.isVisible()
    assert not window.focusDock.visibleRegion().isEmpty()  # in front, not behind another tab
    assert window.focusDock.height() < window.height() * 0.4

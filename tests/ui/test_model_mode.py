"""Model mode in the window: real heads, read-only sizes, the model view, hiding special tokens."""

import numpy as np
import pytest

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import is_available
from attn_gui.present.state import carry_layer

pytestmark = pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")
SENTENCE = "The animal didn't cross the street because it was too tired"


def choose_model(window, qtbot, layer):
    """Choose MiniLM-L6 and the config's ``layer`` (0-based), which the spin box shows counted from 1."""
    p = window.panel
    p.sentenceInput.setPlainText(SENTENCE)
    p.sourceCombo.setCurrentIndex(p.sourceCombo.findData("minilm-l6"))
    p.layerSpin.setValue(layer + 1)
    qtbot.waitUntil(lambda: window.frame.result.config.model == "minilm-l6"
                    and window.frame.result.config.layer == layer
                    and not window.canvas.busy, timeout=20000)  # the maps and the model view drawn


def test_choosing_minilm_layer_4_shows_real_heads(window, qtbot):
    choose_model(window, qtbot, 3)
    p = window.panel
    assert (p.layerSpin.minimum(), p.layerSpin.value(), p.layerSpin.maximum()) == (1, 4, 6)
    assert (p.dModelSpin.value(), p.headsSpin.value(), p.dKSpin.value()) == (384, 12, 32)
    assert not p.dModelSpin.isEnabled() and not p.headsSpin.isEnabled()
    expected = compute(AttentionConfig(sentence=SENTENCE, model="minilm-l6", layer=3))
    assert window.frame.result.tokens[0] == "[CLS]"
    assert window.modelDock.isVisible()
    np.testing.assert_allclose(window.modelView.image.image.shape[:2], (6 * 17 - 2, 12 * 17 - 2))
    ticks = window.modelView.plot.getAxis("left")._tickLevels[0]
    assert [label for _, label in ticks] == [str(n) for n in range(1, 7)]  # counted from 1
    assert window.modelView.plot.getAxis("left").labelText == "layer"
    # click head 2 of layer 4 (0-based 3, 1) in the model view: the full maps show it
    with qtbot.waitSignal(window.stateChanged, timeout=5000):
        window.modelView.headPicked.emit(3, 1)
    view = window.canvas.item_of("weights:1")
    np.testing.assert_allclose(view.image.image, expected.numpy("weights")[1], atol=1e-6)
    title = view.data.title.replace("\xa0", " ")
    assert title.startswith("layer 4: ") and "head 2/12" in title
    it = expected.tokens.index("it")
    assert expected.tokens[int(view.image.image[it].argmax())] == "animal"
    assert "before the residual and LayerNorm" in window.statusLabel.text()
    assert p.hideSpecialCheck.text() == "hide [CLS] and [SEP] in the maps"
    assert not p.decoderPanel.isVisible()  # an encoder predicts no next token
    # 6 layers down, each head's sink mass beside (issue 62: whenever the summaries exist, not only layers across)
    assert not window.modelView.across and window.modelView.sinkPlot.isVisible()


def test_hiding_special_tokens_and_going_back(window, qtbot):
    choose_model(window, qtbot, 0)
    window.panel.hideSpecialCheck.setChecked(True)
    view = window.canvas.item_of("weights:0")
    T = len(window.frame.result.tokens)
    assert view.image.image.shape == (T - 2, T - 2)
    assert "[CLS]" not in [view.data.row_labels[b[0]] for b in view.data.row_blocks]
    window.panel.sourceCombo.setCurrentIndex(0)
    qtbot.waitUntil(lambda: window.frame.result.config.model is None, timeout=20000)
    assert window.frame.result.config.d_model == 5 and window.frame.result.config.heads == 1
    assert not window.modelDock.isVisible()


def test_hiding_specials_with_nothing_else_left_shows_them(window, qtbot):
    choose_model(window, qtbot, 0)
    window.panel.hideSpecialCheck.setChecked(True)
    window.panel.sentenceInput.setPlainText("   ")
    qtbot.waitUntil(lambda: window.frame.result.tokens == ("[CLS]", "[SEP]"), timeout=20000)
    assert window.canvas.item_of("weights:0").image.image.shape == (2, 2)


def test_another_source_keeps_a_layer_it_has(window, qtbot):
    """Found in review: leaving MiniLM's layer 4 for random weights was refused ("layer is only
    used with a pretrained model") and the user had to find the layer box first."""
    choose_model(window, qtbot, 3)  # layer 4 to a person
    p = window.panel
    p.sourceCombo.setCurrentIndex(p.sourceCombo.findData(None))
    qtbot.waitUntil(lambda: window.frame.result.config.model is None)
    assert window.state.config.layer == 0 and p.messageLabel.text() == ""
    assert carry_layer(AttentionConfig(model="minilm-l6", layer=5), {"model": "smollm2-135m"}) == {
        "model": "smollm2-135m", "layer": 5, "ablate": ()}
    assert carry_layer(AttentionConfig(model="smollm2-135m", layer=20, ablate=((3, 1),)), {"model": "minilm-l6"}) == {
        "model": "minilm-l6", "layer": 5, "ablate": ()}  # MiniLM's last layer, layer 6 to a person; no struck heads

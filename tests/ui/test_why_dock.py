"""The Why dock on a tiny random Llama folder: DLA, logit lens and detector computed off the GUI thread and
drawn as the engine gives them (the engine is checked against transformers in tests/engine/test_attribution.py);
a click on alpha splits that score, a click on the DLA grid opens the head, an encoder is told what is needed."""

import pytest

from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine.attribution import direct_logit_attribution, logit_lens
from tiny_decoders import SENTENCE, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path)


def test_why_dock_explains_the_shown_decoder(window, llama, qtbot: QtBot):
    assert window.edit_config({"sentence": SENTENCE, "model": llama, "layer": 1})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=30000)
    panel = window.why
    with qtbot.waitSignal(panel.shown, timeout=30000, check_params_cb=lambda kind: kind == "detector"):
        window.show_dock("why")
    a = direct_logit_attribution(window.state.config)
    assert panel.dla.item.data.matrix == pytest.approx(a.heads.numpy(), abs=1e-9)
    assert f"= <b>{a.logit:.3f}</b>" in panel.summary.text()
    lens = logit_lens(window.state.config)
    top = lens.tokens[-1][-1][0]
    assert panel.lens.item(2, 9).text() == f"{top} {float(lens.probs[-1, -1, 0]):.2f}"
    assert panel.labels.toPlainText()

    with qtbot.waitSignal(panel.shown, timeout=30000, check_params_cb=lambda kind: kind == "dla"):
        panel.tokenBox.setText("mat")
        panel.againstBox.setText("cat")
        panel.explainButton.click()
    assert 'logit("mat") - logit("cat")' in panel.dla.item.data.title

    alpha = window.canvas.item_of(f"weights:{window.state.head}")
    window.canvas.ensureVisible(alpha)
    point = alpha.plot.getViewBox().mapViewToScene(QtCore.QPointF(2, 6))  # query 7, key 3
    with qtbot.waitSignal(panel.shown, timeout=30000, check_params_cb=lambda kind: kind == "score"):
        qtbot.mouseClick(window.canvas.viewport(), QtCore.Qt.MouseButton.LeftButton,
                         pos=window.canvas.mapFromScene(point))
    score = panel.score.item.data.matrix
    scaled = window.frame.result.scaled[window.state.head, 6, 2]
    assert score.sum() == pytest.approx(float(scaled), abs=1e-4)
    assert (panel.queryBox.value(), panel.keyBox.value()) == (7, 3)

    center = panel.dla.cell_rect(0, 3).center()  # layer 1, head 4
    panel.tabs.setCurrentIndex(0)
    qtbot.mouseClick(panel.dla.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=center)
    qtbot.waitUntil(lambda: (window.state.config.layer, window.state.head) == (0, 3), timeout=5000)
    qtbot.waitUntil(lambda: panel.qk.item.data is not None and panel.qk.item.data.title.startswith(
        "QK circuit of head 1.4"), timeout=30000)


def test_an_encoder_is_told_a_bad_token_keeps_the_last_result(window, llama, qtbot: QtBot):
    assert window.edit_config({"sentence": SENTENCE, "model": llama})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=30000)
    panel = window.why
    with qtbot.waitSignal(panel.shown, timeout=30000, check_params_cb=lambda kind: kind == "dla"):
        window.show_dock("why")
    grid = panel.dla.item.data
    panel.tokenBox.setText("cat mat")
    panel.explainButton.click()
    qtbot.waitUntil(lambda: "not one token" in panel.message.text(), timeout=30000)
    assert panel.dla.item.data is grid
    assert window.edit_config({"model": "minilm-l6"})
    assert "Why needs a decoder model" in panel.message.text() and not panel.explainButton.isEnabled()


"""The Why dock on a tiny random Llama folder: DLA, logit lens and detector computed off the GUI thread and
drawn as the engine gives them (the engine is checked against transformers in tests/engine/test_attribution.py);
a click on alpha splits that score, a click on the DLA grid opens the head, an encoder is told what is needed."""

import pytest

from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine.analysis.attribution.logit import direct_logit_attribution, logit_lens
from tiny_decoders import SENTENCE, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path)


def test_why_dock_explains_the_shown_decoder(window, llama, qtbot: QtBot):
    assert window.edit_config({"sentence": SENTENCE, "model": llama, "layer": 1})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=30000)
    panel = window.docks.panels["why"]
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

    with qtbot.waitSignal(panel.modelColours, timeout=5000) as coloured:
        panel.colourBox.setChecked(True)  # the model view gets the DLA shown
    assert coloured.args[0] == pytest.approx(panel.dla.item.data.matrix) and coloured.args[1] == "DLA mat − cat"

    center = panel.dla.cell_rect(0, 3).center()  # layer 1, head 4
    panel.tabs.setCurrentIndex(0)
    qtbot.mouseClick(panel.dla.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=center)
    qtbot.waitUntil(lambda: (window.state.config.layer, window.state.head) == (0, 3), timeout=5000)
    qtbot.waitUntil(lambda: panel.qk.item.data is not None and panel.qk.item.data.title.startswith(
        "QK circuit of head 1.4"), timeout=30000)


def test_an_encoder_is_told_a_bad_token_keeps_the_last_result(window, llama, qtbot: QtBot):
    assert window.edit_config({"sentence": SENTENCE, "model": llama})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=30000)
    panel = window.docks.panels["why"]
    with qtbot.waitSignal(panel.shown, timeout=30000, check_params_cb=lambda kind: kind == "dla"):
        window.show_dock("why")
    grid = panel.dla.item.data
    panel.tokenBox.setText("cat mat")
    panel.explainButton.click()
    qtbot.waitUntil(lambda: "not one token" in panel.message.text(), timeout=30000)
    assert panel.dla.item.data is grid
    panel.colourBox.setChecked(True)
    window.show_dock("walk")  # out of sight: a new sentence takes the DLA colours off the model view
    with qtbot.waitSignal(panel.modelColours, timeout=5000, check_params_cb=lambda values, _: values is None):
        assert window.edit_config({"sentence": "the dog sat"})
    assert window.edit_config({"model": "minilm-l6"})
    window.show_dock("why")
    assert "Why needs a decoder model" in panel.message.text() and not panel.explainButton.isEnabled()



def test_the_model_view_shows_a_signed_grid_in_place_of_the_sink_mass(qtbot: QtBot):
    """``ModelView.set_side``: the diverging map's colours are pyqtgraph's CET-D1A at (value / max|value| + 1) / 2,
    white-ish at 0; None brings the sink mass back."""
    import numpy as np
    import pyqtgraph as pg

    from attn_gui.render.model_view import ModelView

    view = ModelView()
    qtbot.addWidget(view)
    view.resize(900, 300)
    view.show()
    t, L, H = 3, 4, 2  # more layers than heads: the map beside the grid is shown
    weights = np.full((L, H, t, t), 1 / t)
    sink = np.full((L, H), 0.5)
    view.set_weights(weights, layer=0, head=0, sink=sink)
    values = np.array([[2.0, -1.0], [0.0, 0.5], [-2.0, 1.0], [0.25, 0.0]])
    view.set_side(values, "DLA of x")
    assert view.sinkPlot.isVisible() and view.sinkPlot.getAxis("top").labelText.startswith("DLA of x")
    image = view.sinkImage.image
    cmap = pg.colormap.get("CET-D1A")
    for layer, head in ((0, 0), (0, 1), (1, 0), (2, 0)):
        y0, x0 = view._origin(layer, head)
        expected = cmap.map(np.array([values[layer, head] / 2 / 2 + 0.5]), mode="byte")[0]
        assert tuple(image[y0 + 1, x0 + 1]) == tuple(expected)
    view.set_side(None)
    y0, x0 = view._origin(0, 0)
    expected = pg.colormap.get("viridis").map(np.array([0.5]), mode="byte")[0]
    assert tuple(view.sinkImage.image[y0 + 1, x0 + 1]) == tuple(expected)

"""Issue 61, item 9: a circuit belongs to the model it was found on. The Circuit dock drops the circuit shown, and
the result of a run under way, when the view's model changes (before: the old model's circuit stayed, and a head of
a layer the new model lacks was offered to the window, which raised ConfigError)."""

import pytest
from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine import AttentionConfig
from attn_gui.present.circuits import layout, to_pixels
from attn_gui.present.state import ViewState
from attn_gui.ui.docks.circuit import CircuitPanel
from tiny_decoders import SENTENCE, circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def two_models(tmp_path_factory):
    deep, shallow = tmp_path_factory.mktemp("deep"), tmp_path_factory.mktemp("shallow")
    tiny_decoder("llama", deep, layers=3)
    tiny_decoder("llama", shallow, layers=1)
    return str(deep), str(shallow), circuit_pairs(deep)


def _panel(qtbot: QtBot, folder: str, pairs: str) -> CircuitPanel:
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.resize(1100, 500)
    panel.show()
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=folder)))
    panel.taskBox.setEditText(pairs)
    panel.pairsBox.setValue(1)
    return panel


def test_a_model_switched_mid_run_drops_the_run(qtbot: QtBot, two_models):
    deep, shallow, pairs = two_models
    panel = _panel(qtbot, deep, pairs)
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
        panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=shallow)))  # the run's result is queued
    assert panel.found is None  # before: the deep model's 3-layer circuit shown for the 1-layer model
    assert panel.message.text() == "The model changed during the run; its circuit is dropped."
    assert panel.runButton.isEnabled()
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):  # a run on the new model is its own
        panel.runButton.click()
    assert panel.found is not None and panel.found.graph.layers == 1
    panel.shutdown()


def test_a_model_switched_after_a_run_drops_the_circuit_and_offers_no_head(qtbot: QtBot, two_models):
    deep, shallow, pairs = two_models
    panel = _panel(qtbot, deep, pairs)
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
    found = panel.found
    assert found is not None and found.graph.layers == 3
    g = found.graph
    point, _ = to_pixels(layout(g), panel.graph.width(), panel.graph.height())
    x, y = point(*layout(g).writers[g.head(2, 1)])  # a head of layer 3, which the shallow model lacks
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=shallow)))
    assert panel.found is None and panel._prompt is None and panel.edgesLabel.text() == ""
    assert panel.message.text() == "The model changed; the circuit of the last one is dropped."
    picked: list = []
    panel.headPicked.connect(lambda *a: picked.append(a))
    qtbot.mouseClick(panel.graph, QtCore.Qt.MouseButton.LeftButton, pos=QtCore.QPoint(round(x), round(y)))
    assert picked == []  # before: [(2, 1)], and the window raised ConfigError for layer 3 of a 1-layer model
    panel.follow(ViewState(AttentionConfig(sentence="the same model, another sentence", model=shallow)))
    assert panel.message.text() == "The model changed; the circuit of the last one is dropped."
    panel.shutdown()

"""The Circuit dock on a tiny random Llama: found off the GUI thread (the engine's scores, checked against
transformers in tests/engine/test_circuits.py), drawn with its k slider and curve, a head clicked opens it, bad
input is one line where the user looks and the last circuit stays, a model that is not a decoder says why."""


import pytest
from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine import AttentionConfig
from attn_gui.engine.circuits import circuit
from attn_gui.present.circuits import layout, to_pixels
from attn_gui.ui.circuit_panel import CircuitPanel
from tiny_decoders import SENTENCE, circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path), circuit_pairs(path)


def test_find_draw_and_open_a_head(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.resize(1100, 500)
    panel.show()
    panel.follow(AttentionConfig())  # random weights: no decoder
    assert not panel.runButton.isEnabled() and "need a decoder" in panel.message.text()
    panel.follow(AttentionConfig(sentence=SENTENCE, model=folder))
    assert panel.runButton.isEnabled() and panel.message.text() == ""
    panel.taskBox.setEditText(pairs)
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
    want = circuit(folder, pairs, "eap", pairs=1, faithful=False).top(1)[0]
    assert panel.found is not None and panel.found.top(1)[0] == pytest.approx(want)
    assert panel.edgesLabel.text().splitlines()[0].endswith(f"{want[0]} → {want[1]}")
    assert panel.kSlider.maximum() == panel.found.graph.n_edges == 82 and panel.kSlider.value() == 20
    panel.kSlider.setValue(5)
    assert panel.kLabel.text() == "top 5 edges"
    assert "edges recover" in panel.message.text() or "no circuit recovers" in panel.message.text()

    g = panel.found.graph  # click head 3 of layer 2 where the graph draws it
    point, _ = to_pixels(layout(g), panel.graph.width(), panel.graph.height())
    x, y = point(*layout(g).writers[g.head(1, 2)])
    with qtbot.waitSignal(panel.headPicked, timeout=5000) as picked:
        qtbot.mouseClick(panel.graph, QtCore.Qt.MouseButton.LeftButton, pos=QtCore.QPoint(round(x), round(y)))
    assert picked.args == [1, 2]

    shown = panel.found
    panel.taskBox.setEditText("nope")
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
    assert panel.message.text().startswith("task must be one of") and "\n" not in panel.message.text()
    assert panel.found is shown
    panel.shutdown()

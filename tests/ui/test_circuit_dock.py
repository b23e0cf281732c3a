"""The Circuit dock on a tiny random Llama: found off the GUI thread (the engine's scores, checked against transformers
in tests/engine/test_circuits.py), drawn with its k slider and curve, a head clicked opens it, an edge clicked shows
its heads' α and composition score (checked against transformers in tests/engine/test_circuits_composition.py), bad
input is one line where the user looks and the last circuit stays, a model that is not a decoder says why."""


import pytest
from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine import AttentionConfig
from attn_gui.engine.analysis.circuits import circuit
from attn_gui.engine.analysis.circuits.composition import composition
from attn_gui.present.state import ViewState
from attn_gui.present.circuits import edge_middle, layout, pick_edge, pick_writer, to_pixels
from attn_gui.ui.docks.circuit import CircuitPanel
from tiny_decoders import SENTENCE, circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path), circuit_pairs(path)


def _panel(qtbot: QtBot) -> CircuitPanel:
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.resize(1100, 500)
    panel.show()
    return panel


def test_find_draw_and_open_a_head(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = _panel(qtbot)
    panel.follow(ViewState(AttentionConfig()))  # random weights: no decoder
    assert not panel.runButton.isEnabled() and "need a decoder" in panel.message.text()
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=folder)))
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


def test_an_edge_clicked_shows_both_heads_and_its_composition(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = _panel(qtbot)
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=folder)))
    panel.taskBox.setEditText(pairs)
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
    found = panel.found
    assert found is not None and panel._prompt is not None
    g, size = found.graph, (panel.graph.width(), panel.graph.height())
    panel.kSlider.setValue(panel.kSlider.maximum())
    k = panel.kSlider.value()
    for e in sorted(found.top(k), key=lambda e: -abs(e[2])):  # the largest head-to-head edge one can click alone
        u, r = g.find_writer(e[0]), g.find_reader(e[1])
        x, y = (round(c) for c in edge_middle(found, u, r, *size))  # the pixel clicked
        if (g.writer_head(u) is not None and g.reader_kind(r)[0] in ("q", "k", "v")
                and pick_writer(g, x, y, *size) is None and pick_edge(found, k, x, y, *size) == (u, r)):
            break
    else:
        pytest.fail("no head-to-head edge to click")
    with qtbot.waitSignal(panel.edgeShown, timeout=30000) as shown:
        qtbot.mouseClick(panel.graph, QtCore.Qt.MouseButton.LeftButton, pos=QtCore.QPoint(x, y))
    assert shown.args == [g.writer_names[u], g.reader_names[r]]
    assert panel.tabs.currentIndex() == 1
    seen = panel.seen
    assert seen is not None and seen.score == pytest.approx(float(found.scores[u, r]))
    assert seen.composition == pytest.approx(composition(panel._prompt[0], u, r))
    text = panel.edgeInfo.text()
    assert f"{seen.score:+.4g}" in text and f"{seen.kind}-composition" in text
    assert all(f"{c:.3f}" in text for c in seen.composition)
    assert seen.writer_alpha is not None and seen.reader_alpha is not None
    assert seen.writer_alpha.shape == (len(panel._prompt[1]),) * 2
    assert panel.writerAlpha.renderer().isValid() and panel.readerAlpha.renderer().isValid()
    assert panel._graph_svg(*size).count('stroke="#facc15"') == 1  # the edge looked at, banded in the graph
    panel.shutdown()

"""The Circuit dock's graph (issue 62, item 4): a click on an edge drawn over a node shows the edge, not the head
under it; a node no drawn edge touches is a dot; Ctrl + wheel zooms the graph."""

import numpy as np
import pytest
from PySide6 import QtCore, QtGui
from pytestqt.qtbot import QtBot

from attn_gui.engine import AttentionConfig
from attn_gui.present.circuits import layout, pick_edge, pick_writer, to_pixels
from attn_gui.present.state import ViewState
from attn_gui.ui.docks.circuit import CircuitPanel
from tiny_decoders import SENTENCE, circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path, layers=3)
    return str(path), circuit_pairs(path)


@pytest.fixture
def panel(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.resize(1100, 500)
    panel.show()
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=folder)))
    panel.taskBox.setEditText(pairs)
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
    yield panel
    panel.shutdown()


def _over_a_node(panel):
    """A pixel on a drawn edge inside a head's node (not its middle), with the edge it lies on."""
    found, k = panel.found, panel.kSlider.value()
    g, size = found.graph, (panel.graph.width(), panel.graph.height())
    at = layout(g)
    point, _ = to_pixels(at, *size)
    for e in found.top(k):
        u, r = g.find_writer(e[0]), g.find_reader(e[1])
        (x0, y0), (x1, y1) = point(*at.writers[u]), point(*at.readers[r])
        for t in np.linspace(0, 1, 400):
            x, y = round(x0 + t * (x1 - x0)), round(y0 + t * (y1 - y0))
            node = pick_writer(g, x, y, *size)
            if (node is not None and g.writer_head(node) is not None and pick_writer(g, x, y, *size, middle=True)
                    is None and pick_edge(found, k, x, y, *size) == (u, r)):
                return (x, y), (u, r)
    pytest.fail("no edge drawn over a head's node")


def test_a_click_on_an_edge_over_a_node_shows_the_edge(qtbot: QtBot, panel):
    panel.kSlider.setValue(panel.kSlider.maximum())
    (x, y), (u, r) = _over_a_node(panel)
    heads = []
    panel.headPicked.connect(lambda *args: heads.append(args))
    g = panel.found.graph
    with qtbot.waitSignal(panel.edgeShown, timeout=30000) as shown:
        qtbot.mouseClick(panel.graph, QtCore.Qt.MouseButton.LeftButton, pos=QtCore.QPoint(x, y))
    assert shown.args == [g.writer_names[u], g.reader_names[r]] and heads == []


def test_nodes_no_drawn_edge_touches_are_dots_and_ctrl_wheel_zooms(qtbot: QtBot, panel):
    panel.kSlider.setValue(1)
    svg = panel._graph_svg(panel.graph.width(), panel.graph.height())
    g = panel.found.graph
    used = {g.find_writer(panel.found.top(1)[0][0]), 0}  # the one edge's writer and the embedding, each named
    assert svg.count('fill="#fde68a"') == len(used)
    assert svg.count('r="2" fill="#cccccc"') == g.n_writers - len(used)
    before = panel.graph.minimumSize()
    middle = QtCore.QPointF(panel.graph.width() / 2, panel.graph.height() / 2)
    wheel = QtGui.QWheelEvent(middle, panel.graph.mapToGlobal(middle), QtCore.QPoint(), QtCore.QPoint(0, 120),
                              QtCore.Qt.MouseButton.NoButton, QtCore.Qt.KeyboardModifier.ControlModifier,
                              QtCore.Qt.ScrollPhase.NoScrollPhase, False)
    QtCore.QCoreApplication.sendEvent(panel.graph, wheel)
    after = panel.graph.minimumSize()
    assert after.width() > before.width() and after.height() > before.height()

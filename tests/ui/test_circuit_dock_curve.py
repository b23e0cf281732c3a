"""The Circuit dock says the faithfulness curve's cost before the curve goes on, counts its points, and Cancel keeps
the edges found and the points measured (issue 63). The curve's values are checked against the dense patched runs in
tests/engine/test_circuits_curve.py."""

import pytest
import torch
from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine import AttentionConfig
from attn_gui.engine.analysis.circuits import circuit
from attn_gui.present.state import ViewState
from attn_gui.ui.docks.circuit import CircuitPanel
from tiny_decoders import SENTENCE, circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path), circuit_pairs(path)


def _panel(qtbot: QtBot, folder: str, pairs: str) -> CircuitPanel:
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.resize(1100, 500)
    panel.show()
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=folder)))
    panel.taskBox.setEditText(pairs)
    panel.methodBox.setCurrentText("routes")  # on this model EAP's first edge alone (into the logits) recovers 80 %:
    return panel  # its curve runs no layer, says no cost and is done in one forward


def test_the_estimate_is_shown_before_the_curve_goes_on(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = _panel(qtbot, folder, pairs)
    formats: list[str] = []
    told: list[tuple[str, str, bool]] = []  # what was said, the message then, whether the circuit was done
    panel._progress.connect(lambda d, t, w: formats.append(w), QtCore.Qt.ConnectionType.DirectConnection)
    panel.curveEstimated.connect(lambda text: told.append((text, panel.message.text(), panel.found is not None)))
    with qtbot.waitSignal(panel.circuitDone, timeout=120000):
        panel.runButton.click()
    assert len(told) == 1 and told[0][0] == told[0][1] and not told[0][2]  # in the message, before the circuit
    said = told[0][0]
    assert said.startswith("Edges found; the faithfulness curve: about ") and "more points" in said
    assert "faithfulness points" in formats
    assert panel.found is not None and panel.found.faithfulness is not None and panel.found.faithfulness.complete
    assert "edges recover" in panel.message.text() or "no circuit recovers" in panel.message.text()
    panel.shutdown()


def test_cancel_keeps_the_edges_and_the_points_measured(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = _panel(qtbot, folder, pairs)

    def stop(done: int, total: int, what: str) -> None:  # in the worker's thread: after the curve's first forward
        if what == "faithfulness points":
            panel.cancel()
    panel._progress.connect(stop, QtCore.Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(panel.circuitDone, timeout=120000):
        panel.runButton.click()
    found = panel.found
    assert found is not None and found.faithfulness is not None
    f = found.faithfulness
    full = circuit(folder, pairs, "routes", pairs=1)
    assert torch.equal(found.scores, full.scores)  # the edges found
    assert not f.complete and f.smallest is None and 0 < len(f.ks) < len(full.faithfulness.ks)
    for k, v in zip(f.ks, f.recovered, strict=True):
        assert v == pytest.approx(full.faithfulness.at(k), abs=1e-6)
    assert panel.message.text().startswith("Cancelled: the edges found are shown")
    assert panel.kSlider.maximum() == found.graph.n_edges and panel.runButton.isEnabled()
    panel.shutdown()

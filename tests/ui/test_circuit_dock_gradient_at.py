"""The Circuit dock says where EAP took its gradient and offers the other point (issue 57): the dock's scores with
"gradient at corrupted" are the engine's at that point (checked against autograd and TransformerLens in
tests/engine/test_eap_gradient_at.py), and the message names the point."""

import pytest
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


def test_the_dock_takes_and_says_the_gradient_point(qtbot: QtBot, llama):
    folder, pairs = llama
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.follow(ViewState(AttentionConfig(sentence=SENTENCE, model=folder)))
    panel.taskBox.setEditText(pairs)
    assert panel.gradientBox.currentData() == "clean" and panel.gradientBox.isEnabled()
    panel.gradientBox.setCurrentIndex(panel.gradientBox.findData("corrupted"))
    with qtbot.waitSignal(panel.circuitDone, timeout=60000):
        panel.runButton.click()
    want = circuit(folder, pairs, "eap", pairs=1, faithful=False, gradient_at="corrupted").top(1)[0]
    assert panel.found is not None and panel.found.gradient_at == "corrupted"
    assert panel.found.top(1)[0] == pytest.approx(want)
    assert "eap (gradient at the corrupted prompt)" in panel.message.text()
    panel.methodBox.setCurrentText("routes")  # routes take no gradient: the choice is off
    assert not panel.gradientBox.isEnabled()
    panel.shutdown()

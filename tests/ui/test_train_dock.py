"""The Train dock: Step, Start/Pause, Reset and the heads image, run off the GUI thread."""

import json
from pathlib import Path

import numpy as np
import torch

from attn_gui.ui.docks.train import head_mosaic


def test_head_mosaic_puts_layers_down_and_heads_across():
    a = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    m = head_mosaic(a)
    assert m.shape == (5, 8)
    assert np.array_equal(m[3:5, 6:8], a[1, 2]) and np.isnan(m[2]).all() and np.isnan(m[:, 2]).all()


def test_train_dock_steps_runs_pauses_and_resets(window, qtbot):
    panel = window.docks.panels["train"]
    assert window.docks.entries["train"] in window.menus.view.actions()
    panel.layers.setValue(1)
    panel.d_model.setValue(16)
    with qtbot.waitSignal(panel.stopped, timeout=20000):
        panel.stepButton.click()
    qtbot.waitUntil(lambda: panel.step_count == 1, timeout=5000)
    panel.start.click()
    qtbot.waitUntil(lambda: panel.step_count >= 11, timeout=20000)
    panel.pauseButton.click()
    qtbot.waitUntil(lambda: not panel.running, timeout=20000)
    assert panel.step_count >= 2 and panel.image.image.shape == (15, 31)  # 1 layer, 2 heads of 15 tokens
    panel.resetButton.click()
    assert panel.step_count == 0 and "step" not in panel.message.text()


def test_a_bad_size_is_said_in_the_dock(window):
    window.docks.panels["train"].heads.setValue(3)  # 32 does not split into 3 heads
    window.docks.panels["train"].resetButton.click()
    assert "heads" in window.docks.panels["train"].message.text()


def test_open_in_the_explorer_shows_a_learned_positions_checkpoint_on_the_probe(window, qtbot):
    """Positions "learned (GPT-2)": the dock trains a GPT-2 checkpoint, and Open in the explorer
    shows it in the main maps on the task's probe sequence, its alpha equal to transformers' on
    the saved folder."""
    import transformers
    panel = window.docks.panels["train"]
    panel.layers.setValue(1)
    panel.d_model.setValue(16)
    panel.positions.setCurrentIndex(panel.positions.findData("learned"))
    with qtbot.waitSignal(panel.stopped, timeout=20000):
        panel.stepButton.click()
    with qtbot.waitSignal(panel.openRequested, timeout=20000) as opened:
        panel.openButton.click()
    folder, sentence = opened.args
    assert json.loads((Path(folder) / "config.json").read_text())["model_type"] == "gpt2"
    qtbot.waitUntil(lambda: window.frame is not None and window.frame.result.config.model == folder, timeout=30000)
    result = window.frame.result
    probe = panel.run_state.trainer.task.probe().inputs[0]
    assert list(result.token_ids) == probe.tolist() and sentence.split() == [str(i) for i in probe.tolist()]
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = hf(probe[None], output_attentions=True).attentions[0][0]
    assert torch.allclose(result.weights, theirs, atol=1e-5)


def test_start_trains_up_to_steps_saying_the_time_left_with_named_axes_and_a_legend(window, qtbot):
    panel = window.docks.panels["train"]
    panel.layers.setValue(2)
    panel.d_model.setValue(16)
    panel.target.setValue(30)
    panel.start.click()
    qtbot.waitUntil(lambda: "left to step 30" in panel.message.text(), timeout=30000)
    assert panel.timeLeft.text().startswith("about ") and panel.timeLeft.text().endswith(" left")
    qtbot.waitUntil(lambda: not panel.running, timeout=60000)
    assert panel.timeLeft.text() == ""
    assert panel.step_count == 30 and "ms a step" in panel.message.text()
    panel.start.click()  # at Steps already: said, nothing runs
    assert not panel.running and "raise Steps" in panel.message.text()
    # the mosaic's axes name the blocks (2 layers, 2 heads of 15 tokens, 1-pixel gaps), not pixels
    left, bottom = (panel.heads_view.getAxis(name)._tickLevels[0] for name in ("left", "bottom"))
    assert left == [(7.5, "layer 1"), (23.5, "layer 2")] and bottom == [(7.5, "head 1"), (23.5, "head 2")]
    plot = panel.metrics.getPlotItem()
    legend = [label.text for _, label in plot.legend.items]
    assert legend == ["layer 1 previous", "layer 2 previous", "layer 1 induction", "layer 2 induction"]
    # the legend sits above 1, where no score (a share of α) reaches: it never covers a curve
    panel.resize(900, 300)
    qtbot.waitUntil(lambda: plot.legend.sceneBoundingRect().height() > 0)
    bottom = plot.vb.mapSceneToView(plot.legend.sceneBoundingRect().bottomLeft()).y()
    assert bottom >= 1.0, bottom


def test_each_run_saves_into_a_folder_of_its_own(qtbot):
    """Issue 47: every Train dock wrote into one /tmp/attn-gui-train, and two windows collided there. Two docks'
    runs, and a run after Reset, each save into a temporary folder of their own."""
    from attn_gui.ui.docks.train import TrainPanel

    panels = [TrainPanel(), TrainPanel()]
    folders = []
    for panel in panels:
        qtbot.addWidget(panel)
        panel.layers.setValue(1)
        panel.d_model.setValue(16)
        for _ in range(2):  # a run, then a fresh run after Reset
            panel.resetButton.click()
            with qtbot.waitSignal(panel.stopped, timeout=20000):
                panel.stepButton.click()
            with qtbot.waitSignal(panel.openRequested, timeout=20000) as opened:
                panel.openButton.click()
            folders.append(Path(opened.args[0]))
    assert len({f.parent for f in folders}) == 4  # four runs, four folders
    assert all(f.parent.name.startswith("attn-gui-train-") and (f / "config.json").is_file() for f in folders)
    for panel in panels:
        panel.shutdown()

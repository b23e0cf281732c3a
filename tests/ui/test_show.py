"""The window from Python: ``attn_gui.show`` under a running QApplication and from a plain script.

A script that builds a window and ends while a worker computes must end cleanly: Qt aborts
a process that destroys a running QThread ("QThread: Destroyed while thread ... is still
running", exit status 134), so these run in a subprocess and check its exit and its stderr.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import attn_gui
from attn_gui.engine import UserError, compute


@pytest.fixture(autouse=True)
def _the_tests_application_runs_a_loop(qapp):
    """pytest-qt's waits run this application's event loop, as a Qt program's would: ``show`` must return a live
    window. In a whole run an earlier test's ``to_html`` may have made the application (marked ``MADE_HERE``, a
    plain script's), and ``show`` then ran ``exec()`` until the window closed: the run hung in ``shown``."""
    from attn_gui.render.offscreen import MADE_HERE

    made = qapp.property(MADE_HERE)
    qapp.setProperty(MADE_HERE, False)
    yield
    qapp.setProperty(MADE_HERE, made)


@pytest.fixture
def shown(qtbot, settings):
    window = attn_gui.show(sentence="When in doubt look intelligent", heads=2, causal=True, head=1)
    qtbot.addWidget(window)
    yield window
    window.close()
    gc.collect()


def test_show_under_a_running_application_returns_a_live_window(qtbot, shown):
    assert shown.isVisible() and shown.state.head == 1 and shown.state.config.heads == 2
    qtbot.waitUntil(lambda: shown.result is not None, timeout=10000)
    reference = compute(shown.state.config)  # the engine run alone: the window shows its tensors
    assert torch.allclose(shown.result.weights, reference.weights, atol=1e-6)
    with qtbot.waitSignal(shown.frameShown, timeout=10000):
        shown.set_state(shown.state.replace(config=shown.state.config.replace(sentence="one two three")))
    assert shown.result.tokens == ("one", "two", "three")
    shown.set_state(shown.state.replace(head=0))
    assert shown.canvas.head == 0


def test_show_page_is_the_windows_state(qtbot, shown):
    qtbot.waitUntil(lambda: shown.result is not None, timeout=10000)
    page = attn_gui.to_html(shown)
    assert "head 2 of 2" in page  # the walk follows the window's head (1, 0-based)


def test_show_a_model_object_in_memory(qtbot, settings):
    """A model never saved, shown from Python: the window's α is the model's own eager attentions."""
    from transformers_peer import tiny_qwen2, word_tokenizer  # tests/

    hf = tiny_qwen2()
    window = attn_gui.show(model=hf, tokenizer=word_tokenizer(), sentence="the cat sat on a mat", name="notebook",
                           layer=1, head=2)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.result is not None, timeout=20000)
    ids = window.result.token_ids.cpu()[None]
    with torch.no_grad():
        out = hf(ids, output_attentions=True)
    assert window.state.config.model == "notebook" and window.state.head == 2
    assert torch.allclose(window.result.weights, out.attentions[1][0], atol=1e-5, rtol=0)
    window.close()
    gc.collect()


def test_show_a_transformer_lens_bridge(qtbot, settings, tmp_path):
    """A TransformerLens bridge in compatibility mode, shown without a tokenizer (its own): the window's α is
    the bridge's ``hook_pattern``."""
    pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")
    from lens_bridges import boot, tiny_folder  # tests/

    bridge = boot(tiny_folder("gpt2", tmp_path), compat=True)
    window = attn_gui.show(model=bridge, sentence="the cat sat on a mat", name="lens", layer=1, head=2)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.result is not None, timeout=20000)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(window.result.token_ids.cpu()[None])
    assert window.state.config.model == "lens"
    assert torch.allclose(window.result.weights, cache["blocks.1.attn.hook_pattern"][0], atol=1e-5, rtol=0)
    window.close()
    gc.collect()


def test_show_refuses_bad_options_before_any_window():
    with pytest.raises(UserError, match="no option 'colour'"):
        attn_gui.show(colour="red")
    with pytest.raises(UserError, match="tokenizer goes with a model object"):
        attn_gui.show(tokenizer=object())


def _run(script: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", ATTN_GUI_CONFIG_DIR=str(tmp_path / "config"))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=300, env=env)


# a long sentence: the compute goes to the worker thread and is still running when the script ends
BUSY = "sentence=' '.join(['word'] * 600), heads=8, d_model=64, d_k=64, d_v=64"


def test_a_script_that_builds_a_window_and_ends_while_a_worker_runs_ends_cleanly(tmp_path):
    run = _run(f"""
        from PySide6 import QtWidgets
        from attn_gui.engine import AttentionConfig
        from attn_gui.ui.main_window import MainWindow
        app = QtWidgets.QApplication([])
        window = MainWindow(AttentionConfig({BUSY}))
        assert window.service.queue.latest_id > 0 and window.frame is None, "the worker is computing"
        print("built")
    """, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "built" in run.stdout and "QThread" not in run.stderr


def test_show_in_a_plain_script_runs_until_the_window_closes(tmp_path):
    run = _run(f"""
        from PySide6 import QtCore
        import attn_gui
        from attn_gui.ui.main_window import MainWindow

        def show_then_close(self, show=MainWindow.show):  # the person closes the window while it computes
            show(self)
            QtCore.QTimer.singleShot(0, self.close)

        MainWindow.show = show_then_close
        window = attn_gui.show({BUSY}, head=3)
        assert not window.isVisible() and window.state.head == 3
        print("returned")
    """, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "returned" in run.stdout and "QThread" not in run.stderr


def test_show_after_to_html_in_a_plain_script_still_runs_until_the_window_closes(tmp_path):
    """Issue 47: ``to_html`` made a QApplication to draw its page, and ``show`` then took the script for a Qt
    program with its own loop: it returned after 0.7 s, the script ended, no window."""
    run = _run("""
        from PySide6 import QtCore
        import attn_gui
        from attn_gui.engine import AttentionConfig, compute
        from attn_gui.ui.main_window import MainWindow

        assert "<html" in attn_gui.to_html(compute(AttentionConfig())).lower()
        closed = []

        def show_then_close(self, show=MainWindow.show):  # closed by the person, inside show()'s event loop
            show(self)
            QtCore.QTimer.singleShot(0, lambda: (closed.append(True), self.close()))

        MainWindow.show = show_then_close
        window = attn_gui.show(heads=2)
        assert closed and not window.isVisible(), "show() returned before the window closed"
        print("returned after the window closed")
    """, tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "returned after the window closed" in run.stdout


def test_import_stays_light_and_the_api_comes_on_first_use(tmp_path):
    run = _run("""
        import sys
        import attn_gui
        heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "PySide6", "pyqtgraph", "transformers")]
        assert not heavy and list(m for m in sys.modules if m.startswith("attn_gui")) == ["attn_gui"], heavy
        assert callable(attn_gui.show) and callable(attn_gui.to_html) and callable(attn_gui.register)
        assert callable(attn_gui.notebook.view)
        print("ok")
    """, tmp_path)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]

import gc

import pytest

from attn_gui.present.state import ViewState
from attn_gui.ui import MainWindow
from attn_gui.ui.settings import Settings


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_GUI_CONFIG_DIR", str(tmp_path / "config"))
    return Settings()


@pytest.fixture
def window(qtbot, settings):
    win = MainWindow(ViewState(), settings=settings)  # every map (a first start on a small screen focuses α)
    qtbot.addWidget(win)
    win.resize(1600, 1000)
    win.show()
    qtbot.waitUntil(lambda: win.frame is not None, timeout=10000)
    # a first start gives the docks a fifth of the height one turn after show (main_window._restore): the maps
    # are laid out again then, so a test that points at a cell waits for it
    qtbot.waitUntil(lambda: win.focusDock.height() <= max(150, win.height() // 5), timeout=5000)
    yield win
    win.service.shutdown()
    win.close()
    gc.collect()  # this window's Qt wrappers die here, on the main thread, never in a worker (render/collector.py)


@pytest.fixture
def drawn(qtbot):
    """``drawn(window)`` waits until the canvas has drawn every map of the frame shown: a frame is laid
    out and drawn in steps, a few per turn of the event loop (render/canvas.py: ``settled`` ends them)."""
    return lambda window: qtbot.waitUntil(lambda: not window.canvas.busy, timeout=20000)


@pytest.fixture(scope="module")
def deep_llama(tmp_path_factory):
    """A tiny Llama with more layers than heads (6 x 4, 2 K/V heads): its grid runs the layers across."""
    from tiny_decoders import tiny_decoder  # tests/

    path = tmp_path_factory.mktemp("deep-llama")
    tiny_decoder("llama", path, layers=6)
    return str(path)

"""Alpha, the map the window exists for (issue 47), read off the canvas at both common screen sizes: in both
modes (alpha in focus, every map) and each state (random weights with 1 and 4 heads, MiniLM, SmolLM2, a
40-token sentence) it is the largest map, lies in view and names every row and column; a short map area (a
taller dock) keeps it readable, never a smudge beside full-size neighbours."""

import itertools

import pytest
from PySide6 import QtCore

from attn_gui.engine import AttentionConfig
from attn_gui.engine.model.registry import is_available
from attn_gui.present.sizes import LINE, MIN_LABEL_PX
from attn_gui.present.state import ViewState
from attn_gui.ui import MainWindow

WORDS = ["the", "animal", "did", "not", "cross", "the", "street", "because", "it", "was", "too", "tired"]
ANIMAL = "The animal didn't cross the street because it was too tired"
STATES = {
    "toy 1 head": AttentionConfig(),
    "toy 4 heads": AttentionConfig(heads=4, d_model=64, sentence=ANIMAL),
    "40 tokens": AttentionConfig(heads=4, d_model=64, sentence=" ".join(itertools.islice(itertools.cycle(WORDS), 40))),
    "24 tokens": AttentionConfig(sentence=" ".join(itertools.islice(itertools.cycle(WORDS), 24))),
    "MiniLM": AttentionConfig(model="minilm-l6", layer=3, sentence=ANIMAL),
    "SmolLM2": AttentionConfig(model="smollm2-135m", sentence=ANIMAL),
}
SIZES = {"1366x768": (1366, 768), "1920x1080": (1920, 1080)}


def open_at(qtbot, settings, size, config) -> MainWindow:
    """A first start at ``size`` on ``config``, alpha in focus, its docks at their first size."""
    model = config.model
    if model is not None and not is_available(model):
        pytest.skip(f"{model} is not installed")
    window = MainWindow(ViewState(config, focus="weights"), settings=settings)
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    qtbot.waitUntil(lambda: window.frame is not None and window.frame.result.config == config, timeout=180000)
    return window


def settled(qtbot, window) -> None:
    """The canvas laid out for its viewport as it is now (a dock's room changes it), every map drawn."""
    canvas = window.canvas
    qtbot.waitUntil(lambda: canvas._planned_for == canvas.viewport().size().toTuple() and not canvas.busy,
                    timeout=20000)


def read_alpha(window):
    """(alpha's rect, every other map's and thumbnail's rect, the viewport) in viewport pixels."""
    canvas = window.canvas
    mid = f"weights:{window.state.head}"
    others = [canvas.rect_of(m) for m in canvas.shown if m != mid and canvas.rect_of(m) is not None]
    others += [canvas.mapFromScene(item.sceneBoundingRect()).boundingRect() for item in canvas.strip
               if item.isVisible()]
    return canvas.rect_of(mid), others, canvas.viewport().rect()


def area(rect) -> int:
    return rect.width() * rect.height()


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("state", list(STATES))
def test_alpha_is_the_largest_map_in_view_with_every_label(qtbot, settings, state, size):
    config = STATES[state]
    window = open_at(qtbot, settings, SIZES[size], config)
    for focus in ("weights", None):
        window.focus_on(focus)
        settled(qtbot, window)
        alpha, others, view = read_alpha(window)
        assert view.contains(alpha), (focus, alpha, view)
        larger = [r for r in others if area(r) > area(alpha)]
        assert not larger, (focus, alpha, larger)
        result = window.frame.result
        rows, cols = window.canvas.labels_of(f"weights:{window.state.head}")
        assert rows == list(result.tokens) and cols == list(result.key_tokens), focus
    window.stop_workers()


@pytest.mark.parametrize("size", sorted(SIZES))
def test_a_short_map_area_keeps_alpha_readable_and_the_largest(qtbot, settings, size):
    """A dock dragged tall (or a session that saved one): alpha kept its labels' cells and stays the largest map,
    the canvas scrolling where it must; its top left (title, column labels) in view."""
    config = STATES["toy 4 heads"]
    window = open_at(qtbot, settings, SIZES[size], config)
    window.resizeDocks([window.show_dock("walk")], [round(SIZES[size][1] * 0.45)], QtCore.Qt.Orientation.Vertical)
    for focus in ("weights", None):
        window.focus_on(focus)
        settled(qtbot, window)
        alpha, others, view = read_alpha(window)
        assert view.contains(alpha.topLeft()), (focus, alpha, view)
        assert not [r for r in others if area(r) > area(alpha)], focus
        item = window.canvas.item_of("weights:0")
        cell = item.cell_scene_rect(0, 0)
        assert min(cell.width(), cell.height()) >= MIN_LABEL_PX * LINE, (focus, cell)
        rows, cols = window.canvas.labels_of("weights:0")
        assert rows == list(window.frame.result.tokens), focus
    window.stop_workers()

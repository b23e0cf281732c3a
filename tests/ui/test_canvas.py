"""The one canvas in the window: in each state, at both common screen sizes, alpha lies inside
the visible viewport and names every row and column with its full token."""

import functools
import itertools

import numpy as np
import pytest
import torch
from PySide6 import QtWidgets

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import is_available
from attn_gui.present.state import ViewState
from attn_gui.ui import MainWindow

WORDS = ["the", "animal", "did", "not", "cross", "the", "street", "because", "it", "was", "too", "tired"]
STATES = {
    "default": AttentionConfig(),
    "4 heads d 64": AttentionConfig(heads=4, d_model=64),
    "8 heads T 64": AttentionConfig(heads=8, d_model=256, sentence=" ".join(itertools.islice(itertools.cycle(WORDS),
                                                                                             64))),
    "cross 6x7": AttentionConfig(sentence="the cat sat on the mat", source_sentence="le chat était assis sur le tapis"),
}
if is_available("minilm-l6"):
    STATES["MiniLM 15 tokens"] = AttentionConfig(model="minilm-l6", layer=3, sentence=(
        "The animal didn't cross the street because it was too tired"))


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)], ids=["1366x768", "1920x1080"])
@pytest.mark.parametrize("state", sorted(STATES))
def test_alpha_is_in_view_with_every_label(window, qtbot, state, size):
    config = STATES[state]
    window.resize(*size)
    window.set_state(window.state.replace(config=config, focus="weights"))
    qtbot.waitUntil(lambda: window.frame.result.config == config, timeout=20000)
    canvas = window.canvas
    # drawn, for the viewport the scroll bars left (a model's dock and the new layout change it)
    qtbot.waitUntil(lambda: not canvas.busy and canvas._planned_for == canvas.viewport().size().toTuple())
    rect, view = canvas.rect_of("weights:0"), canvas.viewport().rect()
    assert view.contains(rect), (rect, view)
    item = canvas.item_of("weights:0")
    np.testing.assert_allclose(item.image.image, compute(config).numpy("weights")[0], atol=1e-5)
    result = window.frame.result
    rows, cols = canvas.labels_of("weights:0")
    if result.seq_len <= 32:  # 64 rows beside the heads strip and the docks: every k-th (see test_layout)
        assert rows == list(result.tokens) and cols == list(result.key_tokens)
    else:
        assert set(rows) <= set(result.tokens) and len(rows) >= result.seq_len // 4


@pytest.mark.parametrize("name", ["walk", "model-view", "metrics", "difference", "rollout", "why-scaling",
                                  "kv-cache"])
def test_each_dock_can_be_brought_in_front(window, name):
    dock = window.show_dock(name)
    assert dock.isVisible() and not dock.visibleRegion().isEmpty()


def test_marks_outline_cells_and_keep_the_followed_row(window):
    window.canvas.set_marks({"weights": [(1, 4), (3, None)], "scores": [(0, 0)]})
    alpha = window.canvas.item_of("weights:0")
    rects = [(r.x(), r.y(), r.width(), r.height()) for r in alpha.marks.rects()]
    assert rects == [(3.5, 0.5, 1, 1), (-0.5, 2.5, 5, 1)]  # cell (1, 4) and the whole row 3
    assert alpha.highlight.isVisible()  # the followed token's outline stays
    window.panel.seedSpin.setValue(9)  # a new frame keeps them
    assert len(window.canvas.item_of("weights:0").marks.rects()) == 2
    window.canvas.set_marks({})
    assert window.canvas.item_of("weights:0").marks.rects() == []


def test_a_long_inputs_faint_alpha_says_its_scale(window, qtbot):
    words = " ".join(itertools.islice(itertools.cycle(WORDS), 700))
    window.set_state(window.state.replace(config=AttentionConfig(sentence=words), focus="weights"))
    qtbot.waitUntil(lambda: window.frame.result.seq_len == 700, timeout=30000)
    alpha = window.canvas.item_of("weights:0")
    top = float(alpha.image.image.max())
    assert top < 0.1 and alpha.image.levels[1] >= top and alpha.image.levels[1] < 0.1  # 0 to max, not 0 to 1
    assert "mean α = 1/T = 0.0014; colour scale 0 to max" in alpha.plot.titleLabel.text


def test_a_maps_colour_scale_is_chosen_from_its_menu_and_kept_in_the_session(window, qtbot, tmp_path, drawn):
    config = AttentionConfig(heads=2, d_model=8)
    window.set_state(window.state.replace(config=config, focus="weights"))
    qtbot.waitUntil(lambda: window.frame.result.config == config, timeout=20000)
    alpha = compute(config).numpy("weights")  # (h, T, T)
    menu = window.map_menu(window.canvas.item_of("weights:0").data)
    scale_menu = next(a.menu() for a in menu.actions() if a.menu() is not None)
    modes = {a.data(): a for a in scale_menu.actions()}
    assert list(modes) == ["auto", "fixed", "max", "row"] and modes["auto"].isChecked()
    modes["row"].trigger()
    assert window.state.scales == (("weights", "row"),)
    per_row = alpha / alpha.max(axis=-1, keepdims=True)
    item = window.canvas.item_of("weights:0")  # (item_of draws what is left of the frame first)
    np.testing.assert_allclose(item.image.image, per_row[0], rtol=1e-5)
    np.testing.assert_allclose(window.canvas.strip[1].image.image, per_row[1], rtol=1e-5)  # every head's map
    assert window.canvas.stripBar.axis._tickLevels[0][-1] == (1.0, "max")  # the strip's shared bar says so
    assert "each row 0 to its max" in item.plot.titleLabel.text
    assert item.data.matrix.max() == pytest.approx(alpha[0].max(), rel=1e-6)  # values and read-outs stay real
    window.files.save_session(str(tmp_path / "s.json"))
    window.set_scale("weights", "auto")
    assert window.state.scales == ()
    assert window.files.open_session(str(tmp_path / "s.json")) and window.state.scales == (("weights", "row"),)
    scores = window.map_menu(window.canvas.item_of("scores:0").data)  # signed maps: centred on 0, or per row
    assert [a.data() for a in next(a.menu() for a in scores.actions() if a.menu()).actions()] == ["auto", "row"]


def test_a_frame_is_laid_out_once_and_whole_before_it_is_painted(window, qtbot, monkeypatch, drawn):
    """Every map (focus None) at T = 64 scrolls: the scroll bars the layout brings are foreseen, so
    their coming does not lay the maps out again; and the maps' insides (axes resized for new
    labels, top labels fitted again) are laid out when the frame is drawn, not after its paint."""
    from attn_gui.render.canvas import Canvas

    window.resize(1366, 768)
    window.focus_on(None)
    qtbot.waitUntil(lambda: window.canvas.focus is None)
    places = []
    place = Canvas._place
    monkeypatch.setattr(Canvas, "_place", lambda self: (places.append(1), place(self)))
    config = STATES["8 heads T 64"]
    with qtbot.waitSignal(window.frameShown, timeout=20000):
        window.set_state(window.state.replace(config=config))
    canvas = window.canvas
    qtbot.waitUntil(canvas.verticalScrollBar().isVisible)  # the scroll bars show when Qt lays the view out
    assert places == [1]
    size = canvas.viewport().size()
    assert canvas._planned_for == (size.width(), size.height())
    pending = []  # when the frame's last step is drawn (a frame is drawn in steps: render/canvas.py)
    canvas.settled.connect(lambda: pending.append([item.name for item in canvas.shown.values() if not (
        item.layout.isActivated() and item.plot.layout.isActivated())]))
    for d_k in (16, 48):  # new shapes: every axis is sized again
        pending.clear()
        with qtbot.waitSignal(window.frameShown, timeout=20000):
            window.edit_config({"d_k": d_k})
        drawn(window)
        assert pending and all(p == [] for p in pending)


def test_every_map_opens_with_alphas_title_and_column_labels_in_view(window, qtbot):
    # alpha taller than the view (26 rows, 8 heads, every map at 1366 x 768) showed its last rows
    # and no column labels; it now shows its top left, and keeps it in view when the window resizes.
    # Every map is now scaled to fit the view: zoomed in (Ctrl + wheel), alpha is taller than it again
    words = " ".join(itertools.islice(itertools.cycle(WORDS), 26))
    config = AttentionConfig(heads=8, d_model=256, sentence=words)
    window.resize(1366, 768)
    window.focus_on(None)
    canvas = window.canvas
    canvas._zoom = 2.5
    with qtbot.waitSignal(window.frameShown, timeout=20000):
        window.set_state(window.state.replace(config=config))
    for size in ((1366, 768), (1300, 700)):
        window.resize(*size)
        qtbot.waitUntil(lambda: canvas.rect_of("weights:0") is not None and canvas.rect_of("weights:0").top() >= 0)
        rect, view = canvas.rect_of("weights:0"), canvas.viewport().rect()
        assert rect.height() > view.height()  # the case: alpha is taller than the view
        assert view.contains(rect.topLeft())
        assert canvas.labels_of("weights:0")[1] == list(window.frame.result.key_tokens)



def in_view(canvas, item) -> bool:
    """Whether scene ``item`` lies wholly inside the canvas's viewport as it is scrolled now."""
    return canvas.viewport().rect().contains(canvas.mapFromScene(item.sceneBoundingRect()).boundingRect())


def first_start(qtbot, settings, size, state):
    """A window started at ``size`` (width, height) with no saved settings: its docks at their first size."""
    win = MainWindow(state, settings=settings)
    qtbot.addWidget(win)
    win.resize(*size)
    with qtbot.waitExposed(win):
        win.show()
    qtbot.waitUntil(lambda: win.frame is not None and win.frame.result.config == state.config, timeout=60000)
    qtbot.waitUntil(lambda: win.focusDock.height() <= size[1] // 5 + 40)  # its first size (MainWindow._restore)
    canvas = win.canvas
    qtbot.waitUntil(lambda: canvas._planned_for == canvas.viewport().size().toTuple())  # the docks took their size
    qtbot.waitUntil(lambda: not canvas.busy)  # every map drawn (a frame is drawn in steps)
    return win


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)], ids=["1366x768", "1920x1080"])
def test_every_map_fills_the_view_and_alpha_is_the_largest(qtbot, settings, size):
    # issue 33: every map sat in about 60 % x 45 % of the canvas at 1920 x 1080, alpha 198 px
    window = first_start(qtbot, settings, size, ViewState())
    canvas = window.canvas
    rects = {mid: canvas.rect_of(mid) for mid in canvas.shown}
    union = functools.reduce(lambda a, b: a.united(b), rects.values())
    view = canvas.viewport().rect()
    assert view.contains(union)  # the default sentence's maps fit: nothing is scrolled out of view
    assert union.width() >= 0.8 * view.width() or union.height() >= 0.8 * view.height(), (union, view)
    alpha = rects["weights:0"]
    assert all(alpha.width() * alpha.height() >= r.width() * r.height() for r in rects.values())
    if size == (1920, 1080):
        assert min(alpha.width(), alpha.height()) >= 300, alpha
        assert canvas.item_of("weights:0").values.value_format() is not None  # alpha writes its values
    tokens = list(window.frame.result.tokens)
    assert canvas.labels_of("weights:0") == (tokens, tokens)  # every row and column named
    window.stop_workers()


def test_four_heads_at_1366_keep_the_strip_and_its_brackets_in_view(window, qtbot, drawn):
    # the canvas opened scrolled to alpha, the strip and its K/V labels above the view
    config = AttentionConfig(heads=4, kv_heads=2, d_model=64)
    window.resize(1366, 768)
    window.set_state(window.state.replace(config=config, focus="weights"))
    qtbot.waitUntil(lambda: window.frame.result.config == config, timeout=20000)
    canvas = window.canvas
    qtbot.waitUntil(lambda: canvas._planned_for == canvas.viewport().size().toTuple())
    drawn(window)
    assert len(canvas.brackets) == 2
    labels = [g for g in canvas._groups if isinstance(g, QtWidgets.QGraphicsSimpleTextItem)]
    assert [g.text() for g in labels] == ["K/V 1: heads 1–2", "K/V 2: heads 3–4"]
    for item in [*canvas.strip[:4], *labels]:  # each thumbnail holds its title ("head 2")
        assert in_view(canvas, item), item
    assert canvas.viewport().rect().contains(canvas.rect_of("weights:0"))


@pytest.mark.skipif(not is_available("minilm-l6"), reason="MiniLM-L6's weights are not in the cache")
def test_minilm_alpha_writes_its_values_at_1366_with_the_default_dock(qtbot, settings):
    # the bottom dock took a third of a 768 px window: alpha's 15 x 15 cells lost their values
    window = first_start(qtbot, settings, (1366, 768), ViewState(STATES["MiniLM 15 tokens"], focus="weights"))
    canvas = window.canvas
    assert window.modelDock.isVisible() and not window.modelDock.visibleRegion().isEmpty()  # model mode's dock
    alpha = canvas.item_of("weights:0")
    assert canvas.viewport().rect().contains(canvas.rect_of("weights:0"))
    assert alpha.values.value_format() is not None
    assert all(in_view(canvas, item) for item in canvas.strip[:12])
    window.stop_workers()


def test_a_nine_head_frame_drawn_in_steps_ends_with_every_heads_alpha(window, qtbot, monkeypatch):
    """Issue 32: the first 9-head frame held the GUI thread 150-190 ms in one turn. With no time left
    in a turn (STEP_S = 0) each turn of the event loop draws one map or thumbnail; when ``settled``
    comes, every map shows the frame: each head's alpha is softmax(Q K^T / sqrt(d_k)) (torch)."""
    from attn_gui.render import frame_steps

    monkeypatch.setattr(frame_steps, "STEP_S", 0.0)
    config = AttentionConfig(heads=9, d_model=36, d_k=4, d_v=4)
    canvas = window.canvas
    busy_when_shown, turns = [], []
    window.frameShown.connect(lambda _frame: busy_when_shown.append(canvas.busy))
    canvas._stepper.timeout.connect(lambda: turns.append(1))
    with qtbot.waitSignal(canvas.settled, timeout=20000):
        window.set_state(window.state.replace(config=config, focus="weights"))
    assert busy_when_shown == [True] and not canvas.busy
    assert len(turns) >= 1 + len(canvas.shown) + 9  # the layout, each map, each head: a turn each
    result = window.frame.result
    q, k = (torch.tensor(result.numpy(name)) for name in ("q", "k"))  # (heads, T, d_k)
    alpha = torch.softmax(q @ k.transpose(-2, -1) / np.sqrt(config.d_k), dim=-1).numpy()
    assert len([item for item in canvas.strip if item.isVisible()]) == 9
    for h in range(9):
        np.testing.assert_allclose(canvas.strip[h].image.image, alpha[h], atol=1e-5)
    np.testing.assert_allclose(canvas.item_of("weights:0").image.image, alpha[0], atol=1e-5)
    # a thumbnail has no colour bar of its own: its image takes alpha's colour map, as the full map's bar gives it
    full = canvas.item_of("weights:0")
    assert canvas.strip[0].colorbar is None and full.colorbar is not None
    assert np.array_equal(canvas.strip[0].image.getColorMap().getLookupTable(nPts=16),
                          full.colorbar.colorMap().getLookupTable(nPts=16))


def test_readers_draw_what_is_left_of_the_frame_first(window, qtbot, monkeypatch):
    """``item_of`` (and every reader for tests and tools) runs the steps left at once."""
    from attn_gui.render import frame_steps

    monkeypatch.setattr(frame_steps, "STEP_S", 0.0)
    config = AttentionConfig(heads=6, d_model=36, d_k=6, d_v=6)
    with qtbot.waitSignal(window.frameShown, timeout=20000):
        window.set_state(window.state.replace(config=config, focus=None))
    canvas = window.canvas
    assert canvas.busy
    with qtbot.waitSignal(canvas.settled, timeout=1000):
        item = canvas.item_of("weights:0")
    assert not canvas.busy and item is not None
    np.testing.assert_allclose(item.image.image, compute(config).numpy("weights")[0], atol=1e-6)

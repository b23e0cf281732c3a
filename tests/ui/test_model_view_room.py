"""The model view after another dock (issue 37's review): a grid laid out while its dock was behind the Why tab
stayed as narrow as the hidden dock (cells of 2.7 px for 5.3, its titles over each other) and at 1920 x 1080
kept a fifth of the height; its axis names give way where they do not fit, as a colour bar's labels do."""

import numpy as np
import pytest
from PySide6 import QtCore, QtGui

from attn_gui.render.model_view import ModelView
from tiny_decoders import SENTENCE  # tests/

L, H, KV, T = 30, 9, 3, 5  # SmolLM2-135M's layers, query heads and K/V heads; "The capital of France is"
DOCK_768 = (1366, 111)  # the model view in a fifth of a 1366 x 768 window
DOCK_1080 = (1920, 390)  # in two fifths of a 1920 x 1080 window


def _show(view: ModelView) -> None:
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(T), size=(L, H, T))  # rows of alpha sum to 1
    view.set_weights(weights, layer=23, head=4, kv_heads=KV, sink=weights[:, :, 1:, 0].mean(-1))


def _cell_px(view: ModelView) -> float:
    return view.cell / view.plot.getViewBox().viewPixelSize()[0]


def _view(qtbot, size) -> ModelView:
    view = ModelView()
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    return view


@pytest.mark.parametrize("size", [DOCK_768, DOCK_1080])
def test_a_grid_laid_out_behind_another_tab_takes_the_whole_view_in_front(qtbot, size):
    """The peer: the same grid laid out at that size from the start. pyqtgraph sized the layout to the view before
    the view widened its plots, and Qt clamped it to their old maximum widths (those of a 100 px hidden dock)."""
    peer = _view(qtbot, size)
    _show(peer)
    qtbot.waitUntil(lambda: peer.ci.size().width() >= size[0] - 2)
    hidden = _view(qtbot, (100, 68))  # a dock's widget behind the Why tab
    _show(hidden)
    hidden.resize(*size)  # brought in front
    qtbot.waitUntil(lambda: hidden.ci.size().width() >= size[0] - 2)
    half = (size[0] - 90) / 2  # the grid and the sink map share the width, less the colour bar (ModelView)
    assert hidden.plot.width() == pytest.approx(half, abs=1) == hidden.sinkPlot.width()
    assert _cell_px(hidden) == pytest.approx(_cell_px(peer), rel=0.01)


def _text_rects(axis) -> list[QtCore.QRectF]:
    """The scene rectangles of the tick texts ``axis`` draws now (pyqtgraph's own draw specs)."""
    picture = QtGui.QPicture()
    painter = QtGui.QPainter(picture)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [axis.mapRectToScene(rect) for rect, _, _ in specs[2]] if specs else []


@pytest.mark.parametrize("size", [DOCK_768, DOCK_1080])
def test_no_axis_name_or_head_label_is_drawn_over_another(qtbot, size):
    view = _view(qtbot, size)
    _show(view)
    left, top, sink_top = view.plot.getAxis("left"), view.plot.getAxis("top"), view.sinkPlot.getAxis("top")
    # laid out: the first head of each K/V group at least is named ("K/V 1 · 1", ...)
    qtbot.waitUntil(lambda: view.ci.size().width() >= size[0] - 2 and len(_text_rects(left)) >= KV)
    ticks = _text_rects(left)
    names = [axis.label.sceneBoundingRect() for axis in (left, top, sink_top)]
    for axis, name in zip((left, top, sink_top), names, strict=True):
        box = axis.sceneBoundingRect()  # drawn whole along its axis, not past it
        if axis is left:
            assert box.top() - 1 <= name.top() and name.bottom() <= box.bottom() + 1, (axis.labelText, name, box)
        else:
            assert box.left() - 1 <= name.left() and name.right() <= box.right() + 1, (axis.labelText, name, box)
    rects = names + ticks
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert not a.intersects(b), (a, b)
    if size == DOCK_1080:  # room for the whole names
        assert (left.labelText, sink_top.labelText) == ("query head, by K/V head",
                                                        "sink mass: mean α on token 1, per layer")
    else:  # the longest name that fits (the view asks for room for 12 px thumbnails: it may be whole)
        assert left.labelText in ("query head, by K/V head", "query head", "head")


@pytest.mark.parametrize("size", [(1366, 768), (1920, 1080)])
def test_the_model_view_gets_its_room_back_after_the_why_dock(window, qtbot, deep_llama, size):
    """``--dock why`` on a model, then the model view brought in front and the Why dock closed."""
    window.resize(*size)
    window.show_dock("why", keep=True)
    assert window.edit_config({"sentence": SENTENCE, "model": deep_llama})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config and not window.canvas.busy,
                    timeout=30000)  # the model view is drawn in the frame's steps (render/canvas.py)
    qtbot.waitUntil(lambda: not window.docks.panels["why"].busy, timeout=30000)
    view = window.modelView
    assert view.across and view.shape == (6, 4)
    window.show_dock("model-view")
    window.docks.docks["why"].close()
    if size[1] >= 1000:  # two fifths asked, as when it comes in front with the model's first frame (it kept a
        # fifth, 174 px); the maps' minimum height leaves it 406 px
        qtbot.waitUntil(lambda: window.modelDock.height() >= size[1] // 3)
    qtbot.waitUntil(lambda: view.ci.size().width() >= view.width() - 2)
    assert view.plot.width() == pytest.approx((view.width() - 90) / 2, abs=1)
    px, py = view.plot.getViewBox().viewPixelSize()
    assert px == pytest.approx(py, rel=0.02)  # square cells
    grid = view.plot.getViewBox().sceneBoundingRect()
    # the grid fills the height it has (aspect locked): 6 layers across, 4 heads (2 K/V groups) down
    rows = view.image.image.shape[0]
    assert rows / py >= 0.9 * grid.height() or view.image.image.shape[1] / px >= 0.9 * grid.width()


MINILM = (6, 12, None, 7)  # MiniLM-L6's layers and heads on "When in doubt look intelligent" ([CLS] ... [SEP])
SMOLLM2 = (L, H, KV, T)


@pytest.mark.parametrize("width", [1366, 1920])
@pytest.mark.parametrize("model", [MINILM, SMOLLM2], ids=["MiniLM", "SmolLM2"])
def test_the_grid_keeps_readable_thumbnails_at_every_dock_height_and_never_overlaps(qtbot, model, width):
    """Issue 47: at the default height MiniLM's thumbnails were 5 px, its head labels "123456789101112"; a taller
    dock ran SmolLM2's 30 x 9 grid under the sink-mass grid. In the dock's scroll area, from a short dock to a
    tall one: thumbnails of 12 px at least (the dock scrolls where they would be smaller), the grid and the sink
    map apart, no number drawn over another."""
    from attn_gui.render.model_view import MIN_THUMB
    from PySide6 import QtWidgets

    layers, heads, kv, t = model
    scroll = QtWidgets.QScrollArea()  # as the window's dock holds it (MainWindow.add_dock)
    qtbot.addWidget(scroll)
    scroll.setWidgetResizable(True)
    view = ModelView()
    scroll.setWidget(view)
    scroll.show()
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(t), size=(layers, heads, t))
    # random weights first, as the window starts: the empty view's message was the grid column's least width
    view.show_empty("every layer's and head's α of a pretrained model shows here: choose one under Model "
                    "(random weights have one layer)")
    view.set_weights(weights, layer=3, head=1, kv_heads=kv, sink=weights[:, :, 1:, 0].mean(-1))
    for height in (110, 230, 450, 700):
        scroll.resize(width, height)
        qtbot.waitUntil(lambda: abs(view.ci.size().width() - view.width()) <= 2)
        qtbot.waitUntil(lambda: view.thumb_px() >= MIN_THUMB - 0.01, timeout=3000)
        if view.height() > scroll.viewport().height():  # short: the dock scrolls rather than shrink them
            qtbot.waitUntil(scroll.verticalScrollBar().isVisible)
        grid = view.image.sceneBoundingRect()
        assert view.plot.getViewBox().sceneBoundingRect().adjusted(-1, -1, 1, 1).contains(grid), height
        if view.across:
            sink = view.sinkImage.sceneBoundingRect()
            assert not grid.intersects(sink) and grid.right() < view.sinkPlot.sceneBoundingRect().left(), height
        for axis in (view.plot.getAxis("left"), view.plot.getAxis("top"), view.sinkPlot.getAxis("top")):
            if not axis.isVisible():
                continue
            rects = _text_rects(axis)
            assert rects, (height, axis.orientation)
            for i, a in enumerate(rects):
                assert not any(a.intersects(b) for b in rects[i + 1:]), (height, axis.orientation,
                                                                           [r.x() for r in rects])


@pytest.mark.parametrize("size", [(390, 340), (1366, 300), (1920, 430)])
def test_the_8bs_32_by_32_heads_keep_their_labels_apart_and_show_the_sink_mass(qtbot, size):
    # issue 62: Llama-3-8B's 32 layers x 32 heads (8 K/V heads) printed "K/V 2 · 5K/V 3 · 9K/V 4 ..." over each
    # other, and its sink mass had no map (only a grid with the layers across had one)
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(T), size=(32, 32, T))
    view = _view(qtbot, size)
    view.set_weights(weights, layer=3, head=4, kv_heads=8, sink=weights[:, :, 1:, 0].mean(-1))
    qtbot.waitUntil(lambda: view.thumb_px() > 0)
    assert view.sinkPlot.isVisible() and not view.across  # layers down, the sink mass beside
    for axis in (view.plot.getAxis("top"), view.plot.getAxis("left"), view.sinkPlot.getAxis("top")):
        rects = sorted(_text_rects(axis), key=lambda r: (r.left(), r.top()))
        assert rects
        for a, b in zip(rects[:-1], rects[1:], strict=True):
            assert not a.intersects(b), (a, b)  # measured as pyqtgraph draws them, with its font

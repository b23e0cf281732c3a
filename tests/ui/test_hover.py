"""The hover read-out: driven by real mouse moves, checked against the computed tensors."""

from PySide6 import QtCore, QtWidgets

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.explain import explain
from attn_gui.render.heatmap import readout_position


def cell_rect(canvas, mid: str, r: int, c: int) -> QtCore.QRect:
    return canvas.mapFromScene(canvas.item_of(mid).cell_scene_rect(r, c)).boundingRect()


def move_to_cell(qtbot, canvas, mid: str, r: int, c: int) -> None:
    canvas.ensureVisible(canvas.item_of(mid))
    qtbot.mouseMove(canvas.viewport(), cell_rect(canvas, mid, r, c).center())


def test_hover_reads_out_the_cell_beside_it_and_stays(window, qtbot):
    view = window.canvas
    alpha = compute(AttentionConfig()).numpy("weights")[0]  # the peer: the tensor itself
    move_to_cell(qtbot, view, "weights:0", 1, 4)
    qtbot.waitUntil(view.readout.isVisible)
    text = view.readout.text()
    assert text.startswith("α[in → intelligent] = ")
    assert abs(float(text.split("= ")[1].split(",")[0]) - alpha[1, 4]) < 1e-5
    origin = view.viewport().mapToGlobal(QtCore.QPoint(0, 0))
    cell = cell_rect(view, "weights:0", 1, 4).translated(origin)
    box = view.readout.geometry()
    assert not box.intersects(cell)  # beside the cell, never on it
    assert abs(box.center().y() - cell.center().y()) <= 1 and min(abs(box.left() - cell.right()),
                                                                 abs(cell.left() - box.right())) < 10
    assert not QtWidgets.QToolTip.isVisible()
    qtbot.wait(1200)  # a tooltip would be gone by now; the read-out stays while the pointer does
    assert view.readout.isVisible() and view.readout.text() == text

    move_to_cell(qtbot, view, "weights:0", 3, 0)
    qtbot.waitUntil(lambda: view.readout.text().startswith("α[look → When]"))
    assert abs(float(view.readout.text().split("= ")[1].split(",")[0]) - alpha[3, 0]) < 1e-5

    corner = view.mapFromScene(view.item_of("weights:0").sceneBoundingRect().topLeft())

    def off_the_cells():  # the map's corner: no cell there (moved again: the offscreen cursor lags at times)
        qtbot.mouseMove(view.viewport(), corner + QtCore.QPoint(2 + off_the_cells.n % 2, 2))
        off_the_cells.n += 1
        return not view.readout.isVisible()

    off_the_cells.n = 0
    qtbot.waitUntil(off_the_cells)


def test_the_read_out_follows_a_new_result_under_a_resting_pointer(window, qtbot):
    view = window.canvas
    move_to_cell(qtbot, view, "scores:0", 0, 0)
    qtbot.waitUntil(view.readout.isVisible)
    window.panel.seedSpin.setValue(7)
    qtbot.waitUntil(lambda: window.frame.result.config.seed == 7)
    expected = compute(AttentionConfig(seed=7)).numpy("scores")[0, 0, 0]
    qtbot.waitUntil(lambda: f"= {expected:.6g}" in view.readout.text())


def test_the_read_out_moves_left_or_above_where_the_screen_ends():
    screen = QtCore.QRect(0, 0, 1000, 800)
    size = QtCore.QSize(200, 20)
    right = readout_position(QtCore.QRect(100, 100, 30, 30), size, screen)
    left = readout_position(QtCore.QRect(900, 100, 30, 30), size, screen)
    assert right.x() > 130 and left.x() + 200 < 900
    narrow = QtCore.QRect(0, 0, 300, 800)
    above = readout_position(QtCore.QRect(120, 100, 30, 30), size, narrow)
    assert above.y() + 20 < 100 and QtCore.QRect(above, size).right() <= 300


def test_each_title_says_what_its_map_is(window):
    for name, field in (("weights:0", "weights"), ("x", "x"), ("w_o", "w_o")):
        view = window.canvas.item_of(name)
        assert view.plot.titleLabel.toolTip() == explain(field, window.frame.result)

"""The first hour, third round (issue 62): what a new user met in the window."""

import gc
import re

import numpy as np
from PySide6 import QtGui, QtWidgets

from attn_gui.engine import AttentionConfig
from attn_gui.present.docks import DOCK_ROWS
from attn_gui.ui.sight import in_sight


def current_tab(window, title: str) -> bool:
    """Whether the dock titled ``title`` is the current tab of its tab group (a dock alone has no tab bar)."""
    for bar in window.findChildren(QtWidgets.QTabBar):
        titles = [bar.tabText(i) for i in range(bar.count())]
        if title in titles and bar.isVisible():
            return bar.tabText(bar.currentIndex()) == title
    return False


def test_a_view_entry_brings_its_tabified_dock_in_front_and_never_hides_it(window, qtbot):
    actions = {a.text(): a for a in window.menus.view.actions()}
    for row in DOCK_ROWS:
        assert row.title in actions, row.title  # every dock is listed, Circuit and Lessons included
    for name in ("interventions", "circuit", "train", "metrics", "walk", "lessons"):
        title = next(r.title for r in DOCK_ROWS if r.name == name)
        for _ in range(2):  # Qt's toggle hid the dock at the first click and showed it behind at the second
            actions[title].trigger()
            dock = window.docks.dock(name)
            qtbot.waitUntil(lambda dock=dock: in_sight(dock), timeout=5000)
            assert dock.isVisible() and current_tab(window, title), (name, title)


def ink(canvas, item) -> int:
    """How many pixels of scene ``item``'s rectangle, as the canvas paints it now, differ from the rectangle's
    most common colour (its background): 0 for a blank title."""
    rect = canvas.mapFromScene(item.sceneBoundingRect()).boundingRect()
    assert canvas.viewport().rect().contains(rect), rect  # wholly in view: its pixels are all painted
    image = canvas.viewport().grab(rect).toImage().convertToFormat(QtGui.QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint32, image.sizeInBytes() // 4)
    values, counts = np.unique(pixels, return_counts=True)
    return int((pixels != values[counts.argmax()]).sum())


def test_titles_and_the_strips_labels_are_drawn_after_each_keystroke(window, qtbot, drawn):
    # with 4 heads the strip's "head 1 ▾" and α's title were blank after typing: Qt's device cache drew the
    # title clipped to an area too large for its integer rectangles (read here as pixels, not as label objects)
    config = AttentionConfig(heads=4, d_model=64)
    window.resize(1366, 768)
    window.set_state(window.state.replace(config=config, focus=None))
    qtbot.waitUntil(lambda: window.frame.result.config == config, timeout=20000)
    canvas = window.canvas
    qtbot.waitUntil(lambda: canvas._planned_for == canvas.viewport().size().toTuple())
    drawn(window)
    box = window.panel.sentenceInput
    box.moveCursor(box.textCursor().MoveOperation.End)
    typed = ""
    for ch in " today and the big dog":
        typed += ch
        qtbot.keyClicks(box, ch)
        qtbot.waitUntil(lambda typed=typed: window.frame.result.config.sentence.endswith(typed), timeout=20000)
        drawn(window)
        titles = [canvas.item_of("weights:0"), *canvas.strip[:4]]
        blank = [item.name for item in titles if ink(canvas, item.plot.titleLabel.item) < 20]
        assert not blank, (typed, blank)


def test_a_lesson_in_progress_stays_in_front_of_the_walk_and_the_model_view(window, qtbot, deep_llama):
    # Help → Lessons from a model: the lesson's random weights raised the walk over it; a model opened during a
    # lesson (lesson 7's "Open in the explorer") raised the model view over it
    assert window.edit_config({"model": deep_llama, "sentence": "the cat sat on a mat"})
    qtbot.waitUntil(lambda: window.frame.result.config.model == deep_llama and in_sight(window.modelDock),
                    timeout=30000)
    window.menus.lessons.trigger()
    qtbot.waitUntil(lambda: window.frame.result.config.model is None and not window.canvas.busy, timeout=30000)
    dock = window.lessonsDock
    assert in_sight(dock) and current_tab(window, "Lessons") and not in_sight(window.focusDock)
    window.docks.show_dock("train")  # the learner goes to the Train dock, as lesson 7's step 2 says
    assert window.edit_config({"model": deep_llama})  # and opens the trained model in the explorer
    qtbot.waitUntil(lambda: window.frame.result.config.model == deep_llama and not window.canvas.busy,
                    timeout=30000)
    assert in_sight(dock) and current_tab(window, "Lessons") and not in_sight(window.modelDock)


def test_every_view_item_a_lesson_names_is_in_the_view_menu(window):
    # lesson 7 said "View → Train" (Qt's toggle hid the tab) and "View → Circuit"; every one is an entry that
    # brings its dock in front
    from attn_gui.present.lessons import lesson_names, load_lesson

    titles = {a.text() for a in window.menus.view.actions()}
    named = set()
    for name in lesson_names():
        lesson = load_lesson(name)
        for step in lesson.steps:
            text = step.text + (" " + step.action.ask if step.action is not None else "")
            named |= set(re.findall(r"View → ([A-Z][\w ]*?)\)", text))
    assert {"Train", "Circuit"} <= named and named <= titles, named - titles


def test_a_first_start_at_1366_shows_the_walks_table_and_the_whole_model_name(qtbot, settings):
    # the walk opened 127 px tall, its table's header cut; the Source combo read "random weights (" beside Open…
    from attn_gui.present.state import ViewState
    from attn_gui.ui import MainWindow

    win = MainWindow(ViewState(focus="weights"), settings=settings)  # no saved settings: a first start
    qtbot.addWidget(win)
    win.resize(1366, 768)
    with qtbot.waitExposed(win):
        win.show()
    qtbot.waitUntil(lambda: win.frame is not None, timeout=30000)
    walk = win.docks.panel("walk")
    header = walk.document().find("term by term")  # the scores table's header row
    assert not header.isNull()
    qtbot.waitUntil(lambda: win.focusDock.height() <= 768 // 5 + 40)  # its first size (MainWindow._restore)
    qtbot.waitUntil(lambda: win.canvas._planned_for == win.canvas.viewport().size().toTuple())  # laid out
    assert walk.cursorRect(header).bottom() <= walk.viewport().height(), (walk.cursorRect(header), walk.height())
    combo = win.panel.sourceCombo
    field = combo.style().subControlRect(QtWidgets.QStyle.ComplexControl.CC_ComboBox, _combo_option(combo),
                                         QtWidgets.QStyle.SubControl.SC_ComboBoxEditField, combo)
    for i in range(combo.count()):  # every bundled model's name and random weights, whole in the field
        assert combo.fontMetrics().horizontalAdvance(combo.itemText(i)) <= field.width(), combo.itemText(i)
    win.service.shutdown()
    win.close()
    gc.collect()  # its Qt wrappers die here, on the main thread (tests/ui/conftest.py's window does the same)


def _combo_option(combo) -> QtWidgets.QStyleOptionComboBox:
    option = QtWidgets.QStyleOptionComboBox()
    option.initFrom(combo)
    return option


def test_the_faithfulness_curves_k_labels_never_run_together(qtbot):
    # SmolLM2's curve in the dock read "2000500010000200005000070651": every k labelled 29 px apart
    from attn_gui.engine.analysis.circuits.scores import Faithfulness
    from attn_gui.present.circuits import faithfulness_svg

    ks = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 70651)  # 70,651 edges
    curve = Faithfulness(ks, tuple(np.linspace(0.0, 1.0, len(ks))), clean=1.0, corrupt=0.0)
    for width in (520, 800):
        svg = faithfulness_svg(curve, width, 240)
        labels = re.findall(r'<text x="([\d.]+)" y="206" text-anchor="middle" font-size="10">(\d+)</text>', svg)
        font = QtGui.QFont("DejaVu Sans")
        font.setPixelSize(10)  # the picture's font-size 10, in its own pixels
        metrics = QtGui.QFontMetricsF(font)
        placed = [(float(x), metrics.horizontalAdvance(text)) for x, text in labels]
        assert len(placed) >= 3 and labels[0][1] == "1"
        for (x0, w0), (x1, w1) in zip(placed[:-1], placed[1:], strict=True):  # centred: half of each apart, and a gap
            assert x1 - x0 >= (w0 + w1) / 2 + 2, (width, labels)


def test_a_30_layer_circuit_graph_keeps_its_nodes_and_labels_apart_in_the_dock(qtbot, tmp_path):
    # SmolLM2's 30 x 9 heads drawn into the dock's 797 x 302 px ran into solid columns, labels overprinted
    from attn_gui.engine.analysis.circuits import circuit
    from attn_gui.present.circuits import layout, node_radius, to_pixels
    from attn_gui.ui.docks.circuit import CircuitPanel
    from tiny_decoders import circuit_pairs, tiny_decoder  # tests/

    tiny_decoder("llama", tmp_path, layers=30)  # SmolLM2's 30 layers (of 4 heads)
    found = circuit(str(tmp_path), circuit_pairs(tmp_path), "eap", pairs=1, faithful=False)
    panel = CircuitPanel()
    qtbot.addWidget(panel)
    panel.resize(797, 302)
    panel.show()
    panel.show_circuit(found)
    g, graph = found.graph, panel.graph
    assert (g.layers, g.heads) == (30, 4)
    qtbot.waitUntil(lambda: graph.height() > 1000)  # laid out at its own size, in the scroll area
    point, unit = to_pixels(layout(g), graph.width(), graph.height())
    r = node_radius(unit)
    font = QtGui.QFont("DejaVu Sans")
    font.setPixelSize(10)  # the picture's labels, font-size 10
    label = max(QtGui.QFontMetricsF(font).horizontalAdvance(name) for name in g.writer_names)
    x0, y0 = point(*layout(g).writers[g.head(29, 0)])
    x1, _ = point(*layout(g).writers[g.head(29, 1)])
    _, y1 = point(*layout(g).writers[g.head(28, 0)])
    assert x1 - x0 >= 2 * r + 3 + label  # a head, its label, the next head: apart
    assert y1 - y0 >= 2 * r + 4  # one layer's heads clear of the next's
    assert panel.graphScroll.verticalScrollBar().maximum() > 0  # the view scrolls over the rest
    panel.shutdown()

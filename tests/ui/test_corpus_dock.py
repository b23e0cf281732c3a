"""The Corpus dock: a census folder written by the engine shows as the layer x head grid of each
statistic (the values of heads.parquet), a clicked head lists its examples best first, and a
double-clicked example opens its passage in the explorer at that layer, head and query."""

import functools

import numpy as np
import pytest
from PySide6 import QtCore

from attn_gui.engine.analysis.corpus.stats import STATS
from attn_gui.engine.analysis.corpus.shards import Settings
from attn_gui.engine.analysis.corpus.census import census as run_census, run_in_process
from attn_gui.engine.analysis.corpus.read import read_corpus
from attn_gui.engine.analysis.corpus.outputs import read_heads
from corpus_data import llama_folder, sentences  # tests/


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    folder = tmp_path_factory.mktemp("census")
    llama_folder(folder / "model")
    (folder / "corpus.txt").write_text("\n".join(sentences(40)))
    run_census(read_corpus(folder / "corpus.txt"), folder / "out", Settings(model=str(folder / "model")),
               runner=functools.partial(run_in_process, threads=1))
    return folder


def test_the_dock_shows_each_statistic_and_opens_an_example(window, qtbot, census):
    panel = window.docks.panels["corpus"]
    assert window.show_dock("corpus") is window.docks.docks["corpus"]
    assert window.docks.entries["corpus"] in window.menus.view.actions()
    assert panel.load(census / "out")
    heads = read_heads(census / "out")
    assert [panel.statistic.itemText(i) for i in range(panel.statistic.count())] == [*STATS, "dla"]
    panel.statistic.setCurrentText("dla")  # signed: a diverging map centred on 0
    assert panel.grid.item.data.kind == "signed" and panel.grid.item.data.scale == "auto"
    assert "rows i &lt;= T-1<br>" in panel.about.text()  # the definition escaped: its "<" starts no tag
    np.testing.assert_array_equal(panel.grid.item.data.matrix, heads["dla"])
    panel.statistic.setCurrentText("induction")
    np.testing.assert_array_equal(panel.grid.item.data.matrix, heads["induction"])
    panel.pick(1, 2)  # layer 2, head 3
    rows = panel.shown_examples()
    assert [e["rank"] for e in rows] == [1, 2, 3, 4, 5] and panel.table.rowCount() == 5
    assert all(e["statistic"] == "induction" and (e["layer"], e["head"]) == (2, 3) for e in rows)
    assert panel.table.item(0, 3).text() == rows[0]["text"]
    assert panel.pickedLabel.text().startswith("<b>layer 2, head 3</b>")
    with qtbot.waitSignal(panel.exampleOpened) as opened:
        panel.table.cellDoubleClicked.emit(0, 0)
    model, text, layer, head, query = opened.args
    assert (model, text, layer, head, query) == (str(census / "model"), rows[0]["text"], 1, 2, rows[0]["query"] - 1)
    qtbot.waitUntil(lambda: window.frame is not None and window.frame.result.config.sentence == text, timeout=30000)
    state = window.state
    assert (state.config.model, state.config.layer, state.head, state.token) == (model, 1, 2, query)


def test_a_folder_without_a_census_is_said_in_the_dock(window, census, tmp_path):
    panel = window.docks.panels["corpus"]
    assert panel.load(census / "out")
    assert not panel.load(tmp_path)
    assert "holds no finished census" in panel.about.text() and panel.folder == census / "out"


def test_with_no_census_the_dock_says_what_to_do_and_draws_no_colour_bar(window, qtbot, census):
    """An empty dock drew an empty map's colour bar, an empty table and "click a head in the grid"."""
    panel = window.docks.panels["corpus"]
    window.resize(1366, 768)
    window.show_dock("corpus")
    qtbot.waitUntil(lambda: panel.openButton.isVisible())
    assert "No census open" in panel.about.text() and panel.about.isVisible()
    assert "attn-gui corpus --model" in panel.about.text() and "Open census…" in panel.about.text()
    bar = panel.grid.item.colorbar
    assert not bar.isVisible() and not panel.grid.isVisible()
    assert not any(w.isVisible() for w in (panel.statistic, panel.pickedLabel, panel.table))
    assert panel.load(census / "out")
    qtbot.waitUntil(lambda: panel.grid.isVisible() and bar.isVisible() and len(bar.axis.labels()) >= 2)
    assert panel.statistic.isVisible() and panel.table.isVisible() and "No census" not in panel.about.text()
    assert min(bar.axis.geometry().width(), bar.axis.maximumWidth()) > 0  # its labels have room


def test_the_grid_labels_every_layer_beside_its_row_in_a_short_dock(window, qtbot, census):
    """Issue 47: at 1366 x 768 the grid's rows were 4.7 px, a label every three layers, the brightest cell (layer
    17) read beside "layer 16". Each row is now tall enough for its label, drawn at the row's centre; the dock
    scrolls."""
    window.resize(1366, 768)
    panel = window.docks.panels["corpus"]
    window.show_dock("corpus")
    assert panel.load(census / "out")
    panel.heads["induction"] = np.linspace(0, 0.83, 30 * 9).reshape(30, 9)  # SmolLM2's 30 x 9 grid
    panel.statistic.setCurrentText("induction")
    panel._show()
    item = panel.grid.item
    layers = item.data.matrix.shape[0]
    qtbot.waitUntil(lambda: item.rowAxis.drawn == [f"layer {i + 1}" for i in range(layers)])
    cell = item.cell_scene_rect(0, 0)
    assert cell.height() >= item.rowAxis._metrics.height() + 1
    for row in range(layers):  # each label's centre on its row's: read off the axis's own ticks
        centre = item.cell_scene_rect(row, 0).center().y()
        tick = item.rowAxis.mapToScene(QtCore.QPointF(0, item.rowAxis._along(row))).y()
        assert abs(tick - centre) <= 1, (row, tick, centre)

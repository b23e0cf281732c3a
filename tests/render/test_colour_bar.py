"""A colour bar's tick labels give way on a short bar: none is drawn over another, the ends come first."""

import itertools

import pytest

from attn_gui.render.axes import give_way

TEXT_H = 15.0  # a tick label's line at the default 9 to 10 pt font


def ticks(n, lo=-1.0, hi=1.0):
    return [(lo + (hi - lo) * i / (n - 1), f"{lo + (hi - lo) * i / (n - 1):g}") for i in range(n)]


def test_a_tall_bar_keeps_every_label_centred_on_its_tick():
    drawn = give_way(ticks(5), -1.0, 1.0, 300.0, TEXT_H)
    assert [text for _, text, _ in drawn] == ["-1", "-0.5", "0", "0.5", "1"]
    tops = {text: top for _, text, top in drawn}
    assert tops["0"] == 150.0 - TEXT_H / 2 and tops["0.5"] == 75.0 - TEXT_H / 2  # y = h (hi - v) / (hi - lo)
    assert tops["1"] == 0.0 and tops["-1"] == 300.0 - TEXT_H  # the ends inside the bar


@pytest.mark.parametrize("height", [15.0, 20.0, 29.0, 31.0, 40.0, 46.0, 60.0, 80.0, 120.0])
@pytest.mark.parametrize("n", [3, 5])
def test_a_short_bar_draws_no_label_over_another(height, n):
    drawn = give_way(ticks(n), -1.0, 1.0, height, TEXT_H)
    assert drawn, "at least one label where one line fits"
    for (_, a, top_a), (_, b, top_b) in itertools.combinations(drawn, 2):
        assert top_a + TEXT_H <= top_b or top_b + TEXT_H <= top_a, (a, b, height)
    assert all(0.0 <= top <= height - TEXT_H for _, _, top in drawn)
    texts = [text for _, text, _ in drawn]
    assert texts[-1] == "1"  # the highest value keeps its label first
    if height >= 2 * TEXT_H:
        assert texts[0] == "-1"  # then the lowest
    if height >= 3 * TEXT_H + 2 and n == 3:
        assert texts == ["-1", "0", "1"]  # room for all three


def test_a_bar_lower_than_a_line_has_no_label():
    assert give_way(ticks(3), 0.0, 1.0, TEXT_H - 1, TEXT_H) == []


def test_a_map_has_a_colour_bar_only_with_numbers_and_room_for_its_labels(qtbot):
    """No map (an empty dock) or a map of no number: no bar. pyqtgraph sized a hidden bar's value axis 0 px wide
    and never again, so a bar shown after that drew its ticks with no label."""
    import numpy as np
    from PySide6 import QtGui

    from attn_gui.present.maps import MapData
    from attn_gui.render.heatmap import HeatmapView

    view = HeatmapView("bar")
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    bar = view.item.colorbar
    assert not bar.isVisible()
    labels = ["a", "b", "c"]
    view.set_data(MapData(np.full((3, 3), np.nan), "not captured", "weights", labels, labels))
    assert not bar.isVisible()
    view.set_data(MapData(np.linspace(-1.5, 1.5, 9).reshape(3, 3), "signed", "signed", labels, labels))
    assert bar.isVisible()
    axis = bar.axis
    qtbot.waitUntil(lambda: len(axis.labels()) >= 3)
    metrics = QtGui.QFontMetricsF(axis.style["tickFont"])
    widest = max(metrics.horizontalAdvance(text) for _, text, _ in axis.labels())
    room = min(axis.geometry().width(), axis.maximumWidth())  # now, and once the layout runs again
    assert room >= widest + 6  # the tick (4 px) and its gap (2 px), then the text

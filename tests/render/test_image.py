"""LutImage colours a matrix exactly as pyqtgraph's ImageItem does, pixel for pixel."""

import numpy as np
import pyqtgraph as pg
import pytest

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import map_data
from attn_gui.render.heatmap import HeatmapView
from attn_gui.render.image import LutImage
from attn_gui.render.offscreen import ensure_app
from attn_gui.render.style import SIGNED_CMAP, WEIGHTS_CMAP


def _argb(item):
    item.render()
    return item.qimage.convertToFormat(item.qimage.Format.Format_ARGB32)


@pytest.mark.parametrize("shape", [(5, 5), (5, 3), (7, 13), (64, 64), (3, 1)])
@pytest.mark.parametrize("cmap", [SIGNED_CMAP, WEIGHTS_CMAP])
@pytest.mark.parametrize("transposed", [False, True])  # W shown in the other layout is a transposed view
def test_lut_image_equals_pyqtgraphs_rendering(shape, cmap, transposed):
    ensure_app()
    m = np.random.default_rng(sum(shape)).normal(size=shape).astype(np.float32)
    if transposed:
        m = np.asfortranarray(m)  # the same values, column-major in memory
        assert not m.flags.c_contiguous or 1 in shape
    m[0, 0] = 5.0  # beyond the levels: clipped to the table's ends as pyqtgraph clips
    lut = pg.colormap.get(cmap).getLookupTable(nPts=256)
    ours, theirs = LutImage(axisOrder="row-major"), pg.ImageItem(axisOrder="row-major")
    for item in (ours, theirs):
        item.setImage(m, autoLevels=False, levels=(-2, 2))
        item.setLookupTable(lut)
    assert _argb(ours) == _argb(theirs)
    np.testing.assert_array_equal(ours.image, m)  # the item still holds the values shown


def test_a_maps_image_renders_through_the_cached_table():
    ensure_app()
    view = HeatmapView("x")
    view.set_data(map_data(make_frame(0, compute(AttentionConfig())), "weights", 0))
    calls = []
    original = pg.ImageItem.render
    pg.ImageItem.render = lambda self: calls.append(self) or original(self)
    try:
        view.image.render()
    finally:
        pg.ImageItem.render = original
    assert calls == [] and view.image.qimage.format() == view.image.qimage.Format.Format_Indexed8

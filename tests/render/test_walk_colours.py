"""The walk's alpha bars in alpha's colours (issue 62, item 12: every bar was dark purple whatever its value)."""

import re

import numpy as np
import pyqtgraph as pg

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.walk import walk_html
from attn_gui.render.style import WEIGHTS_CMAP


def test_each_alpha_bar_has_the_colour_its_value_has_on_the_maps():
    result = compute(AttentionConfig(sentence="the animal did not cross the street because it was too tired"))
    page = walk_html(result, 1, 0)
    bars = re.findall(r"<td align=right>([0-9.]+) <span style='background:#([0-9a-f]{6})'>", page)
    assert len(bars) == len(result.key_tokens)
    alpha = np.array([float(a) for a, _ in bars])
    got = np.array([[int(c[k:k + 2], 16) for k in (0, 2, 4)] for _, c in bars])
    peer = pg.colormap.get(WEIGHTS_CMAP).map(alpha, mode="byte")[:, :3]  # the colour the maps give each value
    assert np.abs(got - peer.astype(int)).max() <= 3, (got, peer)
    assert len({c for _, c in bars}) > 1  # not one colour whatever the value

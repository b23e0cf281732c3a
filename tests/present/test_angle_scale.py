"""RoPE's θ map is drawn on 0 to its max (issue 62: a signed ±4 scale, half of it never used, for angles that are
never negative)."""

import numpy as np
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import map_data
from attn_gui.present.scales import colour_scale


def test_rope_angles_are_drawn_from_0_to_their_max():
    config = AttentionConfig(positional="rope", d_k=4)
    result = compute(config)
    data = map_data(make_frame(0, result), "rope_angles", 0)
    T, pairs = data.matrix.shape
    # RoFormer (Su et al. 2021, eq. 15): θ_i = base^(−2i/d), the angle of pair i at position p is p θ_i
    theta = 10000.0 ** (-2 * torch.arange(pairs, dtype=torch.float64) / 4)
    expected = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    np.testing.assert_allclose(data.matrix, expected.numpy(), rtol=1e-5, atol=1e-6)
    scale = colour_scale(data.matrix, data.kind, data.scale)
    assert data.kind == "angle" and scale.levels[0] == 0.0  # never negative: no half of the scale unused
    assert data.matrix.max() <= scale.levels[1] < 2 * data.matrix.max()
    row = colour_scale(data.matrix, data.kind, "row")
    assert row.levels == (0.0, 1.0) and "0 to its max" in row.note

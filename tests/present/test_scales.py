"""Colour scales: what a map's colours span in each mode, against the formulas written out with torch."""

import numpy as np
import pytest
import torch

from attn_gui.engine import AttentionConfig, UserError
from attn_gui.present.scales import colour_scale, scale_choices
from attn_gui.present.state import ViewState


def softmax_rows(T: int, seed: int = 0) -> np.ndarray:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(T, T, generator=g) * 0.5, dim=-1).numpy()


def test_fixed_is_zero_to_one_even_for_faint_weights():
    alpha = softmax_rows(700)
    scale = colour_scale(alpha, "weights", "fixed")
    assert scale.levels == (0.0, 1.0) and scale.note == ""
    np.testing.assert_array_equal(scale.image, alpha)


def test_auto_spans_faint_weights_to_their_max_and_says_why():
    alpha = softmax_rows(700)
    scale = colour_scale(alpha, "weights")
    top = alpha.max()
    assert top < 0.1 and top <= scale.levels[1] <= 1.5 * top and scale.levels[0] == 0
    assert scale.note.startswith(f"mean α = 1/T = {1 / 700:.2g}; colour scale 0 to max")
    assert colour_scale(alpha, "weights", faint=False).levels == (0.0, 1.0)  # a thumbnail keeps 0 to 1
    assert colour_scale(softmax_rows(5), "weights").levels == (0.0, 1.0)  # a short input: the fixed scale


def test_max_spans_the_maps_max_at_any_length():
    alpha = softmax_rows(5)
    scale = colour_scale(alpha, "weights", "max")
    assert alpha.max() <= scale.levels[1] <= 1.5 * alpha.max() and "0 to max" in scale.note


def test_per_row_divides_each_row_by_its_max():
    alpha = softmax_rows(9, seed=3)
    scale = colour_scale(alpha, "weights", "row")
    expected = alpha / torch.from_numpy(alpha).amax(dim=1, keepdim=True).numpy()
    np.testing.assert_allclose(scale.image, expected, rtol=1e-6)
    assert scale.levels == (0.0, 1.0) and scale.per_row and "each row" in scale.note
    assert [label for _, label in scale.ticks(3)] == ["0", "0.5", "max"]


def test_per_row_of_masked_scores_uses_each_rows_largest_magnitude():
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(6, 6, generator=g) * 4
    scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))  # causal
    scale = colour_scale(scores.numpy(), "signed", "row")
    finite = torch.where(torch.isfinite(scores), scores, torch.zeros(()))
    expected = finite / finite.abs().amax(dim=1, keepdim=True)
    np.testing.assert_allclose(scale.image, expected.numpy(), rtol=1e-6)
    assert scale.levels == (-1.0, 1.0)
    assert np.abs(scale.image).max(axis=1) == pytest.approx(np.ones(6))


def test_signed_auto_is_centred_on_zero():
    m = np.array([[-3.2, 0.5], [1.0, 2.0]], dtype=np.float32)
    lo, hi = colour_scale(m, "signed").levels
    assert lo == -hi and hi >= 3.2


def test_tick_labels_stay_short():
    alpha = softmax_rows(700)
    scale = colour_scale(alpha, "weights", "max")
    for n in (3, 5):
        assert all(len(label.lstrip("-")) <= 6 for _, label in scale.ticks(n)), scale.ticks(n)


def test_the_view_state_keeps_one_scale_per_map_and_round_trips():
    state = ViewState().with_scale("weights", "row").with_scale("scores", "row")
    assert state.scales == (("scores", "row"), ("weights", "row"))
    assert state.scale_of("weights") == "row" and state.scale_of("q") == "auto"
    assert ViewState.from_dict(state.to_dict()) == state
    assert state.with_scale("weights", "auto").scales == (("scores", "row"),)


@pytest.mark.parametrize("scales", [{"nope": "row"}, {"scores": "fixed"}, {"weights": "sideways"}, ["weights"],
                                    {"weights": 3}])
def test_a_bad_scale_is_refused(scales):
    with pytest.raises(UserError):
        ViewState.from_dict({"config": AttentionConfig().to_dict(), "scales": scales})


def test_every_kind_offers_its_modes():
    assert scale_choices("weights") == ("auto", "fixed", "max", "row")
    assert scale_choices("signed") == ("auto", "row")

"""The status bar's account of what a result holds: α whole, or (streamed) only pooled for the screen."""

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import DISPLAY_MAX, held_text


def test_the_status_says_alpha_is_held_pooled_when_streamed():
    cfg = AttentionConfig(sentence=" ".join(f"w{i % 40}" for i in range(400)), d_model=16, d_k=8, d_v=8, heads=2)
    streamed, full = compute(cfg, display_max=DISPLAY_MAX), compute(cfg)
    assert streamed.streamed and streamed.weights is None
    h, rows, cols = streamed.shown["weights"].shape  # what is held: the pooled α
    assert (h, rows, cols) == (2, DISPLAY_MAX, DISPLAY_MAX) and full.weights.shape == (2, 400, 400)
    assert held_text(streamed) == f"X 400×16, alpha 2×{DISPLAY_MAX}×{DISPLAY_MAX} pooled from 400×400"
    assert held_text(full) == "X 400×16, alpha 2×400×400"  # the whole α, as full.weights holds it

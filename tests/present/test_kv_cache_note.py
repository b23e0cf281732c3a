"""A decode step slower than the recompute says why (issue 47): on a busy machine 333 ms against 266 ms read as
the cache being slower, without a word."""

import numpy as np

from attn_gui.present.kv_cache import CacheStep


def step(elapsed_ms: float, recompute_ms: float) -> CacheStep:
    empty = np.zeros((1, 1, 7))
    return CacheStep(2, ("The", "␣capital", "␣of", "␣France", "␣is", "␣Paris", "."), 0.68, empty, empty[..., None],
                     empty[..., None], elapsed_ms, recompute_ms)


def test_a_slower_step_says_why_and_a_faster_one_says_nothing_more():
    slower = step(333, 266).describe()
    assert "333 ms (a full recompute of 7: 266 ms)" in slower
    assert "Slower than the recompute this time" in slower and "grows with the text" in slower
    assert "Slower" not in step(120, 500).describe()

"""The default init ("auto"): the tutorials' torch.rand at their sizes, normal / sqrt(fan_in) above,
so a multi-head config at d_model 64 keeps α soft instead of reading like an argmax."""

import math

import pytest
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.config.config import AUTO_UNIFORM_MAX

SENTENCE = "the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat today"


def test_the_default_config_draws_the_tutorials_uniform_weights():
    # the explorer's start (d_model 5, d_k = d_v = 3, one head) is unchanged: the same numbers as init "uniform"
    auto, uniform = compute(AttentionConfig()), compute(AttentionConfig(init="uniform"))
    assert AttentionConfig().init == "auto" and AttentionConfig().d_model <= AUTO_UNIFORM_MAX
    for name in ("w_q", "w_k", "w_v", "w_o", "weights", "output"):
        assert torch.equal(getattr(auto, name), getattr(uniform, name)), name


@pytest.mark.parametrize("d_model, heads", [(16, 4), (64, 4), (256, 8)])
def test_above_the_tutorial_sizes_auto_is_normal_over_sqrt_fan_in_and_stays_soft(d_model, heads):
    config = AttentionConfig(sentence=SENTENCE, d_model=d_model, d_k=d_model // heads, d_v=d_model // heads,
                             heads=heads, seed=3)
    r = compute(config)
    # the draw itself, against torch: stable inputs give the weights a generator seeded by the seed
    gen = torch.Generator().manual_seed(3)
    w_q = torch.randn((heads, d_model, d_model // heads), generator=gen) / math.sqrt(d_model)
    assert torch.equal(r.w_q, w_q)
    one_hot = float((r.weights.max(-1).values > 0.95).float().mean())
    uniform = compute(config.replace(init="uniform"))
    assert one_hot <= 0.05 < float((uniform.weights.max(-1).values > 0.95).float().mean())

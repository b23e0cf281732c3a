"""``attend``'s options as one frozen record and its result as typed groups (issue 37): every grouped field of
``AttentionResult`` reads the group that produced it, a group is None exactly where nothing produced it, and
``attend_summarised`` refuses the options it does not compute instead of ignoring them."""

import dataclasses

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttendOptions, AttentionConfig, Projections, Stream, compute
from attn_gui.engine.kernel.types import Relative
from attn_gui.engine.kernel.attend import attend
from attn_gui.engine.kernel.blocks import attend_summarised
from attn_gui.engine.run.fields import FIELDS

CONFIGS = {
    "plain": AttentionConfig(),
    "rope": AttentionConfig(positional="rope", d_k=4, heads=2, d_model=8),
    "alibi": AttentionConfig(positional="alibi", heads=2, d_model=8, causal=True),
    "cross with biases": AttentionConfig(source_sentence="le chat était assis", bias=True),
    "no projections": AttentionConfig(projections=False),
}
PRODUCES = {  # the groups each config's computation fills; every other is None
    "plain": {"projections"},
    "rope": {"projections", "rope"},
    "alibi": {"projections", "positions"},
    "cross with biases": {"projections", "cross"},
    "no projections": set(),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_grouped_field_reads_its_group(name):
    result = compute(CONFIGS[name])
    for field, info in FIELDS.items():
        if not info.kept:
            continue
        group, attribute = info.kept.split(".")
        kept = getattr(result, group)
        assert getattr(result, field) is (None if kept is None else getattr(kept, attribute)), field
    filled = {f for f, info in FIELDS.items() if info.kept and getattr(result, f) is not None}
    assert {FIELDS[f].kept.split(".")[0] for f in filled} == PRODUCES[name]
    assert (result.cross is None) == (result.source_tokens is None) == (name != "cross with biases")
    assert result.model_run is None and result.layer_weights is None and result.not_captured == ()


def test_the_options_are_one_frozen_record():
    options = AttendOptions(causal=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.causal = False
    assert options.replace(window=3) == AttendOptions(causal=True, window=3) and options.window is None
    cfg = AttentionConfig(positional="alibi", causal=True, window=4, sink_tokens=1, temperature=2.0, position_offset=3)
    assert plan(cfg).shown == AttendOptions(causal=True, window=4, sink_tokens=1, temperature=2.0, alibi=True,
                                            position_offset=3)


@pytest.mark.parametrize("change", [dict(causal=False), dict(alibi=True), dict(softcap=30.0), dict(position_offset=2),
                                    dict(relative=Relative(None, None, None))])
def test_attend_summarised_refuses_what_it_does_not_compute(change):
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(6, 8, generator=g), Projections(*(torch.randn(2, 4, 8, generator=g) for _ in range(3)),
                                                      torch.randn(8, 8, generator=g))
    causal = AttendOptions(layout="column", causal=True)
    kept = attend_summarised(x, w, causal, Stream(4, 2**20))  # a decoder's own options run
    assert kept.pooled is not None and kept.weights is None
    assert torch.allclose(kept.output, attend(x, w, causal).output, atol=1e-6)
    with pytest.raises(ValueError, match="causal attention only"):
        attend_summarised(x, w, causal.replace(**change), Stream(4, 2**20))


@pytest.mark.parametrize("change", [dict(similarity="cosine"), dict(window=2, sink_tokens=1), dict(scale=False),
                                    dict(temperature=2.0, layer_scale=3.0), dict(scale_dim=64.0)])
def test_attend_summarised_computes_the_what_ifs_as_attend_does(change):
    """A what-if of a model's forward (``engine.plan``) streamed: every option the score function takes gives the
    same z and output as ``attend``'s full T x T path (the reference: its own softmax over every key)."""
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(9, 8, generator=g), Projections(*(torch.randn(2, 4, 8, generator=g) for _ in range(3)),
                                                      torch.randn(8, 8, generator=g))
    options = AttendOptions(layout="column", causal=True, **change)
    kept = attend_summarised(x, w, options, Stream(4, 64))  # blocks of a few rows: the scores go block by block
    full = attend(x, w, options)
    assert torch.allclose(kept.head_outputs, full.head_outputs, atol=1e-6)
    assert torch.allclose(kept.pooled.last_row, full.weights[:, -1], atol=1e-6)

"""Options declared once (issue 44): each option says what a model's forward makes of it, and the model-mode
behaviour is derived from that, never listed twice: a what-if option changes every layer of the plan (and is named
in it); at its neutral value it changes nothing; a random-weights-only option is inert in model mode."""

import pytest

from attn_gui.engine import AttentionConfig, OPTIONS, compute
from attn_gui.engine.config.config import WHAT_IF
from attn_gui.engine.config.options import IN_MODEL, MODEL
from attn_gui.engine.model.plan import plan

MODEL_NAME = "smollm2-135m"
# a value of each what-if option that changes SmolLM2's forward (a decoder: causal already, no window of its own)
CHANGED = dict(scale=False, temperature=2.0, similarity="cosine", window=3, sink_tokens=1, causal=True)


def test_every_option_declares_what_a_model_makes_of_it():
    for name, opt in OPTIONS.items():
        assert opt.model in IN_MODEL, name
        assert (opt.model == "inert") == (MODEL not in opt.modes), name  # random-only options: inert with a model
        assert opt.neutral == opt.default, name
    assert set(WHAT_IF) == {n for n, o in OPTIONS.items() if o.model == "what-if"} == set(CHANGED)


@pytest.mark.parametrize("name", [n for n in WHAT_IF if n != "causal"])
def test_a_what_if_option_changes_every_layer_and_is_named(name):
    changes = {name: CHANGED[name], **({"window": 3} if name == "sink_tokens" else {})}
    p = plan(AttentionConfig(model=MODEL_NAME, **changes))
    assert name in p.what_if
    assert all(mine != own for mine, own in zip(p.layers, p.own, strict=True))  # every layer of the forward
    neutral = plan(AttentionConfig(model=MODEL_NAME, **{n: OPTIONS[n].neutral for n in changes}))
    assert neutral.what_if == () and neutral.layers == neutral.own


def test_an_option_a_model_already_has_is_no_what_if():
    """The causal mask on a decoder is the model's own: nothing changes, nothing is labelled."""
    assert plan(AttentionConfig(model=MODEL_NAME, causal=True)).what_if == ()
    assert plan(AttentionConfig(model="minilm-l6", causal=True)).what_if == ("causal",)  # an encoder made causal


def test_a_random_only_option_is_inert_with_a_model():
    """Positions, sizes, seeds belong to random weights: with a model they keep their value and change nothing."""
    base = compute(AttentionConfig(model=MODEL_NAME, sentence="the cat sat"))
    odd = compute(AttentionConfig(model=MODEL_NAME, sentence="the cat sat", positional="rope", d_model=8, seed=9,
                                  bias=True, heads=4))
    assert (odd.weights == base.weights).all() and odd.next_tokens == base.next_tokens
    assert odd.plan.what_if == ()

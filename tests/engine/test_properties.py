"""Property tests: any valid config gives finite weights whose rows sum to 1; invalid ones raise ValueError."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute

words = st.lists(st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8), min_size=1, max_size=24)


@st.composite
def configs(draw):
    projections = draw(st.booleans())
    d_model, d_k = draw(st.integers(1, 48)), draw(st.integers(1, 16))
    heads = draw(st.integers(1, 6)) if projections else 1
    even = (d_k if projections else d_model) % 2 == 0
    return AttentionConfig(
        sentence=" ".join(draw(words)) + " anchor",
        tokenizer=draw(st.sampled_from(["word", "char"])),
        d_model=d_model,
        d_k=d_k,
        d_v=draw(st.integers(1, 16)),
        heads=heads,
        kv_heads=draw(st.none() | st.sampled_from([g for g in range(1, heads + 1) if heads % g == 0])),
        seed=draw(st.integers(0, 2**32)),
        weight_seed=draw(st.none() | st.integers(0, 2**32)),
        inputs=draw(st.sampled_from(["stable", "embedding", "uniform"])),
        projections=projections,
        bias=projections and draw(st.booleans()),
        positional=draw(st.sampled_from(["none", "sinusoidal", "alibi"] + (["rope"] if even else []))),
        init=draw(st.sampled_from(["uniform", "scaled_normal", "linear"])),
        layout=draw(st.sampled_from(["row", "column"])),
        scale=draw(st.booleans()),
        temperature=draw(st.integers(100, 1_000_000)) / 10_000,  # 0.01 to 100, at most 4 decimals
        causal=draw(st.booleans()),
        window=draw(st.none() | st.integers(1, 8)),
        sink_tokens=draw(st.integers(0, 1)),
        similarity=draw(st.sampled_from(["dot", "cosine"])),
        dtype=draw(st.sampled_from(["float32", "float64"])),
    )


@settings(max_examples=150, deadline=None)
@given(configs())
def test_valid_configs_give_proper_weights(cfg):
    r = compute(cfg)
    T, h = r.seq_len, cfg.dims.heads
    assert r.weights.shape == (h, T, T)
    assert torch.isfinite(r.weights).all()
    assert torch.allclose(r.weights.sum(-1), torch.ones(h, T, dtype=r.weights.dtype), atol=1e-4)
    if cfg.causal:
        upper = torch.ones(T, T, dtype=torch.bool).triu(1)
        assert torch.all(r.weights[:, upper] == 0)
    assert r.output.shape == (T, cfg.dims.d_model)


anything = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | st.lists(st.integers())


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(AttentionConfig.field_names()), anything, min_size=1, max_size=4))
def test_invalid_configs_raise_config_error_only(fields):
    try:
        plan(AttentionConfig(**fields))
    except ConfigError as exc:
        assert str(exc) and len(str(exc)) < 300

"""Today's attention variants against their peers: RoPE (transformers' Llama), ALiBi (BLOOM),
grouped-query heads and sliding windows with sinks (F.scaled_dot_product_attention), biases
(nn.MultiheadAttention and the Annotated Transformer), nn.Linear's initialisation."""

import argparse
import importlib
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, check_tokens, compute
from attn_gui.engine.kernel.scores import alibi_slopes
from attn_gui.engine.kernel.reduce import reduce_matrix

memory_module = importlib.import_module("attn_gui.engine.run.memory")

TOL = {"float64": 1e-10, "float32": 1e-5}
DTYPES = {"float64": torch.float64, "float32": torch.float32}
CASES = [(16, 4, 2, 9, 0), (24, 6, 3, 13, 5), (8, 2, 1, 6, 11)]  # (d_model, heads, kv_heads, T, seed)


def sentence(T):
    return " ".join(f"w{i % 7}" for i in range(T))


def close(a, b, dtype):
    assert a.dtype == b.dtype == DTYPES[dtype]
    torch.testing.assert_close(a, b, atol=TOL[dtype], rtol=TOL[dtype])


def visible(T, causal, window=None, sinks=0):
    """The keys each query sees, spelled out: (T, T) True where query i may read key j."""
    i = torch.arange(T).unsqueeze(1)
    j = torch.arange(T)
    seen = torch.ones(T, T, dtype=torch.bool)
    if window is not None:
        near = ((i - j < window) & (j <= i)) if causal else ((i - j).abs() < window)
        seen = near | (j < sinks)
    if causal:
        seen &= j <= i
    return seen


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d_model,heads,kv_heads,T,seed", CASES)
def test_grouped_query_heads_match_sdpa_with_enable_gqa(d_model, heads, kv_heads, T, seed, causal, dtype):
    r = compute(AttentionConfig(sentence=sentence(T), d_model=d_model, d_k=4, d_v=3, heads=heads,
                                kv_heads=kv_heads, seed=seed, causal=causal, init="scaled_normal", dtype=dtype))
    assert r.w_q.shape == (heads, d_model, 4) and r.w_k.shape == (kv_heads, d_model, 4)
    assert r.w_v.shape == (kv_heads, d_model, 3) and r.k.shape == (kv_heads, T, 4) and r.v.shape == (kv_heads, T, 3)
    assert r.weights.shape == (heads, T, T)
    expected = F.scaled_dot_product_attention(r.q[None], r.k[None], r.v[None], is_causal=causal, enable_gqa=True)
    close(r.head_outputs, expected[0], dtype)
    group = heads // kv_heads  # repeating K and V per group is the same attention
    k, v = r.k.repeat_interleave(group, 0), r.v.repeat_interleave(group, 0)
    close(r.head_outputs, F.scaled_dot_product_attention(r.q, k, v, is_causal=causal), dtype)


def test_kv_heads_equal_to_heads_is_todays_attention():
    cfg = AttentionConfig(heads=2, d_model=6)
    a, b = compute(cfg), compute(cfg.replace(kv_heads=2))
    for name in a.fields():
        assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window,sinks", [(1, 0), (3, 0), (3, 2), (20, 1)])
def test_sliding_window_and_sinks_match_sdpa_with_the_explicit_mask(window, sinks, causal, dtype):
    T, heads = 11, 2
    r = compute(AttentionConfig(sentence=sentence(T), d_model=8, d_k=4, d_v=4, heads=heads, causal=causal,
                                window=window, sink_tokens=sinks, init="scaled_normal", dtype=dtype, seed=3))
    seen = visible(T, causal, window, sinks)
    close(r.head_outputs, F.scaled_dot_product_attention(r.q, r.k, r.v, attn_mask=seen), dtype)
    assert torch.all(r.weights[:, ~seen] == 0) and torch.all(torch.isneginf(r.scaled[:, ~seen]))
    assert torch.all(torch.isfinite(r.scaled[:, seen]))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d_model,heads,T,seed", [(8, 2, 7, 0), (12, 3, 10, 4)])
def test_biases_match_nn_multiheadattention(d_model, heads, T, seed, causal, dtype):
    head_dim = d_model // heads
    r = compute(AttentionConfig(sentence=sentence(T), d_model=d_model, d_k=head_dim, d_v=head_dim, heads=heads,
                                bias=True, seed=seed, causal=causal, init="linear", dtype=dtype))
    assert r.b_q.shape == (heads, 1, head_dim) and r.b_o.shape == (1, d_model)
    mha = nn.MultiheadAttention(d_model, heads, bias=True, batch_first=True, dtype=DTYPES[dtype])
    stack = lambda w: torch.cat([w[i].T for i in range(heads)], dim=0)  # noqa: E731  (h, d, n) -> (h*n, d)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([stack(r.w_q), stack(r.w_k), stack(r.w_v)]))
        mha.in_proj_bias.copy_(torch.cat([r.b_q.flatten(), r.b_k.flatten(), r.b_v.flatten()]))
        mha.out_proj.weight.copy_(r.w_o.T)
        mha.out_proj.bias.copy_(r.b_o[0])
    mask = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None
    out, attn = mha(r.x[None], r.x[None], r.x[None], attn_mask=mask, average_attn_weights=False)
    close(r.output, out[0], dtype)
    close(r.weights, attn[0], dtype)


class MultiHeadedAttention(nn.Module):
    """The Annotated Transformer's multi-head attention (seed 003): four nn.Linear with biases."""

    def __init__(self, h, d_model):
        super().__init__()
        self.d_k, self.h = d_model // h, h
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # the same mask for every head
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value), strict=False)]
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        self.attn = scores.softmax(dim=-1)
        x = torch.matmul(self.attn, value).transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["row", "column"])
def test_the_annotated_transformer_gives_the_engines_numbers(layout, causal, dtype):
    d_model, heads, T = 12, 3, 8
    r = compute(AttentionConfig(sentence=sentence(T), d_model=d_model, d_k=4, d_v=4, heads=heads, bias=True,
                                layout=layout, causal=causal, init="linear", dtype=dtype, seed=9))
    at = MultiHeadedAttention(heads, d_model).to(DTYPES[dtype])
    # nn.Linear keeps W as (out, in): column layout's W per head, stacked on the rows
    rows = lambda w: torch.cat(list(w if layout == "column" else w.transpose(-2, -1)))  # noqa: E731
    with torch.no_grad():
        for lin, w, b in zip(at.linears, (r.w_q, r.w_k, r.w_v), (r.b_q, r.b_k, r.b_v), strict=False):
            lin.weight.copy_(rows(w))
            lin.bias.copy_(b.flatten())
        at.linears[3].weight.copy_(r.w_o if layout == "column" else r.w_o.T)
        at.linears[3].bias.copy_(r.b_o[0])
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None] if causal else None  # subsequent_mask
    out = at(r.x[None], r.x[None], r.x[None], mask)
    close(r.output, out[0], dtype)
    close(r.weights, at.attn[0], dtype)


def test_biases_are_drawn_after_the_weights():
    cfg = AttentionConfig(heads=2, d_model=6, kv_heads=1)
    a, b = compute(cfg), compute(cfg.replace(bias=True))
    for name in ("x", "w_q", "w_k", "w_v", "w_o"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert b.b_k.shape == (1, 1, 3) and b.b_v.shape == (1, 1, 3)
    torch.testing.assert_close(b.q, b.x @ b.w_q + b.b_q)


def test_linear_init_is_nn_linears_uniform():
    r = compute(AttentionConfig(d_model=256, d_k=256, d_v=256, heads=1, bias=True, init="linear"))
    for w, fan_in in ((r.w_q, 256), (r.w_v, 256), (r.w_o, 256), (r.b_q, 256), (r.b_o, 256)):
        bound = 1 / math.sqrt(fan_in)
        assert w.abs().max() <= bound
        if w.numel() > 10_000:  # U(-b, b): mean 0, standard deviation b / sqrt(3)
            assert abs(w.mean().item()) < 0.01 * bound
            assert abs(w.std().item() - bound / math.sqrt(3)) < 0.01 * bound
    mha = nn.Linear(256, 256)  # nn.Linear's own draw has the same bounds
    assert mha.weight.abs().max() <= 1 / 16 and mha.bias.abs().max() <= 1 / 16


def llama_cos_sin(T, d_k, base, dtype, offset=0):
    """LlamaRotaryEmbedding's default cos and sin at position_ids offset ... offset + T - 1, in ``dtype``."""
    inv_freq = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.int64).to(dtype) / d_k))
    freqs = torch.arange(offset, offset + T, dtype=dtype)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,kv_heads,d_k,base,T", [(2, 2, 4, 10000.0, 9), (4, 2, 6, 500.0, 14)])
def test_rope_matches_llamas_apply_rotary_pos_emb(heads, kv_heads, d_k, base, T, causal, dtype):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    r = compute(AttentionConfig(sentence=sentence(T), d_model=8, d_k=d_k, d_v=3, heads=heads, kv_heads=kv_heads,
                                positional="rope", rope_base=base, causal=causal, init="scaled_normal",
                                dtype=dtype))
    cos, sin = llama_cos_sin(T, d_k, base, DTYPES[dtype])
    q, k = apply_rotary_pos_emb(r.q_unrotated[None], r.k_unrotated[None], cos[None], sin[None])
    close(r.q, q[0], dtype)
    close(r.k, k[0], dtype)
    close(r.q_unrotated, r.x @ r.w_q, dtype)
    expected = F.scaled_dot_product_attention(q, k, r.v[None], is_causal=causal, enable_gqa=True)
    close(r.head_outputs, expected[0], dtype)
    # RoPE's point: a score depends on q, k and the distance i - j only
    torch.testing.assert_close(r.q[:, 0], r.q_unrotated[:, 0])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("P", [1, 7])
def test_a_key_value_cache_gives_the_rows_of_the_whole_sequence(P, causal, dtype):
    """attend(new rows, past=(k, v)) against attend over the whole sequence: the new rows of
    every step equal, and the cache it returns equals the whole sequence's k and v (RoPE,
    grouped-query heads); LlamaRotaryEmbedding's angles at positions P ... P + n - 1."""
    from attn_gui.engine.kernel.types import AttendOptions, Projections
    from attn_gui.engine.kernel.attend import attend
    from attn_gui.engine.kernel.rope import rope_angles

    r = compute(AttentionConfig(sentence=sentence(P + 3), d_model=8, d_k=6, d_v=5, heads=4, kv_heads=2,
                                positional="rope", rope_base=500.0, causal=causal, init="scaled_normal", dtype=dtype))
    weights = Projections(r.w_q, r.w_k, r.w_v, r.w_o)
    options = AttendOptions(causal=causal, rope_base=500.0)
    full = attend(r.x, weights, options)
    prefill = attend(r.x[:P], weights, options)
    step = attend(r.x[P:], weights, options, past=(prefill.k, prefill.v))
    assert step.weights.shape == (4, 3, P + 3) and step.k.shape == (2, P + 3, 6)
    close(step.k, full.k, dtype)
    close(step.v, full.v, dtype)
    close(step.q, full.q[:, P:], dtype)
    close(step.output, full.output[P:], dtype)
    if causal:  # without the mask the prefill's rows saw only the first P keys; with it, the same as in full
        close(prefill.weights, full.weights[:, :P, :P], dtype)
    close(step.weights, full.weights[:, P:], dtype)
    cos, sin = llama_cos_sin(P + 3, 6, 500.0, DTYPES[dtype])
    angles = rope_angles(3, 6, 500.0, DTYPES[dtype], start=P)
    close(angles[0], cos[P:], dtype)
    close(angles[1], sin[P:], dtype)


def test_rope_scores_depend_on_the_distance_only():
    T = 6
    r = compute(AttentionConfig(sentence="a " * T, d_model=8, d_k=4, positional="rope", dtype="float64"))
    # every token is "a": the same q and k before rotation, so the scores are constant along each diagonal
    for offset in range(-T + 1, T):
        diag = torch.diagonal(r.scores[0], offset)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("heads", [1, 4, 6, 8])
def test_alibi_slopes_are_blooms(heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    alibi = build_alibi_tensor(torch.ones(1, 3), heads, torch.float32)  # (h, 1, 3): slope_h * j
    torch.testing.assert_close(alibi_slopes(heads), alibi[:, 0, 1])
    if heads in (1, 4, 8):  # the paper's geometric sequence 2^(-8/h), 2^(-16/h), ...
        paper = torch.tensor([2.0 ** (-8 * (i + 1) / heads) for i in range(heads)], dtype=torch.float64)
        torch.testing.assert_close(alibi_slopes(heads, torch.float64), paper, atol=1e-15, rtol=1e-15)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,T", [(4, 9), (6, 12)])
def test_alibi_matches_blooms_bias(heads, T, causal, dtype):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    r = compute(AttentionConfig(sentence=sentence(T), d_model=12, d_k=4, d_v=3, heads=heads, positional="alibi",
                                causal=causal, init="scaled_normal", dtype=dtype))
    slopes = alibi_slopes(heads, DTYPES[dtype])
    distance = torch.arange(T)[:, None] - torch.arange(T)
    shown = -slopes[:, None, None] * (distance if causal else distance.abs())
    close(r.position_bias, shown.to(DTYPES[dtype]), dtype)
    if causal:  # BLOOM adds slope_h * j: another constant per row, so the same weights
        bloom = build_alibi_tensor(torch.ones(1, T), heads, torch.float32).to(DTYPES[dtype])  # (h, 1, T)
        tol = TOL[dtype] if dtype == "float32" else 1e-6  # BLOOM's slopes are float32
        bias = bloom.expand(heads, T, T).masked_fill(~visible(T, True), float("-inf"))
        expected = F.scaled_dot_product_attention(r.q, r.k, r.v, attn_mask=bias)
        torch.testing.assert_close(r.head_outputs, expected, atol=tol, rtol=tol)
        torch.testing.assert_close(r.weights, torch.softmax(r.scores / 2 + bloom + torch.where(
            visible(T, True), 0.0, float("-inf")).to(DTYPES[dtype]), -1), atol=tol, rtol=tol)
    expected = F.scaled_dot_product_attention(r.q, r.k, r.v, attn_mask=r.position_bias.masked_fill(
        ~visible(T, causal), float("-inf")))
    close(r.head_outputs, expected, dtype)


def test_streamed_equals_full_with_window_sinks_and_alibi(monkeypatch):
    monkeypatch.setitem(memory_module.BLOCK_BYTES, "cpu", 4096)  # many blocks of a few rows
    T, side = 300, 40
    cfg = AttentionConfig(sentence=sentence(T), d_model=16, d_k=8, d_v=4, heads=3, causal=True, window=17,
                          sink_tokens=3, positional="alibi", kv_heads=1, init="scaled_normal", temperature=0.7)
    for c in (cfg, cfg.replace(causal=False, positional="rope")):
        streamed, full = compute(c, display_max=side), compute(c)
        assert streamed.streamed and not full.streamed
        torch.testing.assert_close(streamed.head_outputs, full.head_outputs, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(streamed.output, full.output, atol=1e-6, rtol=1e-5)
        for name, kind in (("scaled", "signed"), ("weights", "weights")):
            expected = reduce_matrix(getattr(full, name), side, side, kind).numpy()
            torch.testing.assert_close(torch.from_numpy(streamed.display(name, side, side)),
                                       torch.from_numpy(expected), atol=1e-6, rtol=1e-5)
        for head, token in ((0, 0), (2, 150), (1, T - 1)):
            torch.testing.assert_close(streamed.row("weights", head, token), full.weights[head, token])


def test_sinusoidal_is_todays_positions():
    a = compute(AttentionConfig(positional="sinusoidal"))
    b = compute(AttentionConfig())
    assert not torch.equal(a.x, b.x) and torch.equal(a.w_q, b.w_q)
    assert a.q_unrotated is None and a.position_bias is None


def test_old_sessions_and_the_old_flag_still_give_sinusoidal():
    old = {**AttentionConfig().to_dict(), "positional": True}
    assert AttentionConfig.from_dict(old).positional == "sinusoidal"
    assert AttentionConfig.from_dict({**old, "positional": False}).positional == "none"
    from attn_gui.cli import add_engine_options, given_options

    p = argparse.ArgumentParser()
    add_engine_options(p)
    assert given_options(p.parse_args(["--positional"]))["positional"] == "sinusoidal"
    assert given_options(p.parse_args(["--positional", "rope"]))["positional"] == "rope"
    assert "positional" not in given_options(p.parse_args([]))


@pytest.mark.parametrize("changes,message", [
    (dict(heads=4, kv_heads=3), "kv_heads must divide heads"),
    (dict(heads=2, kv_heads=4), "kv_heads must divide heads"),
    (dict(window=0), "window must be between 1"),
    (dict(sink_tokens=-1), "sink_tokens must be between 0"),
    (dict(d_k=3, positional="rope"), "d_k must be even"),
    (dict(bias=True, projections=False), "biases need projections"),
])
def test_bad_variants_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        plan(AttentionConfig(**changes))


def test_more_sinks_than_tokens_are_refused_with_the_tokens():
    cfg = AttentionConfig(sentence="one two three", sink_tokens=4)
    with pytest.raises(ConfigError, match="sink_tokens is 4, more than the 3 tokens"):
        check_tokens(cfg)
    with pytest.raises(ConfigError, match="sink_tokens"):
        compute(cfg)
    assert len(check_tokens(cfg.replace(sink_tokens=3)).tokens) == 3

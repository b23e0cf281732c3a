"""Cross-attention against nn.MultiheadAttention (query and key of different lengths), RoPE's
angles against transformers' LlamaRotaryEmbedding, and what a shift of the positions changes:
RoPE and ALiBi read i - j only (checked with apply_rotary_pos_emb at shifted position_ids),
sinusoidal positions do not."""

import hashlib
import importlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, check_tokens, compute, tokenize
from attn_gui.engine.kernel.project import sinusoidal_positions
from attn_gui.engine.kernel.reduce import reduce_matrix
from test_variants import llama_cos_sin  # Llama's formula, beside it in tests/engine

memory_module = importlib.import_module("attn_gui.engine.run.memory")

TOL = {"float64": 1e-10, "float32": 1e-5}
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def close(a, b, dtype):
    assert a.dtype == b.dtype == DTYPES[dtype]
    torch.testing.assert_close(a, b, atol=TOL[dtype], rtol=TOL[dtype])


def words(n, stem):
    return " ".join(f"{stem}{i % 5}" for i in range(n))


def multihead(r, heads, d_model, dtype, bias):
    """nn.MultiheadAttention holding the result's weights (row layout: W per head is (d, n))."""
    mha = nn.MultiheadAttention(d_model, heads, bias=bias, batch_first=True, dtype=DTYPES[dtype])
    stack = lambda w: torch.cat([w[i].T for i in range(heads)], dim=0)  # noqa: E731  (h, d, n) -> (h*n, d)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([stack(r.w_q), stack(r.w_k), stack(r.w_v)]))
        mha.out_proj.weight.copy_(r.w_o.T)
        if bias:
            mha.in_proj_bias.copy_(torch.cat([r.b_q.flatten(), r.b_k.flatten(), r.b_v.flatten()]))
            mha.out_proj.bias.copy_(r.b_o[0])
    return mha


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("d_model,heads,T,T_k,seed", [(8, 2, 5, 9, 0), (12, 3, 11, 4, 7), (6, 1, 3, 3, 42),
                                                      (16, 4, 7, 1, 123)])
def test_cross_attention_matches_nn_multiheadattention(d_model, heads, T, T_k, seed, bias, dtype):
    head_dim = d_model // heads
    r = compute(AttentionConfig(sentence=words(T, "q"), source_sentence=words(T_k, "k"), d_model=d_model,
                                d_k=head_dim, d_v=head_dim, heads=heads, bias=bias, seed=seed, init="linear",
                                dtype=dtype))
    assert r.x.shape == (T, d_model) and r.x_source.shape == (T_k, d_model)
    assert r.k.shape == (heads, T_k, head_dim) and r.weights.shape == (heads, T, T_k)
    mha = multihead(r, heads, d_model, dtype, bias)
    out, attn = mha(r.x[None], r.x_source[None], r.x_source[None], average_attn_weights=False)
    close(r.output, out[0], dtype)
    close(r.weights, attn[0], dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("layout", ["row", "column"])
def test_cross_attention_with_grouped_heads_matches_sdpa(layout, dtype):
    r = compute(AttentionConfig(sentence=words(6, "q"), source_sentence=words(10, "k"), d_model=12, d_k=4, d_v=3,
                                heads=4, kv_heads=2, layout=layout, bias=True, init="scaled_normal", dtype=dtype,
                                positional="sinusoidal", seed=5))
    w = lambda m: m if layout == "row" else m.transpose(-2, -1)  # noqa: E731  (.., d, n) in both layouts
    close(r.q, r.x @ w(r.w_q) + r.b_q, dtype)
    close(r.k, r.x_source @ w(r.w_k) + r.b_k, dtype)
    expected = F.scaled_dot_product_attention(r.q[None], r.k[None], r.v[None], enable_gqa=True)
    close(r.head_outputs, expected[0], dtype)


def test_the_second_sentence_is_drawn_with_the_first():
    cfg = AttentionConfig(sentence="the cat sat", source_sentence="a cat ran far", seed=9, d_model=4,
                          inputs="embedding")
    r = compute(cfg)
    # embedding inputs: one table for the vocabulary of both sentences, rows by token
    vocab = sorted(set(["the", "cat", "sat", "a", "cat", "ran", "far"]))
    assert r.vocab == tuple(vocab)
    table = torch.randn(len(vocab), 4, generator=torch.Generator().manual_seed(9))
    torch.testing.assert_close(r.x, table[[vocab.index(t) for t in ("the", "cat", "sat")]], atol=0, rtol=0)
    torch.testing.assert_close(r.x_source, table[[vocab.index(t) for t in ("a", "cat", "ran", "far")]],
                               atol=0, rtol=0)
    assert torch.equal(r.x[1], r.x_source[1])  # "cat" has one row
    assert r.source_tokens == ("a", "cat", "ran", "far")
    assert r.source_token_ids.tolist() == [vocab.index(t) for t in r.source_tokens]
    # uniform inputs: one row per position of the sentence, then of the second sentence
    u = compute(cfg.replace(inputs="uniform"))
    rows = torch.rand(7, 4, generator=torch.Generator().manual_seed(9))
    torch.testing.assert_close(torch.cat([u.x, u.x_source]), rows, atol=0, rtol=0)
    # sinusoidal: each sentence from position 0
    s = compute(cfg.replace(positional="sinusoidal"))
    torch.testing.assert_close(s.x_source - r.x_source, sinusoidal_positions(4, 4))
    # stable inputs (the default): each word's row from its own generator, in either sentence
    st = compute(cfg.replace(inputs="stable"))

    def row(word):
        digest = hashlib.blake2b(f"9:{word}".encode(), digest_size=8).digest()
        return torch.randn(4, generator=torch.Generator().manual_seed(int.from_bytes(digest, "big") & (2**63 - 1)))

    torch.testing.assert_close(st.x_source, torch.stack([row(w) for w in ("a", "cat", "ran", "far")]),
                               atol=0, rtol=0)
    assert torch.equal(st.x[1], st.x_source[1])


@pytest.mark.parametrize("blank", ["", "   ", None])
def test_an_empty_second_sentence_is_self_attention(blank):
    a = compute(AttentionConfig(heads=2, d_model=6))
    b = compute(AttentionConfig(heads=2, d_model=6, source_sentence=blank))
    assert b.source_tokens is None and b.x_source is None and not b.config.cross
    for name in a.fields():
        assert torch.equal(getattr(a, name), getattr(b, name)), name


@pytest.mark.parametrize("changes,message", [
    (dict(causal=True), "the causal mask hides keys after the query"),
    (dict(window=2), "a sliding window keeps the keys near"),
    (dict(positional="rope", d_k=4), "RoPE makes a score depend on i - j"),
    (dict(positional="alibi"), "ALiBi makes a score depend on i - j"),
])
def test_what_needs_one_sentence_is_refused_with_a_second(changes, message):
    with pytest.raises(ConfigError, match=message):
        plan(AttentionConfig(source_sentence="another text", **changes))
    AttentionConfig(**changes)  # fine without it


def test_a_second_sentence_without_tokens_is_refused():
    with pytest.raises(ConfigError, match="the second sentence has no tokens"):
        check_tokens(AttentionConfig(source_sentence="... !"))


def test_a_model_keeps_the_second_sentence_inert():
    cfg = AttentionConfig(model="minilm-l6", source_sentence="another text")
    assert not cfg.cross


def test_streamed_cross_attention_equals_full(monkeypatch):
    monkeypatch.setitem(memory_module.BLOCK_BYTES, "cpu", 4096)  # many blocks of a few rows
    side = 30
    cfg = AttentionConfig(sentence=words(200, "q"), source_sentence=words(45, "k"), d_model=8, d_k=4, d_v=4,
                          heads=2, init="scaled_normal")
    streamed, full = compute(cfg, display_max=side), compute(cfg)
    assert streamed.streamed and streamed.shape("weights") == (2, 200, 45)
    torch.testing.assert_close(streamed.head_outputs, full.head_outputs, atol=1e-6, rtol=1e-5)
    expected = reduce_matrix(full.weights, side, side, "weights").numpy()
    torch.testing.assert_close(torch.from_numpy(streamed.display("weights", side, side)), torch.from_numpy(expected))
    torch.testing.assert_close(streamed.row("weights", 1, 150), full.weights[1, 150])


def llama_rotary(d_k, base, heads=2):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=heads * d_k, num_attention_heads=heads, head_dim=d_k,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("d_k,base,T,offset", [(4, 10000.0, 7, 0), (6, 500.0, 12, 3), (8, 100000.0, 5, 1)])
def test_rope_angles_are_llamas(d_k, base, T, offset):
    rotary = llama_rotary(d_k, base)
    positions = torch.arange(offset, offset + T)
    cfg = AttentionConfig(sentence=words(T, "w"), d_model=8, d_k=d_k, positional="rope", rope_base=base,
                          position_offset=offset)
    # float32: the angles of LlamaRotaryEmbedding (it computes in float32 whatever the input's dtype)
    r32 = compute(cfg)
    llama_angles = positions[:, None].float() * rotary.inv_freq
    torch.testing.assert_close(r32.rope_angles, llama_angles, atol=1e-5, rtol=1e-5)
    cos, sin = rotary(r32.x, positions[None])  # (1, T, d_k)
    torch.testing.assert_close(torch.cat([r32.rope_angles] * 2, -1).cos(), cos[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([r32.rope_angles] * 2, -1).sin(), sin[0], atol=1e-5, rtol=1e-5)
    # float64: the same formula, inv_freq = 1 / base^(arange(0, d_k, 2) / d_k), in float64
    r64 = compute(cfg.replace(dtype="float64"))
    inv_freq = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.int64).to(torch.float64) / d_k))
    close(r64.rope_angles, positions[:, None].to(torch.float64) * inv_freq, "float64")
    torch.testing.assert_close(rotary.inv_freq.double(), inv_freq, atol=1e-7, rtol=1e-7)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,kv_heads,d_k,base,T", [(2, 2, 4, 10000.0, 9), (4, 2, 6, 500.0, 14)])
def test_rope_scores_do_not_change_when_the_sentence_shifts(heads, kv_heads, d_k, base, T, causal, dtype):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    cfg = AttentionConfig(sentence=words(T, "w"), d_model=8, d_k=d_k, d_v=3, heads=heads, kv_heads=kv_heads,
                          positional="rope", rope_base=base, causal=causal, init="scaled_normal", dtype=dtype)
    r0, r1 = compute(cfg), compute(cfg.replace(position_offset=1))
    for offset, r in ((0, r0), (1, r1)):
        cos, sin = llama_cos_sin(T, d_k, base, DTYPES[dtype], offset)
        q, k = apply_rotary_pos_emb(r.q_unrotated[None], r.k_unrotated[None], cos[None], sin[None])
        close(r.q, q[0], dtype)
        close(r.k, k[0], dtype)
    if dtype == "float32":  # and with the module itself, position_ids shifted by one
        rotary = llama_rotary(d_k, base, heads)
        cos, sin = rotary(r1.x, torch.arange(1, T + 1)[None])
        q, k = apply_rotary_pos_emb(r1.q_unrotated[None], r1.k_unrotated[None], cos, sin)
        close(r1.q, q[0], dtype)
    assert not torch.allclose(r0.q[:, 1:], r1.q[:, 1:])  # the rotated queries move ...
    close(r1.scores, r0.scores, dtype)  # ... the scores do not: they depend on i - j only
    close(r1.weights, r0.weights, dtype)
    close(r1.output, r0.output, dtype)


def test_alibi_does_not_change_and_sinusoidal_does_when_the_sentence_shifts():
    cfg = AttentionConfig(sentence=words(8, "w"), d_model=8, d_k=4, heads=4, dtype="float64")
    alibi = cfg.replace(positional="alibi")
    a0, a1 = compute(alibi), compute(alibi.replace(position_offset=1))
    close(a1.position_bias, a0.position_bias, "float64")
    close(a1.weights, a0.weights, "float64")
    sinus = cfg.replace(positional="sinusoidal")
    s0, s1 = compute(sinus), compute(sinus.replace(position_offset=1))
    T, d = s0.x.shape
    torch.testing.assert_close(s1.x - s0.x, sinusoidal_positions(T + 1, d, torch.float64)[1:]
                               - sinusoidal_positions(T, d, torch.float64), atol=1e-12, rtol=1e-12)
    assert (s1.scores - s0.scores).abs().max() > 1e-3  # absolute positions: the scores move


def test_tokens_joined_share_one_sorted_vocabulary():
    both = tokenize("b a").joined(tokenize("c a"))
    assert both.tokens == ("b", "a", "c", "a") and both.vocab == ("a", "b", "c")
    assert both.token_ids == (1, 0, 2, 0)

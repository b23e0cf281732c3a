"""Stable inputs (the default): a token's row of X depends on (seed, token, d_model) alone,
the weights on the weight seed alone; both checked against torch's own generators."""

import hashlib

import pytest
import torch

from attn_gui.engine import AttentionConfig, compute


def documented_row(seed: int, token: str, d: int) -> torch.Tensor:
    # the formula the docs give: 63 bits of BLAKE2b("<seed>:<token>") seed a CPU generator
    digest = hashlib.blake2b(f"{seed}:{token}".encode(), digest_size=8).digest()
    g = torch.Generator().manual_seed(int.from_bytes(digest, "big") & (2**63 - 1))
    return torch.randn(d, generator=g)


def test_default_is_stable_and_every_row_is_the_documented_draw():
    cfg = AttentionConfig()
    assert cfg.inputs == "stable"
    r = compute(cfg)
    assert r.tokens == ("When", "in", "doubt", "look", "intelligent")
    for i, tok in enumerate(r.tokens):
        assert torch.equal(r.x[i], documented_row(123, tok, 5))


def test_default_weights_come_from_their_own_generator_and_the_walk_follows_the_formulas():
    r = compute(AttentionConfig())
    g = torch.Generator().manual_seed(123)  # no weight seed: the seed, in a generator of its own
    w_q, w_k, w_v = (torch.rand(1, 5, 3, generator=g) for _ in range(3))
    w_o = torch.rand(3, 5, generator=g)
    assert torch.equal(r.w_q, w_q) and torch.equal(r.w_k, w_k) and torch.equal(r.w_v, w_v)
    assert torch.equal(r.w_o, w_o)
    x = torch.stack([documented_row(123, t, 5) for t in r.tokens])
    q2 = x[1] @ w_q[0]  # follow x_2 "in"
    omega2 = q2 @ (x @ w_k[0]).T
    alpha2 = torch.softmax(omega2 / 3**0.5, dim=0)
    assert torch.allclose(r.scores[0, 1], omega2, atol=1e-5)
    assert torch.allclose(r.weights[0, 1], alpha2, atol=1e-6)
    assert torch.allclose(r.head_outputs[0, 1], alpha2 @ (x @ w_v[0]), atol=1e-5)


@pytest.mark.parametrize("changes", [{}, {"weight_seed": 7}, {"heads": 2, "bias": True, "init": "scaled_normal"},
                                     {"layout": "column", "d_model": 16, "kv_heads": 1, "heads": 2}])
@pytest.mark.parametrize("other", ["When in doubt look very intelligent", "When in doubt", "intelligent doubt"])
def test_adding_or_removing_a_word_changes_no_other_row_and_no_weight(changes, other):
    base = compute(AttentionConfig(**changes))
    new = compute(AttentionConfig(sentence=other, **changes))
    rows = {t: base.x[i] for i, t in enumerate(base.tokens)}
    for i, tok in enumerate(new.tokens):
        if tok in rows:
            assert torch.equal(new.x[i], rows[tok]), tok
        else:
            assert torch.equal(new.x[i], documented_row(123, tok, base.x.shape[1]))
    for name in ("w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"):
        a, b = getattr(base, name), getattr(new, name)
        assert (a is None and b is None) or torch.equal(a, b), name


def test_half_typed_word_changes_only_its_own_row():
    typed = [compute(AttentionConfig(sentence=f"When in doubt look {w}")) for w in ("i", "in", "int")]
    for r in typed:
        assert torch.equal(r.x[:4], typed[0].x[:4]) and torch.equal(r.w_q, typed[0].w_q)
        assert torch.equal(r.x[4], documented_row(123, r.tokens[4], 5))


def test_char_tokens_are_stable_too():
    a = compute(AttentionConfig(sentence="cat", tokenizer="char"))
    b = compute(AttentionConfig(sentence="a cart", tokenizer="char"))
    for i, ch in enumerate(b.tokens):
        assert torch.equal(b.x[i], documented_row(123, ch, 5)), ch
    assert torch.equal(a.x[0], b.x[2]) and torch.equal(a.w_v, b.w_v)


def test_seed_weight_seed_and_repeats():
    r = compute(AttentionConfig(sentence="the cat saw the dog", seed=9, weight_seed=5))
    assert torch.equal(r.x[0], r.x[3]) and torch.equal(r.x[1], documented_row(9, "cat", 5))
    g = torch.Generator().manual_seed(5)
    assert torch.equal(r.w_q, torch.rand(1, 5, 3, generator=g))
    assert not torch.equal(compute(AttentionConfig(seed=10)).x, compute(AttentionConfig()).x)


def test_old_modes_keep_their_streams():
    # the tutorials' stream: one generator, the V x d table over the sorted vocabulary, then W
    r = compute(AttentionConfig(inputs="embedding"))
    g = torch.Generator().manual_seed(123)
    table = torch.randn(5, 5, generator=g)
    assert torch.equal(r.x, table[[0, 2, 1, 4, 3]])
    assert torch.equal(r.w_q[0], torch.rand(5, 3, generator=g))


def test_float64_shows_the_same_numbers():
    a, b = compute(AttentionConfig()), compute(AttentionConfig(dtype="float64"))
    assert b.x.dtype == torch.float64 and torch.equal(b.x, a.x.double()) and torch.equal(b.w_q, a.w_q.double())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_shows_the_same_numbers():
    a, b = compute(AttentionConfig()), compute(AttentionConfig(device="cuda"))
    assert torch.equal(b.x.cpu(), a.x) and torch.equal(b.w_q.cpu(), a.w_q)
    assert torch.allclose(b.weights.cpu(), a.weights, atol=1e-6)

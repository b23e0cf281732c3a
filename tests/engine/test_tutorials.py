"""The engine reproduces the printed numbers of the tutorials it grew from."""

import torch

from attn_gui.engine import AttentionConfig, compute, preset


def close(actual, expected, atol=1e-4):
    return torch.allclose(actual.float(), torch.tensor(expected), atol=atol)


def test_uniform_tutorial_with_projections():
    # torch.manual_seed(42); inputs = torch.rand(4, 3); W_* = torch.rand(3, 2); q = x @ W
    r = compute(AttentionConfig(sentence="I am learning this", inputs="uniform", seed=42,
                                layout="row", d_model=3, d_k=2, d_v=2, heads=1))
    assert r.tokens == ("I", "am", "learning", "this")
    assert close(r.x, [[0.8823, 0.9150, 0.3829], [0.9593, 0.3904, 0.6009],
                       [0.2566, 0.7936, 0.9408], [0.1332, 0.9346, 0.5936]])
    assert close(r.w_q[0], [[0.8694, 0.5677], [0.7411, 0.4294], [0.8854, 0.5739]])
    assert close(r.q[0, 2], [1.6442, 1.0264])
    assert close(r.k[0], [[0.5956, 1.2759], [0.5394, 1.2740], [0.5617, 1.2937], [0.4637, 0.9897]])
    assert close(r.v[0], [[0.6307, 0.4225], [0.5699, 0.3401], [0.8266, 0.2332], [0.6742, 0.2259]])
    assert close(r.scores[0, 2], [2.2888, 2.1945, 2.2514, 1.7783])
    assert close(r.weights[0, 2], [0.2773, 0.2594, 0.2700, 0.1933])
    assert close(r.head_outputs[0, 2], [0.6762, 0.3120])


def test_uniform_tutorial_simplified_attention():
    r = compute(preset("tutorial-uniform").replace(projections=False, scale=False))
    assert r.w_q is None and r.w_o is None
    assert close(r.scores[0], [[1.7622, 1.4337, 1.3127, 1.1999], [1.4337, 1.4338, 1.1213, 0.8494],
                               [1.3127, 1.1213, 1.5807, 1.3343], [1.1999, 0.8494, 1.3343, 1.2435]])
    assert close(r.weights[0], [[0.3415, 0.2459, 0.2179, 0.1946], [0.3040, 0.3040, 0.2225, 0.1695],
                                [0.2407, 0.1987, 0.3146, 0.2459], [0.2569, 0.1809, 0.2938, 0.2683]])
    assert close(r.head_outputs[0], [[0.6191, 0.7634, 0.5991], [0.6395, 0.7318, 0.6090],
                                     [0.5165, 0.7774, 0.6536], [0.5113, 0.7897, 0.6428]])
    assert close(r.output, r.head_outputs[0].tolist(), atol=0)


def test_raschka_embedding_tutorial_follows_x2():
    # Raschka, "Understanding and Coding the Self-Attention Mechanism": column layout, d=16, d_k=24, d_v=28
    r = compute(AttentionConfig(sentence="Life is short, eat dessert first", inputs="embedding", seed=123,
                                weight_seed=123, layout="column", d_model=16, d_k=24, d_v=28,
                                init="uniform"))  # W = torch.rand(...), above the default's uniform range
    assert r.vocab == ("Life", "dessert", "eat", "first", "is", "short")
    assert r.token_ids.tolist() == [0, 4, 5, 2, 1, 3]
    assert close(r.x[0, :5], [0.3374, -0.1778, -0.3035, -0.5880, 0.3486])
    assert r.w_q.shape == (1, 24, 16) and r.w_v.shape == (1, 28, 16)
    assert r.q.shape == (1, 6, 24) and r.v.shape == (1, 6, 28)
    assert close(r.scores[0, 1], [8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800])
    assert close(r.weights[0, 1], [0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458])
    assert close(r.head_outputs[0, 1, :4], [-1.5993, 0.0156, 1.2670, 0.0032])
    assert r.head_outputs.shape == (1, 6, 28)


def test_presets_match_the_tutorial_configs():
    assert preset("default") == AttentionConfig()
    assert preset("tutorial-embedding").layout == "column"
    assert preset("tutorial-uniform").inputs == "uniform"
    assert preset("tutorial-embedding").inputs == "embedding"


def test_embedding_inputs_follow_in_through_every_step():
    # the default before stable inputs: the tutorials' stream, still selectable
    r = compute(AttentionConfig(inputs="embedding"))
    assert r.tokens == ("When", "in", "doubt", "look", "intelligent")
    assert r.vocab == ("When", "doubt", "in", "intelligent", "look")
    assert r.token_ids.tolist() == [0, 2, 1, 4, 3]
    # same stream as torch.manual_seed(123); nn.Embedding(5, 5); torch.rand(5, 3) x3; torch.rand(3, 5)
    g = torch.Generator().manual_seed(123)
    table = torch.randn(5, 5, generator=g)
    w_q, w_k, w_v = (torch.rand(5, 3, generator=g) for _ in range(3))
    w_o = torch.rand(3, 5, generator=g)
    x = table[[0, 2, 1, 4, 3]]
    assert torch.equal(r.x, x) and torch.equal(r.w_o, w_o)
    q2 = x[1] @ w_q
    omega2 = q2 @ (x @ w_k).T
    alpha2 = torch.softmax(omega2 / 3**0.5, dim=0)
    z2 = alpha2 @ (x @ w_v)
    assert torch.allclose(r.scores[0, 1], omega2, atol=1e-5)
    assert torch.allclose(r.weights[0, 1], alpha2, atol=1e-6)
    assert torch.allclose(r.head_outputs[0, 1], z2, atol=1e-5)
    assert torch.allclose(r.output, r.concat @ w_o, atol=1e-5)
    # pinned so a change of draw order is caught
    assert close(r.weights[0, 1], [0.02639, 0.08610, 0.05728, 0.82973, 0.00049])


def test_tutorial_presets_compute_the_tutorial_streams():
    # the presets name their inputs: a new default cannot change their numbers
    r = compute(preset("tutorial-embedding"))
    assert close(r.x[0, :5], [0.3374, -0.1778, -0.3035, -0.5880, 0.3486])
    assert close(r.weights[0, 1], [0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458])
    r = compute(preset("tutorial-uniform"))
    assert close(r.weights[0, 2], [0.2773, 0.2594, 0.2700, 0.1933])

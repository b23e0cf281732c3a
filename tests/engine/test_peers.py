"""The engine agrees with torch's own attention: F.scaled_dot_product_attention and nn.MultiheadAttention."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attn_gui.engine import AttentionConfig, compute, formula
from attn_gui.engine.kernel.scores import attention_scores

SIZES = [(5, 1, 4), (16, 2, 8), (32, 4, 12), (24, 8, 30)]  # (d_model, heads, T)


def sentence(T):
    return " ".join(f"w{i % 7}" for i in range(T))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("d_model,heads,T", SIZES)
@pytest.mark.parametrize("layout", ["row", "column"])
def test_heads_match_scaled_dot_product_attention(d_model, heads, T, seed, causal, layout):
    r = compute(AttentionConfig(sentence=sentence(T), d_model=d_model, d_k=3, d_v=5, heads=heads,
                                seed=seed, causal=causal, layout=layout, init="scaled_normal"))
    expected = F.scaled_dot_product_attention(r.q, r.k, r.v, is_causal=causal)
    assert torch.allclose(r.head_outputs, expected, atol=1e-5)
    assert torch.allclose(r.weights.sum(-1), torch.ones(heads, T), atol=1e-5)


@pytest.mark.parametrize("seed", [0, 123])
@pytest.mark.parametrize("d_model,heads,T", SIZES)
@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_path_matches_nn_multiheadattention(d_model, heads, T, seed, causal):
    head_dim = d_model // heads
    if head_dim * heads != d_model:
        pytest.skip("nn.MultiheadAttention needs d_model divisible by heads")
    r = compute(AttentionConfig(sentence=sentence(T), d_model=d_model, d_k=head_dim, d_v=head_dim,
                                heads=heads, seed=seed, causal=causal, init="scaled_normal"))
    mha = torch.nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True)
    with torch.no_grad():
        # row layout: head i's W_q is (d, d_k) and q = x W; nn.Linear stores W^T with heads stacked on rows
        stack = lambda w: torch.cat([w[i].T for i in range(heads)], dim=0)  # noqa: E731
        mha.in_proj_weight.copy_(torch.cat([stack(r.w_q), stack(r.w_k), stack(r.w_v)], dim=0))
        mha.out_proj.weight.copy_(r.w_o.T)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None
    out, attn = mha(r.x[None], r.x[None], r.x[None], attn_mask=mask, need_weights=True,
                    average_attn_weights=False)
    assert torch.allclose(r.output, out[0], atol=1e-5)
    assert torch.allclose(r.weights, attn[0], atol=1e-5)


@pytest.mark.parametrize("layout", ["row", "column"])
def test_column_layout_is_the_transpose_convention(layout):
    r = compute(AttentionConfig(layout=layout, heads=2, d_model=6))
    if layout == "column":
        assert r.w_q.shape == (2, 3, 6) and r.w_o.shape == (6, 6)
        assert torch.allclose(r.q[1, 2], r.w_q[1] @ r.x[2], atol=1e-6)
        assert torch.allclose(r.output[3], r.w_o @ r.concat[3], atol=1e-5)
    else:
        assert r.w_q.shape == (2, 6, 3) and r.w_o.shape == (6, 6)
        assert torch.allclose(r.q[1, 2], r.x[2] @ r.w_q[1], atol=1e-6)


def test_float32_and_float64_agree():
    cfg = AttentionConfig(sentence=sentence(20), d_model=32, d_k=8, d_v=8, heads=4, init="scaled_normal")
    a, b = compute(cfg), compute(cfg.replace(dtype="float64"))
    assert b.weights.dtype == torch.float64
    for name in a.fields():
        assert torch.allclose(getattr(a, name).double(), getattr(b, name), atol=1e-4, rtol=1e-4), name


def test_concat_puts_head_zero_first():
    r = compute(AttentionConfig(heads=3, d_v=2))
    assert r.concat.shape == (5, 6)
    assert torch.equal(r.concat[:, 2:4], r.head_outputs[1])


def test_causal_masks_the_upper_triangle():
    r = compute(AttentionConfig(causal=True, heads=2))
    upper = torch.ones(5, 5, dtype=torch.bool).triu(1)
    assert torch.all(r.weights[:, upper] == 0)
    assert torch.all(torch.isneginf(r.scaled[:, upper]))
    assert torch.allclose(r.weights[:, 0, 0], torch.ones(2))


def test_scale_and_temperature_divide_the_scores():
    r = compute(AttentionConfig(temperature=2.0))
    assert torch.allclose(r.scaled, r.scores / 3**0.5 / 2.0)
    r = compute(AttentionConfig(scale=False))
    assert torch.equal(r.scaled, r.scores)


def test_cosine_similarity_is_bounded_and_zero_vectors_do_not_nan():
    r = compute(AttentionConfig(similarity="cosine", heads=2))
    assert r.scores.abs().max() <= 1 + 1e-6
    r = compute(AttentionConfig(similarity="cosine", projections=False))
    assert torch.allclose(torch.diagonal(r.scores, dim1=-2, dim2=-1), torch.ones(1, 5), atol=1e-5)
    q = torch.tensor([[[0.0, 0.0], [1.0, 0.0]]])
    assert attention_scores(q, q, "cosine").tolist() == [[[0.0, 0.0], [0.0, 1.0]]]


def test_positional_encoding_is_added_to_x():
    a = compute(AttentionConfig())
    b = compute(AttentionConfig(positional="sinusoidal"))
    pe = b.x - a.x
    assert torch.allclose(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0]), atol=1e-6)
    assert torch.allclose(pe[1, 0], torch.sin(torch.tensor(1.0)), atol=1e-6)


def test_repeated_words_share_one_embedding_row():
    r = compute(AttentionConfig(sentence="the cat saw the dog"))
    assert r.token_ids[0] == r.token_ids[3]
    assert torch.equal(r.x[0], r.x[3])


def test_weight_seed_separates_weights_from_inputs():
    a = compute(AttentionConfig(weight_seed=5))
    b = compute(AttentionConfig(weight_seed=5, seed=9))
    assert torch.equal(a.w_q, b.w_q) and not torch.equal(a.x, b.x)


def test_scaled_normal_init_has_fan_in_variance():
    r = compute(AttentionConfig(d_model=256, d_k=256, init="scaled_normal"))
    assert abs(r.w_q.std().item() - 1 / 16) < 0.005


def test_large_uniform_scores_do_not_nan():
    # init "uniform" at d_model 512 gives scores in the thousands; a naive exp() would overflow
    r = compute(AttentionConfig(d_model=512, d_k=64, d_v=64, sentence=sentence(12), init="uniform"))
    assert r.scores.max() > 100
    assert torch.isfinite(r.weights).all()
    assert torch.allclose(r.weights.sum(-1), torch.ones(1, 12), atol=1e-5)


def test_random_results_have_no_biases():
    r = compute(AttentionConfig(heads=2))
    assert r.b_q is None and r.b_o is None and "b_q" not in r.fields()
    assert formula("q", r.resolved) == "Q = X W_q" and formula("output", r.resolved) == "output = Concat(Z) W_O"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpu_values():
    cfg = AttentionConfig(sentence=sentence(64), d_model=64, d_k=16, d_v=16, heads=4, causal=True)
    a, b = compute(cfg), compute(cfg.replace(device="cuda"))
    assert b.device.startswith("cuda")
    assert torch.equal(a.x, b.x.cpu()) and torch.equal(a.w_q, b.w_q.cpu())
    assert torch.allclose(a.weights, b.weights.cpu(), atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,atol", [("float32", 1e-5), ("float64", 1e-12)])
def test_every_field_on_cuda_equals_the_cpu(causal, dtype, atol):
    cfg = AttentionConfig(sentence=sentence(200), d_model=64, d_k=16, d_v=8, heads=8, causal=causal,
                          init="scaled_normal", dtype=dtype)
    cpu, gpu = compute(cfg), compute(cfg.replace(device="cuda"))
    for name in cpu.fields():
        a, b = getattr(cpu, name), getattr(gpu, name).cpu()
        assert torch.allclose(a, b, atol=atol, rtol=atol), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_streamed_maps_on_cuda_equal_the_cpu_and_only_shown_cells_travel():
    from attn_gui.present.frame import make_frame

    cfg = AttentionConfig(sentence=sentence(2000), d_model=64, d_k=16, d_v=16, heads=8, causal=True,
                          init="scaled_normal")
    cpu = make_frame(0, compute(cfg, display_max=384))
    gpu = make_frame(0, compute(cfg.replace(device="cuda"), display_max=384))
    assert gpu.result.streamed and gpu.result.weights is None
    for name in ("scores", "scaled", "weights", "x", "q", "output"):
        assert gpu.arrays[name].shape == cpu.arrays[name].shape
        assert max(gpu.arrays[name].shape[-2:]) <= 384
        np.testing.assert_allclose(gpu.arrays[name], cpu.arrays[name], rtol=1e-5, atol=1e-5, err_msg=name)

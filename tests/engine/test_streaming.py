"""Streamed maps: long inputs keep only the displayed T x T fields, with the values of the full ones."""

import importlib
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attn_gui.engine import AttentionConfig, Steps, compute
from attn_gui.engine.run.compute import _scores_finite
from attn_gui.engine.kernel.reduce import block_edges, reduce_matrix, reduce_row_blocks
from attn_gui.present.frame import make_frame
from attn_gui.present.walk import walk_html

memory_module = importlib.import_module("attn_gui.engine.run.memory")

KINDS = {"scores": "signed", "scaled": "signed", "weights": "weights"}


def sentence(T):
    return " ".join(f"w{i % 97}" for i in range(T))


def torch_fields(r, causal, similarity="dot", temperature=1.0):
    """omega, the scaled scores and alpha of r's q and k, by plain torch."""
    q, k = r.q, r.k
    if similarity == "cosine":
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    scores = q @ k.transpose(-2, -1)
    scaled = scores / (math.sqrt(r.q.shape[-1]) * temperature)
    if causal:
        T = scores.shape[-1]
        scaled = scaled.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return {"scores": scores, "scaled": scaled, "weights": torch.softmax(scaled, dim=-1)}


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few query rows, so a test-sized input is streamed in many blocks."""
    monkeypatch.setitem(memory_module.BLOCK_BYTES, "cpu", 4096)


@pytest.mark.parametrize("T,side,heads", [(450, 384, 2), (700, 64, 3), (97, 10, 1)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("similarity", ["dot", "cosine"])
def test_streamed_maps_equal_the_pooled_full_maps(small_blocks, T, side, heads, causal, similarity):
    cfg = AttentionConfig(sentence=sentence(T), d_model=16, d_k=8, d_v=4, heads=heads, causal=causal,
                          similarity=similarity, temperature=0.7, init="scaled_normal")
    streamed = compute(cfg, display_max=side)
    assert streamed.streamed and streamed.scores is None and streamed.weights is None
    full = torch_fields(streamed, causal, similarity, temperature=0.7)
    for name, kind in KINDS.items():
        shown = streamed.display(name, side, side)
        assert shown.shape == (heads, side, side)
        expected = reduce_matrix(full[name], side, side, kind).numpy()
        np.testing.assert_allclose(shown, expected, rtol=1e-5, atol=1e-6)
        assert np.array_equal(np.isneginf(shown), np.isneginf(expected))  # masked blocks stay masked
    z = F.scaled_dot_product_attention(streamed.q, streamed.k, streamed.v, is_causal=causal,
                                       scale=1 / (math.sqrt(8) * 0.7)) if similarity == "dot" else None
    if z is not None:
        assert torch.allclose(streamed.head_outputs, z, atol=1e-5)
    whole = compute(cfg)
    for name in ("head_outputs", "concat", "output"):
        assert torch.allclose(getattr(streamed, name), getattr(whole, name), atol=1e-5)


@pytest.mark.parametrize("R,C,out_r,out_c", [(50, 50, 7, 7), (50, 33, 16, 40), (10, 400, 3, 384)])
def test_row_blocks_pool_as_the_whole_matrix(R, C, out_r, out_c):
    m = torch.randn(2, R, C)
    m[0, :, C // 2:] = float("-inf")
    for kind in ("signed", "weights"):
        expected = reduce_matrix(m, out_r, out_c, kind)
        edges = block_edges(R, min(R, out_r))
        got = torch.cat([reduce_row_blocks(m[:, s:e], [(s, e)], s, out_c, kind) for s, e in edges], dim=1)
        assert torch.equal(got, expected)


@pytest.mark.parametrize("R,C,out", [(96, 1000, 384), (96, 8192, 384), (40, 300, 300), (40, 700, 64)])
def test_causal_rows_cut_short_pool_as_the_whole_matrix(R, C, out):
    """Causal rows hold only the columns up to their block's last query: the later ones are 0 (α) or -inf (scaled
    scores); pooled with ``width``, they give adaptive max pooling's cells of the whole rows (1,000 and 8,192
    columns: blocks of 2-4 and 21-23 columns)."""
    g = torch.Generator().manual_seed(R + C)
    rows = torch.randn(2, R, C, generator=g)
    start = C - R - 37  # rows start ... start + R - 1 see keys up to start + R - 1
    end = start + R
    hidden = torch.arange(C)[None, :] > torch.arange(start, end)[:, None]  # (R, C): after the query
    scaled = rows.masked_fill(hidden, float("-inf"))
    alpha = torch.softmax(scaled, -1)
    edges = block_edges(C, out)
    inside = [(s, e) for s, e in edges if s >= start and e <= end]  # the row blocks these rows hold whole
    assert len(inside) >= 2
    for whole, kind in ((scaled, "signed"), (alpha, "weights")):
        # each row block of the whole rows, pooled to one row by adaptive max pooling: the full matrix's cells
        expected = torch.cat([reduce_matrix(whole[:, s - start:e - start], 1, out, kind) for s, e in inside], dim=1)
        got = reduce_row_blocks(whole[:, :, :end], inside, start, out, kind, width=C)
        assert torch.equal(got, expected), kind


def test_short_inputs_keep_every_field(small_blocks):
    r = compute(AttentionConfig(sentence=sentence(40), heads=2), display_max=40)
    assert not r.streamed and r.weights.shape == (2, 40, 40)


def test_model_mode_is_not_streamed():
    pytest.importorskip("tokenizers")
    from attn_gui.engine.model.registry import is_available

    if not is_available("minilm-l6"):
        pytest.skip("the pretrained extra is not installed")
    r = compute(AttentionConfig(sentence=" ".join(["word"] * 20), model="minilm-l6"), display_max=8)
    assert not r.streamed and r.layer_weights is not None


def test_streamed_rows_full_arrays_and_walk_match_a_full_compute(small_blocks):
    cfg = AttentionConfig(sentence=sentence(300), d_model=12, d_k=6, d_v=6, heads=2, causal=True)
    streamed, full = compute(cfg, display_max=50), compute(cfg)
    for name in KINDS:
        for head, token in ((0, 0), (1, 7), (1, 299)):
            assert torch.allclose(streamed.row(name, head, token), getattr(full, name)[head, token], atol=1e-6)
        np.testing.assert_allclose(streamed.numpy(name), full.numpy(name), rtol=1e-5, atol=1e-6)
        assert streamed.shape(name) == tuple(full.scores.shape)
    assert streamed.fields() == full.fields()
    assert set(streamed.to_numpy()) == set(full.to_numpy())
    frame_s, frame_f = make_frame(0, streamed, 50), make_frame(0, full, 50)
    for name in frame_f.arrays:
        np.testing.assert_allclose(frame_s.arrays[name], frame_f.arrays[name], rtol=1e-5, atol=1e-6)
    assert "Following x" in walk_html(streamed, 7, 1)


def test_streamed_export_writes_the_full_arrays(small_blocks, tmp_path):
    from attn_gui.export.arrays import write_arrays

    cfg = AttentionConfig(sentence=sentence(120), d_model=8, d_k=4, d_v=4, heads=2)
    write_arrays(compute(cfg, display_max=30), tmp_path, ["npy"])
    full = compute(cfg)
    for name in ("scores", "weights", "output"):
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), full.numpy(name), atol=1e-6)


def test_weights_are_shared_with_the_cache_and_guarded():
    cfg = AttentionConfig(heads=2, d_model=8)
    a, b = compute(cfg), compute(cfg)
    assert a.w_q.data_ptr() == b.w_q.data_ptr()  # shared, not copied
    with pytest.raises(ValueError, match="read-only"):
        a.numpy("w_q")[0, 0, 0] = 1.0
    before = a.w_q.clone()
    a.w_q.mul_(0)  # a caller's in-place change: the next compute draws again
    c = compute(cfg)
    assert torch.equal(c.w_q, before) and c.w_q.data_ptr() != a.w_q.data_ptr()


def test_token_ids_are_made_once_and_remade_after_a_change():
    cfg = AttentionConfig(sentence="a b a c")
    ids = compute(cfg).token_ids
    assert compute(cfg).token_ids is ids and ids.tolist() == [0, 1, 0, 2]
    ids[0] = 5
    assert compute(cfg).token_ids.tolist() == [0, 1, 0, 2]


@pytest.mark.parametrize("big,expected", [(1.0, True), (1e38, True), (3e38, False), (float("inf"), False),
                                          (-3e38, False), (-1e38, True), (float("nan"), False)])
def test_overflow_check_agrees_with_a_full_scan(big, expected):
    # 1e38: the bound d_k max|q| max|k| = 4e38 overflows, the scores (at most 2e38) do not
    q = torch.randn(2, 6, 4)
    q[1, 3, :2] = big
    k = torch.ones(2, 6, 4)
    scores = q @ k.transpose(-2, -1)
    assert bool(torch.isfinite(scores).all()) == expected
    steps = Steps(q=q, k=k, v=k, head_outputs=q, concat=q, output=q, scores=scores)  # only q, k and ω are read
    assert _scores_finite(steps, AttentionConfig()) == expected

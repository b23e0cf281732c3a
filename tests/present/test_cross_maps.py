"""Cross-attention in the maps and the walk: rows are the sentence's tokens, columns (and the
rows of K, V and X_src) the second sentence's; the walk follows a query across."""

import numpy as np

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import STAGES, describe_cell, map_data
from attn_gui.present.walk import walk_html

CONFIG = AttentionConfig(sentence="the cat sat", source_sentence="le chat était assis", heads=2, d_model=6,
                         kv_heads=1)


def test_maps_label_queries_and_keys_with_their_own_sentences():
    frame = make_frame(0, compute(CONFIG))
    alpha = map_data(frame, "weights", 1)
    assert alpha.matrix.shape == (3, 4) and "3\u00a0×\u00a04" in alpha.title
    assert alpha.row_labels == ["the", "cat", "sat"] and alpha.col_labels == ["le", "chat", "était", "assis"]
    assert alpha.query_rows and describe_cell(alpha, 1, 2).startswith("α[cat → était] = ")
    np.testing.assert_array_equal(alpha.matrix, frame.result.weights[1].numpy())
    for name in ("k", "v", "x_source"):
        data = map_data(frame, name, 1 if name != "x_source" else None)
        assert data.row_labels == ["le", "chat", "était", "assis"] and not data.query_rows, name
    assert map_data(frame, "k", 1).title.startswith("K = X_src W_k")
    assert map_data(frame, "q", 1).title.startswith("Q = X W_q") and map_data(frame, "q", 1).query_rows
    assert any("x_source" in names for _, names, _ in STAGES)


def test_self_attention_keeps_key_rows_as_query_tokens():
    frame = make_frame(0, compute(AttentionConfig()))
    k = map_data(frame, "k", 0)
    assert k.row_labels == list(frame.result.tokens) and k.query_rows  # clicking a row of K follows that token


def test_the_walk_follows_a_query_across_sentences():
    result = compute(CONFIG)
    text = walk_html(result, 2, 0)
    assert "“sat”" in text and "second sentence" in text
    for j, word in enumerate(["le", "chat", "était", "assis"]):
        assert f"<td>{j + 1}</td><td>{word}</td>" in text
    assert f"{float(result.weights[0, 2].sum()):.4f}" in text


def test_rope_angles_map_has_a_row_per_token_and_a_column_per_pair():
    frame = make_frame(0, compute(AttentionConfig(positional="rope", d_k=6, rope_base=100.0, position_offset=2)))
    theta = map_data(frame, "rope_angles")
    assert theta.matrix.shape == (5, 3) and theta.col_labels == ["0", "1", "2"]
    assert theta.title.startswith("θ = (t + 2) · 100^(−2i/d_k)")
    np.testing.assert_allclose(theta.matrix[:, 0], np.arange(2, 7))  # pair 0 turns one radian per position

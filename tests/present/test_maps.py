"""What a map shows: values, titles, labels, hidden tokens and read-outs, from a real compute."""

import numpy as np

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import describe_cell, display_cells, file_stem, map_data, map_id, map_keys, special_tokens
from attn_gui.present.state import ViewState


def frame_of(**kw):
    return make_frame(0, compute(AttentionConfig(**kw)))


def test_hidden_tokens_leave_the_other_numbers_unchanged_in_random_mode():
    frame = frame_of(sentence="the cat sat on the mat", heads=2, causal=True)
    full = frame.result.numpy("weights")[1]
    data = map_data(frame, "weights", 1, hidden=(0, 3))
    keep = [1, 2, 4, 5]
    np.testing.assert_array_equal(data.matrix, full[np.ix_(keep, keep)])
    assert [data.row_labels[b[0]] for b in data.row_blocks] == ["cat", "sat", "the", "mat"]
    assert "(6\u00a0×\u00a06, head\u00a02/2, shown\u00a04\u00a0×\u00a04)" in data.title  # breaks only after a comma
    x = map_data(frame, "x", None, hidden=(0, 3))  # token rows only; the dimension axis stays whole
    np.testing.assert_array_equal(x.matrix, frame.result.numpy("x")[keep])
    assert special_tokens(frame.result) == ()  # random mode has no special tokens to hide


def test_hiding_every_token_shows_the_map_whole():
    frame = frame_of(sentence="one two")
    data = map_data(frame, "weights", 0, hidden=(0, 1))
    assert data.matrix.shape == (2, 2) and data.row_blocks is None


def test_keys_ids_and_file_names():
    frame = frame_of(heads=2)
    keys = map_keys(frame.result)
    assert keys[:3] == [("x", None), ("w_q", 0), ("w_q", 1)] and keys[-1] == ("output", None)
    assert (map_id("weights", 1), file_stem("weights", 1), file_stem("x", None)) == ("weights:1", "weights_head2", "x")


def test_read_out_names_the_pair_and_the_value():
    frame = frame_of()
    data = map_data(frame, "weights", 0)
    value = frame.result.numpy("weights")[0, 1, 4]
    assert describe_cell(data, 1, 4) == f"α[in → intelligent] = {value:.6g}, head 1"
    masked = map_data(frame_of(causal=True), "scaled", 0)
    assert describe_cell(masked, 0, 3).endswith("(masked: this key comes after the query (causal))")


def test_pooled_token_blocks_are_named_by_positions_from_1():
    # 40 tokens pooled into 10 displayed rows of 4: the first block is x_1 to x_4
    frame = make_frame(0, compute(AttentionConfig(sentence=" ".join(f"w{i}" for i in range(40)), d_model=24)),
                       max_side=10)
    data = map_data(frame, "weights", 0)
    assert data.row_blocks[0] == (0, 4) and describe_cell(data, 0, 1).startswith("α[1–4 → 5–8] = ")
    x = map_data(frame, "x", None)  # rows are tokens (from 1), columns are dimensions (indices from 0)
    assert x.col_blocks[0] == (0, 3) and describe_cell(x, 0, 0).startswith("X[1–4, 0–2] = ")


def test_view_state_fits_a_smaller_result():
    result = compute(AttentionConfig(sentence="a b c"))
    state = ViewState(AttentionConfig(), head=3, token=4).fitted(result)
    assert (state.head, state.token) == (0, None)
    assert ViewState(token=2).fitted(result).token == 2


def test_every_field_has_a_place_in_the_window():
    from attn_gui.engine import FIELDS
    from attn_gui.present.maps import STAGES

    placed = [name for _, names, _ in STAGES for name in names]
    assert sorted(placed) == sorted(FIELDS) and len(placed) == len(set(placed))


def test_masked_alpha_cells_are_marked_for_hatching():
    frame = frame_of(sentence="a b c d", heads=2, causal=True)
    data = map_data(frame, "weights", 1)
    upper = np.triu(np.ones((4, 4), dtype=bool), 1)
    np.testing.assert_array_equal(data.masked, upper)  # where torch's causal mask is
    assert np.all(data.matrix[upper] == 0)
    assert "masked" in describe_cell(data, 0, 3) and "masked" not in describe_cell(data, 3, 0)
    assert map_data(frame_of(sentence="a b c d"), "weights", 0).masked is None


def test_grouped_query_maps_show_each_heads_key_value_head():
    from attn_gui.engine import AttentionConfig, compute
    from attn_gui.present.difference import head_difference
    from attn_gui.present.frame import make_frame
    from attn_gui.present.maps import map_data, map_keys
    from attn_gui.present.walk import walk_html

    r = compute(AttentionConfig(heads=4, kv_heads=2, d_model=8, d_k=4, bias=True, positional="rope",
                                window=2, sink_tokens=1, causal=True))
    frame = make_frame(0, r)
    for name, head in map_keys(r):
        data = map_data(frame, name, head)
        assert data.matrix.size
    k3 = map_data(frame, "k", 3)
    np.testing.assert_array_equal(k3.matrix, r.numpy("k")[1])
    assert "K/V head 2/2" in k3.title.replace("\xa0", " ")
    assert "head 4" in walk_html(r, 2, 3).replace("\xa0", " ").replace("&nbsp;", " ")
    assert not head_difference(frame, "k", 0, 1).matrix.any()  # heads 1 and 2 share K/V head 1
    alibi = compute(AttentionConfig(heads=2, positional="alibi"))
    assert map_data(make_frame(0, alibi), "position_bias", 1).matrix.shape == (5, 5)
    assert k3.masked_reason == "masked: this key is after the query or outside the window of 2 " \
                               "(the first key stays visible)"


def test_marked_cells_follow_hidden_tokens_and_pooled_rows():
    result = compute(AttentionConfig())  # 5 tokens
    data = map_data(make_frame(0, result), "weights", 0, hidden=(0,))  # the first token left out
    alpha = result.numpy("weights")[0]
    cells = display_cells(data, [(1, 2), (0, 1), (3, None), (4, 0)])
    assert cells == [(0, 1), (2, None)]  # row 0 and column 0 are not shown
    assert data.matrix[0, 1] == alpha[1, 2]  # the outlined cell holds the marked value
    long = compute(AttentionConfig(sentence=" ".join(f"w{i}" for i in range(1000))))
    pooled = map_data(make_frame(0, long), "weights", 0)
    r, c = display_cells(pooled, [(999, 998)])[0]
    (r0, r1), (c0, c1) = pooled.row_blocks[r], pooled.col_blocks[c]
    assert r0 <= 999 < r1 and c0 <= 998 < c1 and r == len(pooled.row_blocks) - 1

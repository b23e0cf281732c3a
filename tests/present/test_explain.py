"""The "what is this" of each map: formula, shapes (checked against the computed tensors), a sentence."""

import pytest

from attn_gui.engine import AttentionConfig, FIELDS, compute
from attn_gui.present.explain import MEANING, _dims_names, explain


@pytest.mark.parametrize("cfg", [
    AttentionConfig(),
    AttentionConfig(heads=4, kv_heads=2, d_model=8, d_k=2, d_v=5, layout="column", bias=True),
    AttentionConfig(projections=False, d_model=6),
    AttentionConfig(positional="rope", d_k=4, causal=True),
    AttentionConfig(source_sentence="le chat était assis", heads=2, kv_heads=1, d_model=6, d_k=2, d_v=3, bias=True),
])
def test_the_named_shapes_are_the_tensors_shapes(cfg):
    result = compute(cfg)
    dims = cfg.dims
    sizes = {"T": result.seq_len, "T_k": result.key_len, "d_k/2": dims.d_k // 2, "1": 1, "d_model": dims.d_model,
             "d_k": dims.d_k, "d_v": dims.d_v,
             "h·d_v": dims.heads * dims.d_v, "h·d_model": dims.heads * dims.d_model}
    for name in result.fields():
        rows, cols = _dims_names(name, result)
        assert (sizes[rows], sizes[cols]) == result.shape(name)[-2:], name
        assert MEANING[name] in explain(name, result).replace("&#x27;", "'")


def test_every_field_has_a_plain_sentence():
    assert set(MEANING) == set(FIELDS)


def test_alpha_q_and_grouped_keys_say_what_they_are():
    result = compute(AttentionConfig(heads=4, kv_heads=2))
    alpha = explain("weights", result)
    assert alpha.startswith("<b>α = softmax(ω / √d_k)</b>")
    assert "shape T × T = 5 × 5 (query tokens × key tokens), one per head (4 heads)" in alpha
    assert "every row sums to 1" in alpha
    assert "shape T × d_k = 5 × 3 (query tokens × dimensions)" in explain("q", result)
    assert "one per key/value head (2), shared by 2 query heads each" in explain("k", result)
    assert "W_q  (x W)" in explain("w_q", result) and "d_model × d_k = 5 × 3" in explain("w_q", result)



def test_the_figure_caption_gives_the_sentence_sizes_and_head_from_1():
    from attn_gui.present.explain import figure_caption

    result = compute(AttentionConfig(heads=4, kv_heads=2))
    title, sizes = figure_caption(result, head=1)
    assert title == "“When in doubt look intelligent”"
    assert sizes == ("T = 5 tokens  ·  d_model = 5, d_k = 3, d_v = 3  ·  4 heads sharing 2 key/value heads"
                     "  ·  per-head maps: head 2")
    long = compute(AttentionConfig(sentence="word " * 100))
    assert len(figure_caption(long, 0)[0]) <= 142 and figure_caption(long, 0)[0].endswith("…”")

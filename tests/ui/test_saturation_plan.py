"""The saturation note and the Why scaling dock read the plan, not the config's ``scale`` (house-2 finding 8): a
GPT-2 whose own forward does not divide by √d_k (``scale_attn_weights`` off) is said to be so, its fix is a
temperature of √d_k labelled a what-if, and applied, the maps equal transformers' run of the same weights with
``scale_attn_weights`` on; the dock draws the star as the model ran (no scaling)."""

import pytest
import torch
import transformers

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.saturation import saturation_note

from tiny_decoders import SENTENCE, tiny_decoder  # (tests/)


@pytest.fixture(scope="module")
def unscaled(tmp_path_factory):
    """A tiny GPT-2 folder with ``scale_attn_weights`` off, its queries and keys made large enough to saturate."""
    folder = tmp_path_factory.mktemp("gpt2-unscaled")
    hf = tiny_decoder("gpt2", folder, scale_attn_weights=False)
    with torch.no_grad():
        for block in hf.transformer.h:
            block.attn.c_attn.weight[:, :64] *= 40.0  # the query and key columns (d = 32 each)
    hf.save_pretrained(folder)
    return folder


def _alpha(folder, token_ids, **config) -> torch.Tensor:
    """transformers' layer-0 attention weights (h, T, T) of the folder, with ``config`` over its own."""
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager", **config).eval()
    with torch.no_grad():
        return hf(token_ids[None], output_attentions=True).attentions[0][0]


def test_a_model_that_does_not_scale_gets_a_what_if_temperature_of_root_d_k(unscaled):
    config = AttentionConfig(model=str(unscaled), sentence=SENTENCE)
    r = compute(config)
    assert config.scale and not r.resolved.shown.scale  # the config's switch is on; the model does not scale
    assert torch.allclose(r.weights, _alpha(unscaled, r.token_ids), atol=1e-5)  # the model's own, one-hot
    note = saturation_note(r)
    assert note is not None
    assert "itself does not divide its scores by √d_k" in note.text and "what-if" in note.text
    assert note.fix == {"temperature": pytest.approx(8 ** 0.5, abs=1e-4)}  # d_k = 32 / 4 heads
    assert note.fix_label.startswith("What-if: temperature 2.828") and "√8" in note.fix_label
    fixed = compute(config.replace(**note.fix))
    assert fixed.resolved.what_if == ("temperature",)
    # the what-if divides as the scaled model does: transformers with scale_attn_weights on, the same weights
    assert torch.allclose(fixed.weights, _alpha(unscaled, r.token_ids, scale_attn_weights=True), atol=1e-4)
    again = saturation_note(fixed)  # still one-hot: a higher temperature, never √d_k twice
    assert again is None or (again.fix_label.startswith("What-if: temperature")
                             and again.fix["temperature"] > note.fix["temperature"] and "÷" not in again.fix_label)


def test_the_why_scaling_dock_draws_the_scaling_the_model_ran(unscaled, qtbot):
    from attn_gui.present.frame import make_frame
    from attn_gui.present.state import ViewState
    from attn_gui.ui.docks.scaling import ScalingPanel

    config = AttentionConfig(model=str(unscaled), sentence=SENTENCE)
    frame = make_frame(1, compute(config))
    panel = ScalingPanel()
    qtbot.addWidget(panel)
    panel.show_frame(frame, ViewState(config))
    assert "no scaling" in panel.plot.curve.titleLabel.text  # the config's scale is on; the model's is off
    assert panel.fixButton.text() == frame.saturation.fix_label and panel.fixButton.text().startswith("What-if")

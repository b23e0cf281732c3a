"""A StableLM or Falcon folder (a model_type outside the table) opened in the window: transformers' α in the maps, the
steps no hook sees titled "not captured", and the status bar saying the model is read through transformers."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from test_via_transformers import SENTENCE, outside_folder  # noqa: E402  (tests/engine/)


@pytest.mark.parametrize("kind", ["stablelm", "falcon"])
def test_a_folder_outside_the_table_opens_through_transformers(kind, window, qtbot, tmp_path):
    folder = tmp_path / kind
    hf = outside_folder(kind, folder)
    window.edit_config({"sentence": SENTENCE})
    assert window.files.open_model(str(folder))
    qtbot.waitUntil(lambda: window.frame.result.config.model == str(folder), timeout=30000)
    r = window.frame.result
    with torch.no_grad():
        out = hf(torch.tensor(r.token_ids.tolist())[None], output_attentions=True)
    view = window.canvas.item_of("weights:0")
    np.testing.assert_allclose(view.image.image, out.attentions[0][0, 0].numpy(), atol=1e-5)
    assert "read through transformers" in window.statusLabel.text()
    window.focus_on(None)  # every map: those no hook sees say so, with no number (Falcon's q, k on one side of RoPE)
    qtbot.waitUntil(lambda: window.canvas.item_of("scores:0") is not None, timeout=30000)
    assert {"scores", "scaled"} <= set(r.not_captured)
    for step in r.not_captured:
        item = window.canvas.item_of(f"{step}:0")
        assert f"not captured for {kind} through transformers" in item.data.title
        assert np.isnan(item.data.matrix).all()
    window.focus.show_walk(r, 1, 0)  # following a token: the walk says what it lacks instead of numbers


def test_the_docks_answer_as_the_plan_for_a_folder_read_through_transformers(window, qtbot, tmp_path):
    """The KV cache, Interventions, Why and Circuit docks all read ``Plan.can``: a causal LM read through
    transformers generates no cache walk and is intervened on by none (the KV-cache dock used to offer it)."""
    from attn_gui.ui.docks import kv_cache, why

    folder = tmp_path / "stablelm"
    outside_folder("stablelm", folder)
    window.edit_config({"sentence": SENTENCE})
    assert window.files.open_model(str(folder))
    qtbot.waitUntil(lambda: window.frame.result.config.model == str(folder), timeout=30000)
    state = window._state
    docks = {name: window.docks.panel(name) for name in ("kv-cache", "interventions", "why", "circuit")}
    for panel in docks.values():
        panel.follow(state)
    assert docks["kv-cache"].config is None and docks["kv-cache"].note.text() == kv_cache.NEEDS_DECODER
    assert docks["interventions"].config is None and not docks["interventions"].strikeButton.isEnabled()
    assert docks["why"].config is None and docks["why"].message.text() == why.NEEDS_DECODER
    assert docks["circuit"].config is None and docks["circuit"].message.text().startswith("Circuits need")

"""Only what the frame needs, first: a decoder's run layer by layer (``llama.Run``), kept, resumed. Peers: the same
model's whole forward (``llama.forward``) and transformers' eager attentions; the layers run, counted."""

import pytest
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import source
from attn_gui.engine.base import progress
from attn_gui.engine.model.decoder import source as decoder, forward as llama
from tiny_decoders import SENTENCE, tiny_decoder  # (tests/)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama6")
    return str(folder), tiny_decoder("llama", folder, layers=6)


@pytest.fixture
def counted(monkeypatch):
    """The layers the decoder runs, as a list of their indices."""
    ran = []
    layer = llama.layer_pieces

    def counting(h, w, index, *args, **kwargs):
        ran.append(index)
        return layer(h, w, index, *args, **kwargs)

    monkeypatch.setattr(llama, "layer_pieces", counting)
    decoder._run.cache_clear()
    return ran


def test_first_maps_run_the_layers_before_the_shown_one_and_the_rest_goes_on_from_there(model, counted):
    path, hf = model
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layer=3)
    first = compute(cfg, first=True)
    assert counted == [0, 1, 2] and first.model_run.pending == 3  # layers 1 to 3 of 6
    assert first.next_tokens is None and first.layer_weights is None
    assert torch.allclose(first.weights, out.attentions[3][0], atol=1e-5, rtol=0)
    inside = compute(cfg.replace(layer=1), first=True)  # a layer inside what has run: no layer runs
    assert counted == [0, 1, 2] and torch.allclose(inside.weights, out.attentions[1][0], atol=1e-5, rtol=0)
    whole = compute(cfg)  # the rest, from the kept residual: layers 4 to 6 once each
    assert counted == [0, 1, 2, 3, 4, 5] and whole.model_run.pending is None
    for layer in range(6):
        assert torch.allclose(whole.layer_weights[layer], out.attentions[layer][0], atol=1e-5, rtol=0)
    assert whole.next_tokens is not None
    assert compute(cfg.replace(layer=5), first=True).model_run.pending is None  # all has run: the whole result


def test_a_run_stopped_midway_goes_on_from_its_last_whole_layer(model, counted, monkeypatch):
    """Ctrl+C (KeyboardInterrupt) inside layer 3 leaves the kept run as it was after layer 2, nothing of layer 3
    kept (its summaries dropped); going on gives the uninterrupted forward, exactly."""
    path, _ = model
    w, shape = source(path).decoder("cpu", torch.float32)
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    whole = llama.forward(w, ids, shape)
    run = llama.Run(w, ids, shape)
    run.advance(2)
    layer = llama.layer_pieces

    def interrupted(h, w, index, *args, into=None, **kwargs):
        if into is not None:
            into[2].append({"half": "written"})  # as kept_attention appends the layer's summaries, then stopped
        raise KeyboardInterrupt

    monkeypatch.setattr(llama, "layer_pieces", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run.advance(4)
    assert run.done == 2 and len(run.sums) == 2 and len(run.inputs) == 2
    monkeypatch.setattr(llama, "layer_pieces", layer)
    done = []
    with progress.watching(progress.Watch(lambda n, total: done.append((n, total)))):
        resumed = run.finish()
    assert done == [(2, 6), (3, 6), (4, 6), (5, 6), (6, 6)]  # where it starts, then a progress count per layer
    assert torch.equal(resumed.weights, whole.weights) and torch.equal(resumed.logits, whole.logits)
    assert torch.equal(resumed.summaries.sink, whole.summaries.sink)

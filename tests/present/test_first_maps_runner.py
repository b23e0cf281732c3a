"""The window's worker computes a large decoder in two frames (``present.runner``): the shown layer's first maps,
then the rest of the run; a cancel (engine.progress) stops the rest after its layer in progress, and a later request
goes on from there. Peer: transformers' eager attentions on the dequantized weights of a tiny Q4_0 GGUF."""

import gguf
import pytest
import torch

from attn_gui.engine import AttentionConfig
from attn_gui.engine.model.registry import source
import attn_gui.engine.model.plan as planning
from attn_gui.engine.model.plan import plan
from attn_gui.engine.base.progress import Watch
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.engine.readers.catalog import model_spec
from attn_gui.present import runner
from gguf_writing import quantized_llama  # (tests/)
from tiny_decoders import SENTENCE  # (tests/)


@pytest.fixture(scope="module")
def q4(tmp_path_factory):
    path, hf = quantized_llama(tmp_path_factory.mktemp("q4") / "q4_0.gguf", lambda _: gguf.GGMLQuantizationType.Q4_0)
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    return path, out


@pytest.fixture
def large(monkeypatch):
    monkeypatch.setattr(planning, "FIRST_MAPS_FROM", 0)  # the tiny model counts as large
    decoder._run.cache_clear()


def test_a_small_decoder_comes_in_one_frame(q4):
    path, out = q4
    decoder._run.cache_clear()
    assert not runner.first_maps_first(AttentionConfig(sentence=SENTENCE, model=path))
    frame = runner.run_request(1, AttentionConfig(sentence=SENTENCE, model=path, layer=1), first=True)
    assert not runner.is_partial(frame) and frame.result.next_tokens is not None


def test_first_maps_then_the_rest_each_equal_transformers(q4, large):
    path, out = q4
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layer=1)
    first = runner.run_request(1, cfg, first=True)
    assert runner.is_partial(first) and first.result.model_run.pending == 1  # layer 1 of 2 has run
    assert first.result.next_tokens is None and first.result.layer_weights is None
    assert torch.allclose(first.result.weights, out.attentions[1][0], atol=1e-5, rtol=0)
    whole = runner.run_request(1, cfg)
    assert not runner.is_partial(whole) and whole.result.next_tokens is not None
    for layer in range(2):
        assert torch.allclose(whole.result.layer_weights[layer], out.attentions[layer][0], atol=1e-5, rtol=0)


def test_a_cancel_stops_the_rest_and_a_later_request_goes_on_from_there(q4, large):
    path, out = q4
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layer=0)
    watch = Watch()
    first = runner.run_request(1, cfg, watch=watch, first=True)
    assert first.result.model_run.pending == 0  # layer 0's maps need no layer run
    asked = []

    def report(done: int, total: int) -> None:  # the window's cancel (Esc, a newer request) once a layer has run
        asked.append(done)
        if done == 1:
            watch.cancel()

    watch.report = report
    stopped = runner.run_request(1, cfg, watch=watch)  # the same watch: both halves of one request
    assert isinstance(stopped, runner.Failure) and stopped.cancelled and asked == [0, 1]
    ids = tuple(source(path).tokenize(SENTENCE).token_ids)
    kept = decoder.kept_run(model_spec(path), ids, "cpu", torch.float32, plan(cfg).layers)
    assert kept.done == 1  # kept after its last whole layer
    whole = runner.run_request(2, cfg)
    assert whole.result.model_run.pending is None
    for layer in range(2):
        assert torch.allclose(whole.result.layer_weights[layer], out.attentions[layer][0], atol=1e-5, rtol=0)

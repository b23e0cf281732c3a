"""A real model at its real length (issue 32): a tiny random Llama folder of 65,536 positions read past 512 tokens.

The peers: transformers' eager ``LlamaForCausalLM`` (``output_attentions``) for every layer's α at T = 1,024, and
the sink mass, mean distance, distance decay and top-k keys computed here with plain torch from those attentions
(and the head metrics by ``engine.metrics.head_metrics`` on them);
the kernel's peak RSS (``resource.getrusage`` and VmHWM, reset after loading, in a subprocess) for the
streamed run at T = 8,192.
"""

import json
import subprocess
import sys

import pytest
import torch
import transformers

from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.analysis.metrics import METRICS, causal_visible, head_metrics
from attn_gui.engine.kernel.summaries import decay_edges

from transformers_peer import WORDS, word_tokenizer  # (tests/)

POSITIONS = 65536


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=len(WORDS),
                                      eos_token_id=2, bos_token_id=1, tie_word_embeddings=False,
                                      max_position_embeddings=POSITIONS, rope_theta=10000.0)
    hf = transformers.LlamaForCausalLM(config).eval()
    hf.config._attn_implementation = "eager"
    with torch.no_grad():  # random, not one, norm gains: a dropped one would show
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.3)
    path = tmp_path_factory.mktemp("long-llama")
    hf.save_pretrained(path)
    word_tokenizer().save(str(path / "tokenizer.json"))
    return str(path), hf


def sentence(T: int, seed: int = 0) -> str:
    g = torch.Generator().manual_seed(seed)
    return " ".join(WORDS[3 + i] for i in torch.randint(0, len(WORDS) - 3, (T,), generator=g).tolist())


@pytest.fixture(scope="module")
def run_1024(folder):
    path, hf = folder
    text = sentence(1024)
    ids = torch.tensor(source(path).tokenize(text).token_ids)
    assert len(ids) == 1024
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    return path, text, [a[0] for a in out.attentions]  # L of (h, T, T)


def test_the_limit_is_the_models_own_length(folder):
    path, _ = folder
    assert model_spec(path).max_tokens == POSITIONS


def test_every_layer_at_1024_tokens_equals_transformers(run_1024):
    path, text, theirs = run_1024
    result = compute(AttentionConfig(sentence=text, model=path))
    assert result.layer_weights.shape == (2, 4, 1024, 1024)
    for layer, alpha in enumerate(theirs):
        assert torch.allclose(result.layer_weights[layer], alpha, atol=1e-5, rtol=0), layer


def _peer_summaries(alpha: torch.Tensor):
    """Sink mass, mean distance and decay of one layer's α (h, T, T), written out plainly from the definitions."""
    h, T, _ = alpha.shape
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    dist = (i - j).abs().double()
    sink = alpha[:, 1:, 0].double().mean(-1)
    distance = (alpha.double() * dist).sum(-1).mean(-1)
    edges = decay_edges(T)
    decay = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        pairs = (j <= i) & (dist >= lo) & (dist < hi)  # causal: the visible pairs at these distances
        decay.append(alpha.double()[:, pairs].mean(-1) if pairs.any() else torch.full((h,), float("nan")))
    return sink, distance, torch.stack(decay, -1)


@pytest.mark.parametrize("display_max", [None, 384])
def test_summaries_at_1024_tokens_equal_those_of_transformers_attentions(run_1024, display_max):
    path, text, theirs = run_1024
    result = compute(AttentionConfig(sentence=text, model=path), display_max=display_max)
    s = result.summaries
    assert (result.layer_weights is None) == (display_max is not None)
    from attn_gui.present.insight import metrics_table

    table = metrics_table(result)  # the metrics dock's table, streamed or not
    assert table.shape == (2, 4) and table.layers == (0, 1)
    for layer, alpha in enumerate(theirs):
        sink, distance, decay = _peer_summaries(alpha)
        assert torch.allclose(s.sink[layer].double(), sink, atol=1e-6)
        assert torch.allclose(s.distance[layer].double(), distance, atol=1e-3, rtol=1e-5)
        assert torch.allclose(s.decay[layer].double(), decay, atol=1e-7, equal_nan=True)
        peer = head_metrics(alpha, causal_visible(1024))  # the metrics table's own definitions, on the peer's α
        for name in METRICS:
            assert torch.allclose(s.metrics[name][layer], peer[name], atol=1e-4, rtol=1e-5), name
            assert table.values[name][layer] == pytest.approx(peer[name].numpy(), abs=1e-4, rel=1e-5), name
        top = alpha.topk(5, dim=-1)
        assert torch.allclose(s.top_weights[layer], top.values, atol=1e-5)
        # the same keys wherever the peer's order is not a near-tie; -1 where a query sees fewer than 5 keys
        ours = s.top_keys[layer].long()
        seen = torch.arange(1024)[None, :, None] >= torch.arange(5)[None, None, :]  # query i sees i + 1 keys
        assert (ours[~seen.expand_as(ours)] == -1).all()
        gaps = torch.cat([top.values[..., :-1] - top.values[..., 1:], torch.ones_like(top.values[..., :1])], -1)
        clear = seen.expand_as(ours) & (gaps > 1e-6) & torch.cat([torch.ones_like(gaps[..., :1], dtype=torch.bool),
                                                                   gaps[..., :-1] > 1e-6], -1)
        assert clear.float().mean() > 0.5
        assert (ours[clear] == top.indices[clear]).all()
        # and in a near-tie, a key whose peer α is the peer's α at that rank
        picked = alpha.gather(-1, ours.clamp(min=0))
        assert torch.allclose(picked[seen.expand_as(ours)], top.values[seen.expand_as(ours)], atol=1e-6)


def test_streamed_at_1024_tokens_pools_each_layer_as_the_full_maps(run_1024):
    from attn_gui.engine.kernel.reduce import reduce_matrix

    path, text, theirs = run_1024
    result = compute(AttentionConfig(sentence=text, model=path, layer=1), display_max=384)
    assert result.layer_weights is None and result.weights is None
    assert result.display("weights", 384, 384).shape == (4, 384, 384)
    for layer, alpha in enumerate(theirs):
        assert torch.allclose(result.summaries.maps[layer], reduce_matrix(alpha, 384, 384, "weights"), atol=1e-5)
    assert torch.allclose(result.shown["weights"], reduce_matrix(theirs[1], 384, 384, "weights"), atol=1e-5)


def test_the_streamed_shown_layer_is_made_once_with_its_maps(run_1024, monkeypatch):
    """The streamed run keeps the shown layer's pooled ω and scaled scores and each row's largest α as it goes:
    they equal the full compute's pooled maps (whose α is transformers') and the peer's row maxima, and the
    shown layer is not computed a second time; another layer shown after it is, from the kept run's X."""
    import importlib

    from attn_gui.engine.kernel.reduce import reduce_matrix

    blocks_module = importlib.import_module("attn_gui.engine.kernel.blocks")
    path, text, theirs = run_1024
    full = compute(AttentionConfig(sentence=text, model=path, layer=1))  # every T x T field kept (<= 4,096)
    assert torch.allclose(full.weights, theirs[1], atol=1e-5)
    again = []
    blocks = blocks_module.pooled_blocks
    monkeypatch.setattr(blocks_module, "pooled_blocks", lambda *a, **k: again.append(1) or blocks(*a, **k))
    result = compute(AttentionConfig(sentence=f"{text} {WORDS[3]}", model=path, layer=1), display_max=384)
    assert result.streamed and again == []  # the shown layer came with the streamed run
    shorter = compute(AttentionConfig(sentence=text, model=path, layer=1), display_max=384)
    for name in ("scores", "scaled"):
        assert torch.allclose(shorter.shown[name], reduce_matrix(getattr(full, name), 384, 384, "signed"),
                              atol=1e-5, rtol=1e-5), name
    assert shorter.pooled is not None and shorter.pooled.row_max is not None
    assert torch.allclose(shorter.pooled.row_max, theirs[1].amax(-1), atol=1e-6)
    for name in ("q", "k", "v", "head_outputs", "output"):
        assert torch.allclose(getattr(shorter, name), getattr(full, name), atol=1e-5), name
    other = compute(AttentionConfig(sentence=text, model=path, layer=0), display_max=384)  # the kept run, layer 0
    assert again and torch.allclose(other.shown["weights"], reduce_matrix(theirs[0], 384, 384, "weights"), atol=1e-5)


PEAK = """
import json, resource, sys, torch
from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import source
path, T = sys.argv[1], int(sys.argv[2])
words = {words!r}
text = " ".join(words[3 + (i * 7919) % (len(words) - 3)] for i in range(T))
source(path).load()
torch.ones(1)
status = lambda key: next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key))
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from the loaded model
before, peak_before = status("VmRSS:"), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
r = compute(AttentionConfig(sentence=text, model=path), display_max=384)
grew = status("VmHWM:") - before  # over the resident size, not over an earlier transient peak
rusage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
print(json.dumps(dict(grew_kib=grew, rusage_kib=rusage, shape=list(r.display("weights", 384, 384).shape), T=r.seq_len,
                      full=r.layer_weights is not None, sink=r.summaries.sink.shape[0])))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB: Linux")
def test_8192_tokens_stream_in_little_memory(folder):
    path, _ = folder
    code = PEAK.format(words=WORDS)
    done = subprocess.run([sys.executable, "-c", code, path, "8192"], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["T"] == 8192 and got["shape"] == [4, 384, 384] and not got["full"] and got["sink"] == 2
    # the full maps alone would be 2 layers x 4 heads x 8192² x 4 bytes = 2 GiB
    assert got["grew_kib"] <= 1.5 * 2**20 and got["rusage_kib"] <= 1.5 * 2**20, got


def test_a_text_past_the_models_length_is_refused_in_one_line(folder, tmp_path, capsys):
    path, _ = folder
    short = tmp_path / "short"
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=16, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2, vocab_size=len(WORDS),
        max_position_embeddings=600)).save_pretrained(short)
    word_tokenizer().save(str(short / "tokenizer.json"))
    assert model_spec(str(short)).max_tokens == 600
    with pytest.raises(ConfigError, match="reads at most 600 tokens; this text has 601"):
        compute(AttentionConfig(sentence=sentence(601), model=str(short)), display_max=384)
    from attn_gui.cli import main

    out = tmp_path / "out"
    capsys.readouterr()  # transformers' own progress while saving the folder
    assert main(["export", "--model", str(short), "--sentence", sentence(601), "--format", "npy",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "reads at most 600 tokens" in err and "Traceback" not in err, err


def test_decoding_after_a_long_prefill_equals_transformers(folder):
    from attn_gui.engine.run.decoding import FULL_MAX, Decoder

    path, hf = folder
    text = sentence(FULL_MAX + 88)
    decoder = Decoder(AttentionConfig(sentence=text, model=path))
    assert decoder.prefill.weights is None  # streamed: no L x h x T x T tensor
    step = decoder.step()
    ids = torch.tensor(decoder.token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    assert int(out.logits[0, -2].argmax()) == decoder.token_ids[-1]  # greedy: transformers' next token
    for layer, alpha in enumerate(out.attentions):
        assert torch.allclose(decoder.prefill.last_weights[layer], alpha[0, :, -2, :-1], atol=1e-5), layer
        assert torch.allclose(step.weights[layer], alpha[0, :, -1], atol=1e-5), layer  # (h, P + 1)


def test_memory_is_estimated_before_computing_and_refused_in_one_line(folder, monkeypatch):
    import importlib

    from attn_gui.engine import TooLargeError

    C = importlib.import_module("attn_gui.engine.run.compute")  # the module (the package exports the function)

    path, _ = folder
    cfg = AttentionConfig(sentence=sentence(4096), model=path)
    every_map = 2 * 4 * 4096**2 * 4  # the layers' alpha kept whole: L x h x T x T float32
    assert C.estimate_bytes(cfg) >= every_map
    streamed = C.estimate_bytes(cfg, display_max=384)
    assert streamed < every_map / 4
    # streamed, twice the tokens cost less than twice the memory (T d and r², not L h T²: that would be 4 times)
    assert C.estimate_bytes(cfg.replace(sentence=sentence(8192)), display_max=384) < 2 * streamed
    monkeypatch.setattr(C, "free_bytes", lambda device: 100 * 2**20)
    with pytest.raises(TooLargeError, match=r"needs about .*; cpu has 100\.0 MiB free"):
        compute(cfg)


def test_interventions_and_attribution_keep_to_512_tokens(folder):
    from attn_gui.engine.analysis.attribution.trace import trace
    from attn_gui.engine.analysis.interventions import ablate

    path, _ = folder
    cfg = AttentionConfig(sentence=sentence(513), model=path)
    for run in (lambda: ablate(cfg, ((0, 0),)), lambda: trace(cfg)):
        with pytest.raises(ConfigError, match="read at most 512 tokens .*; this text has 513"):
            run()

"""The faithfulness curve computed fast (issue 63) against the dense computation it replaced, on tiny random decoders
(float64): every point equals a patched split forward per k (``Split.run`` with a ``Patch``, whose edge patching
tests/engine/test_circuits.py checks against transformers' modules by hand), the smallest circuit equals the plain
bisection over those runs, several k in one forward equal each alone, and a cancelled curve keeps its edges and the
points measured by then."""

from __future__ import annotations

import shutil

import pytest
import torch
import transformers

from attn_gui.engine.analysis.circuits import Cancelled, circuit, prepare
from attn_gui.engine.analysis.circuits.curve import patched_metrics, starts
from attn_gui.engine.analysis.circuits.scores import (default_ks, edge_scores, faithfulness, keep_top, ranked,
                                                        sweep_ks)
from attn_gui.engine.analysis.circuits.split import Patch
from test_circuits import TASK  # tests/engine/
from tiny_decoders import WORDS, tiny_decoder  # tests/


def _neox(folder, llama_folder) -> None:
    """A tiny GPT-NeoX (attention and the MLP side by side: ``Graph.parallel``), its norms and biases random."""
    config = transformers.AutoConfig.for_model("gpt_neox", hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                               num_attention_heads=4, vocab_size=len(WORDS), eos_token_id=2,
                                               bos_token_id=1, tie_word_embeddings=False, max_position_embeddings=128,
                                               rotary_pct=0.5)
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0, 0.3).add_(1.0 if name.endswith("weight") else 0.0)
            elif p.dim() == 2:
                p.mul_(10.0)  # at 0.02 its attention is near uniform
    hf.save_pretrained(folder)
    shutil.copy(llama_folder / "tokenizer.json", folder / "tokenizer.json")


@pytest.fixture(scope="module", params=["llama", "gpt2", "qwen2", "gpt_neox"])
def pairs(request, tmp_path_factory):
    """A 3-layer tiny decoder's prepared pairs (two batches: two lengths), float64."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "gpt_neox":
        llama = tmp_path_factory.mktemp("llama-tokenizer")
        tiny_decoder("llama", llama)
        _neox(folder, llama)
    else:
        tiny_decoder(request.param, folder, layers=3)
    return prepare(str(folder), TASK, dtype="float64", batch=2)


def _dense(pairs, order):
    """The recovered fraction at k as the curve computed it before issue 63: one patched split forward per batch
    from the clean embedding, every edge but the top k read from the corrupted run (k -> fraction, remembered)."""
    split, g = pairs.split, pairs.split.graph
    with torch.no_grad():
        runs = [(batch, split.run(split.embed(batch.clean), batch), split.run(split.embed(batch.corrupt), batch))
                for batch in pairs.batches]
    clean = sum(float(good.metric.double().sum()) for _, good, _ in runs)
    corrupt = sum(float(bad.metric.double().sum()) for _, _, bad in runs)
    seen: dict[int, float] = {}

    def at(k: int) -> float:
        if k not in seen:
            total = 0.0
            for batch, _, bad in runs:
                with torch.no_grad():
                    patched = split.run(split.embed(batch.clean), batch,
                                        patch=Patch(keep_top(order, k, tuple(g.allowed.shape)), bad))
                total += float(patched.metric.double().sum())
            seen[k] = (total - corrupt) / (clean - corrupt)
        return seen[k]
    return at


def test_the_curve_equals_the_dense_patched_runs_and_its_bisection(pairs):
    g = pairs.split.graph
    scores = edge_scores(pairs)
    dense = _dense(pairs, ranked(scores, g.allowed))
    every = [dense(k) for k in range(g.n_edges + 1)]  # the dense sweep: a patched split forward at every k
    once = 0
    for target in (0.5, 0.8, 0.95):
        curve = faithfulness(pairs, scores, target=target)
        assert curve.complete and set(curve.ks) <= set(sweep_ks(g.n_edges)) | {curve.smallest}
        assert max(abs(a - every[k]) for k, a in zip(curve.ks, curve.recovered, strict=True)) < 1e-9
        reached = [k for k in sweep_ks(g.n_edges)[:-1] if every[k] >= target]
        if reached:  # the decades above the first that reaches the target are not measured (the flat end)
            assert max(k for k in curve.ks if k < g.n_edges) <= max(reached[0], curve.smallest or 0)
        first = next((k for k, v in enumerate(every) if v >= target), None)
        if first is None:
            assert curve.smallest is None
            continue
        assert curve.smallest is not None  # where it crosses: below the target at k - 1, at or above it at k
        assert every[curve.smallest] >= target and (curve.smallest == 0 or every[curve.smallest - 1] < target)
        crossings = sum((a < target) != (b < target) for a, b in zip(every, every[1:], strict=False))
        if crossings == 1:  # the curve crosses the target once: the bisection's k is the dense sweep's smallest
            assert curve.smallest == first
            once += 1
    assert once >= 1  # the check compared one smallest circuit at least
    assert len(set(round(v, 6) for v in every)) > 3  # the curve is not flat: the check reads something


def test_given_ks_are_measured_each_and_bisected_between(pairs):
    g = pairs.split.graph
    scores = edge_scores(pairs)
    dense = _dense(pairs, ranked(scores, g.allowed))
    for target in (0.5, 0.8, 0.95):
        curve = faithfulness(pairs, scores, target=target, ks=default_ks(g.n_edges))
        assert curve.ks == default_ks(g.n_edges) and curve.complete
        want = [dense(k) for k in curve.ks]
        assert max(abs(a - b) for a, b in zip(curve.recovered, want, strict=True)) < 1e-9
        above = [k for k, v in zip(curve.ks, want, strict=True) if v >= target]
        if not above:
            assert curve.smallest is None
            continue
        high = above[0]
        low = max([k for k in curve.ks if k < high], default=-1)
        while high - low > 1:  # the bisection before issue 63, on the dense runs
            mid = (low + high) // 2
            high, low = (mid, low) if dense(mid) >= target else (high, mid)
        assert curve.smallest == high


def test_several_k_in_one_forward_equal_each_alone_and_begin_where_they_differ(pairs):
    g = pairs.split.graph
    order = ranked(edge_scores(pairs), g.allowed)
    ks = [0, 1, 3, g.n_edges // 3, g.n_edges - 2, g.n_edges]
    keeps = torch.stack([keep_top(order, k, tuple(g.allowed.shape)) for k in ks])
    for i, batch in enumerate(pairs.batches):
        corrupt, clean = pairs.run("corrupt", i), pairs.run("clean", i)
        with torch.no_grad():
            together = patched_metrics(pairs.split, batch, keeps, corrupt, lambda clean=clean: clean)
            for j in range(len(ks)):
                alone = patched_metrics(pairs.split, batch, keeps[j:j + 1], corrupt, lambda clean=clean: clean)[0]
                dense = pairs.split.run(pairs.split.embed(batch.clean), batch, patch=Patch(keeps[j], corrupt)).metric
                assert torch.allclose(together[j], alone, atol=1e-12, rtol=0)
                assert torch.allclose(alone, dense, atol=1e-12, rtol=0)
        assert torch.allclose(together[0], corrupt.metric, atol=1e-12)  # k = 0: the corrupted run
        assert torch.allclose(together[-1], clean.metric, atol=1e-12)  # every edge: the clean run
    assert starts(pairs.split, order, 0)[0] == g.layers and starts(pairs.split, order, g.n_edges)[1] == g.layers


def test_progress_counts_points_and_the_estimate_comes_once(pairs):
    scores = edge_scores(pairs)
    seen: list[tuple[int, int, str]] = []
    told: list[tuple[float, int]] = []
    curve = faithfulness(pairs, scores, progress=lambda d, t, w: seen.append((d, t, w)),
                         estimate=lambda s, n: told.append((s, n, seen[-1][0])))
    assert {w for _, _, w in seen} == {"faithfulness points"}
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen) and seen[-1][0] == seen[-1][1]
    assert seen[-1][0] >= len(curve.ks) and all(d <= t for d, t, _ in seen)
    assert len(told) == 1 and told[0][0] >= 0
    seconds, points, done = told[0]  # the rest at its longest: the powers of ten to every edge, the widest search
    assert seen[-1][0] - done <= points <= seen[0][1] - done


def test_a_cancelled_curve_keeps_the_edges_and_the_points_measured(pairs):
    folder = pairs.label
    full = faithfulness(pairs, edge_scores(pairs))
    calls = {"n": 0}

    def cancelled() -> bool:  # stop after the curve's first forward
        return calls["n"] >= 1

    def progress(done: int, total: int, what: str) -> None:
        calls["n"] += what == "faithfulness points"

    found = circuit(folder, TASK, "eap", progress=progress, cancelled=cancelled, prepared=pairs)
    f = found.faithfulness
    assert f is not None and not f.complete and f.smallest is None and 0 < len(f.ks) < len(full.ks)
    for k, v in zip(f.ks, f.recovered, strict=True):
        assert v == pytest.approx(full.at(k), abs=1e-12)
    assert torch.equal(found.scores, edge_scores(pairs))  # the edges found stay
    with pytest.raises(Cancelled):  # before the edges are scored, nothing is kept
        circuit(folder, TASK, "eap", cancelled=lambda: True, prepared=pairs)

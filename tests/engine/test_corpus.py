"""The corpus census (``engine.corpus``): over 200 sentences, every head's statistics equal the same
means computed here from transformers' eager attentions on the same tiny random Llama (1e-4); an
interrupted run resumes to the same numbers without counting a shard twice; the four corpus
formats read the same passages; bad corpora are refused in one message.
"""

import functools
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from attn_gui.engine.analysis.corpus.read import CorpusError, passage_limit, read_corpus
from attn_gui.engine.analysis.corpus.stats import Pattern, STATS
from attn_gui.engine.analysis.corpus.shards import Settings, dla_refusal
from attn_gui.engine.analysis.corpus.census import census, run_in_process
from attn_gui.engine.analysis.corpus.outputs import read_examples, read_heads
from attn_gui.engine.readers.catalog import model_spec
from attn_gui.engine.model.registry import source
from corpus_data import WORDS, llama_folder, sentences  # tests/

run = functools.partial(run_in_process, threads=1)  # tiny matrices: one thread is the fastest


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    return str(path), llama_folder(path)


@pytest.fixture(scope="module")
def text_corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "sentences.txt"
    path.write_text("\n".join(sentences()) + "\n\n")
    return path


@pytest.fixture(scope="module")
def peer(model, text_corpus):
    """Each passage's token ids and transformers' eager attentions, (L, h, T, T) float64."""
    path, hf = model
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = []
        for text in read_corpus(text_corpus).passages:
            ids = list(source(path).tokenize(text).token_ids)
            with torch.no_grad():
                attentions = hf(torch.tensor([ids]), output_attentions=True).attentions
            out.append((ids, torch.stack([a[0] for a in attentions]).double()))
        return out
    finally:
        torch.set_num_threads(before)


def reference(peer):
    """Each statistic's corpus mean from transformers' attentions, written out row by row (positions from 0)."""
    sums, counts = {}, {}

    def add(name, values):  # values: (L, h) for one counted row
        sums[name] = sums.get(name, 0) + values
        counts[name] = counts.get(name, 0) + 1

    for ids, alpha in peer:
        for i in range(1, len(ids)):
            add("previous", alpha[:, :, i, i - 1])
            add("sink", alpha[:, :, i, 0])
            add("distance", sum(alpha[:, :, i, j] * abs(i - j) for j in range(i + 1)))
            add("entropy", torch.special.entr(alpha[:, :, i, : i + 1]).sum(-1))  # -x ln x, 0 at 0
            same = [j for j in range(i) if ids[j] == ids[i]]
            if same:
                add("duplicate", sum(alpha[:, :, i, j] for j in same))
            after = [j + 1 for j in same if j + 1 < i]
            if after:
                add("induction", sum(alpha[:, :, i, j] for j in after))
    return {name: (sums[name] / counts[name]).numpy() for name in sums}, counts


def test_every_statistic_equals_transformers_attentions(model, text_corpus, peer, tmp_path):
    path, _ = model
    corpus = read_corpus(text_corpus)
    assert len(corpus.passages) == 200 and corpus.blank == 1
    result = census(corpus, tmp_path / "out", Settings(model=path, shard_size=32), runner=run)
    assert peer[0][0] == [WORDS.index(w) for w in corpus.passages[0].split()]  # the tokens are the words
    want, counts = reference(peer)
    heads = read_heads(tmp_path / "out")
    assert heads["layer"][:, 0].tolist() == [1, 2] and heads["head"][0].tolist() == [1, 2, 3, 4]
    for name in STATS:
        assert result.totals.counts[name] == counts[name], name
        np.testing.assert_allclose(heads[name], want[name], atol=1e-4, rtol=0, err_msg=name)
    assert np.ptp(heads["previous"]) > 0.05  # the heads differ: the check tells them apart
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["passages"] == 200 and manifest["cut"] == 0 and manifest["shards"] == 7
    assert manifest["tokens"] == sum(len(t.split()) for t in corpus.passages)


@pytest.fixture(scope="module")
def hooked(model, text_corpus):
    """Each passage's token ids, o_proj's inputs (L, T, h d_v), the final norm's input (T, d), v_proj's outputs
    (L, T, g d_v) and the attentions (L, h, T, T), from transformers' own forward through hooks."""
    path, hf = model
    captured = {}
    handles = [layer.self_attn.o_proj.register_forward_pre_hook(
        lambda module, args, i=i: captured.__setitem__(i, args[0][0].double()))
        for i, layer in enumerate(hf.model.layers)]
    handles.append(hf.model.norm.register_forward_pre_hook(
        lambda module, args: captured.__setitem__("final", args[0][0].double())))
    handles += [layer.self_attn.v_proj.register_forward_hook(
        lambda module, args, out, i=i: captured.__setitem__(("v", i), out[0].double()))
        for i, layer in enumerate(hf.model.layers)]
    out = []
    try:
        for text in read_corpus(text_corpus).passages:
            ids = list(source(path).tokenize(text).token_ids)
            with torch.no_grad():
                attentions = hf(torch.tensor([ids]), output_attentions=True).attentions
            layers = range(len(hf.model.layers))
            out.append((ids, torch.stack([captured[i] for i in layers]), captured["final"],
                        torch.stack([captured[("v", i)] for i in layers]), torch.stack([a[0] for a in attentions])))
    finally:
        for handle in handles:
            handle.remove()
    return out


def test_the_dla_of_the_next_token_equals_one_from_transformers_hooked_values(model, text_corpus, hooked, tmp_path):
    """Each head's mean DLA over every position that has a next token: its slice of o_proj's input times its
    columns of W_O, times the final RMSNorm's scale (on the norm's own input) and gain, dotted with the next
    token's lm_head row."""
    path, hf = model
    corpus = read_corpus(text_corpus)
    settings = Settings(model=path)
    assert "dla" in settings.stats and dla_refusal(path) is None
    result = census(corpus, tmp_path, settings, runner=run)
    d_v, heads = 8, 4  # hidden 32 / 4 heads
    gamma, eps, u = hf.model.norm.weight.detach().double(), hf.config.rms_norm_eps, hf.lm_head.weight.detach().double()
    total, rows = torch.zeros(2, heads, dtype=torch.float64), 0
    shares = {}  # (passage, layer, head) -> (T - 1, T): key j's part of row i's term, alpha[i, j] (v_j W_O) . (...)
    for passage, (ids, z, final, v, alpha) in enumerate(hooked):
        s = torch.rsqrt(final.pow(2).mean(-1, keepdim=True) + eps)  # (T, 1)
        read = (s * gamma)[:-1] * u[ids[1:]]  # (T - 1, d)
        for layer in range(2):
            w_o = hf.model.layers[layer].self_attn.o_proj.weight.detach().double()
            for head in range(heads):
                cols = slice(head * d_v, (head + 1) * d_v)
                write = z[layer][:, cols] @ w_o[:, cols].T  # (T, d): what the head adds to the residual
                total[layer, head] += (write[:-1] * read).sum()
                kv = slice(head // 2 * d_v, (head // 2 + 1) * d_v)  # 4 heads share 2 K/V heads
                shares[passage, layer, head] = alpha[layer, head, :-1] * (read @ (v[layer][:, kv] @ w_o[:, cols].T).T)
        rows += len(ids) - 1
    heads_table = read_heads(tmp_path)
    assert result.totals.counts["dla"] == rows
    want = (total / rows).numpy()
    np.testing.assert_allclose(heads_table["dla"], want, atol=1e-4, rtol=0)
    # the default draw's small W_O and lm_head give means of about 1e-3: relative to them too (6e-7 here)
    np.testing.assert_allclose(heads_table["dla"], want, atol=1e-5 * np.abs(want).max(), rtol=0)
    assert np.ptp(heads_table["dla"]) > 0.5 * np.abs(want).max()
    examples = [e for e in read_examples(tmp_path) if e["statistic"] == "dla"]
    assert len(examples) == 2 * heads * 5
    for e in examples:  # the passage's mean, the row with the largest term (one with a next token), its top key
        share = shares[e["passage"] - 1, e["layer"] - 1, e["head"] - 1]  # (T - 1, T)
        assert e["score"] == pytest.approx(share.sum(-1).mean().item(), abs=1e-6)
        assert e["query"] - 1 == int(share.sum(-1).argmax()) and e["key"] - 1 == int(share[e["query"] - 1].argmax())
    assert json.loads((tmp_path / "manifest.json").read_text())["dla_not_computed"] is None


def test_examples_are_the_top_passages_with_their_positions(model, text_corpus, peer, tmp_path):
    path, _ = model
    corpus = read_corpus(text_corpus)
    census(corpus, tmp_path, Settings(model=path, top_k=3, shard_size=64), runner=run)
    examples = pq.read_table(tmp_path / "examples.parquet").to_pylist()
    mine = [e for e in examples if e["statistic"] == "previous" and e["layer"] == 2 and e["head"] == 3]
    assert [e["rank"] for e in mine] == [1, 2, 3]
    scores = []
    for _, alpha in peer:  # each passage's own previous-token mean, from transformers
        scores.append(alpha[1, 2].diagonal(-1).mean().item())
    best = np.argsort(scores)[::-1][:3]
    assert [e["passage"] for e in mine] == [int(i) + 1 for i in best]  # passages counted from 1
    assert [e["score"] for e in mine] == pytest.approx([scores[i] for i in best], abs=1e-5)
    for e in mine:  # the query shown is the row weighting its previous token most, and the key that token
        assert e["key"] == e["query"] - 1 and e["text"] == corpus.passages[e["passage"] - 1]
        assert e["query_token"] == e["text"].split()[e["query"] - 1]


def test_a_pattern_counts_its_pairs_over_the_threshold(model, text_corpus, peer, tmp_path):
    path, _ = model
    corpus = read_corpus(text_corpus)
    pattern = Pattern.parse("from ^w1\\d$ to ^(the|cat)$ > 0.2")
    census(corpus, tmp_path, Settings(model=path, pattern=pattern), runner=run)
    matches, pairs = np.zeros((2, 4)), 0
    for text, (_, alpha) in zip(corpus.passages, peer, strict=True):
        words = text.split()
        for i, q in enumerate(words):
            for j, k in enumerate(words[: i + 1]):
                if q.startswith("w1") and len(q) == 3 and k in ("the", "cat"):
                    pairs += 1
                    matches += (alpha[:, :, i, j] > 0.2).numpy()
    heads = read_heads(tmp_path)
    assert pairs > 20 and (heads["pattern_matches"] == matches).all()
    np.testing.assert_allclose(heads["pattern"], matches / pairs, atol=1e-12)


class Interrupt(Exception):
    pass


def test_an_interrupted_run_resumes_to_the_same_numbers(model, text_corpus, tmp_path):
    path, _ = model
    corpus = read_corpus(text_corpus)
    settings = Settings(model=path, shard_size=16)
    whole = census(corpus, tmp_path / "whole", settings, runner=run)

    def stop_after_five(progress):
        if progress.done >= 5 * 16:
            raise Interrupt  # as Ctrl-C arrives: between two shards, the five done kept on disk

    with pytest.raises(Interrupt):
        census(corpus, tmp_path / "cut", settings, runner=run, progress=stop_after_five)
    assert not (tmp_path / "cut" / "heads.parquet").exists()
    assert len(list((tmp_path / "cut" / "shards").glob("shard-*.npz"))) == 5
    seen = []
    resumed = census(corpus, tmp_path / "cut", settings, runner=run, progress=seen.append)
    assert resumed.resumed == 5 and resumed.shards == 13 and resumed.totals.passages == 200
    assert seen[0].done == 6 * 16 and seen[0].done_now == 16 and seen[-1].done == 200
    for name in STATS:
        assert resumed.totals.counts[name] == whole.totals.counts[name]
        np.testing.assert_allclose(resumed.means[name], whole.means[name], atol=1e-12, rtol=0)
    with pytest.raises(CorpusError, match="holds a census of another corpus, model or settings"):
        census(corpus, tmp_path / "cut", Settings(model=path, shard_size=8), runner=run)


def test_the_four_formats_read_the_same_passages(tmp_path):
    texts = ["the cat sat", "on a mat", "w1 w2 w3"]
    (tmp_path / "a.txt").write_text("\n".join(texts[:2]) + "\n  \n" + texts[2])
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"id": i, "body": t}) for i, t in enumerate(texts)))
    pq.write_table(pa.table({"id": [1, 2, 3], "body": texts}), tmp_path / "a.parquet")
    folder = tmp_path / "saved"  # datasets' save_to_disk layout: an Arrow stream file named in state.json
    folder.mkdir()
    table = pa.table({"body": texts})
    with pa.ipc.new_stream(str(folder / "data-00000-of-00001.arrow"), table.schema) as writer:
        writer.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    assert read_corpus(tmp_path / "a.txt").passages == tuple(texts)
    for name in ("a.jsonl", "a.parquet", "saved"):
        corpus = read_corpus(tmp_path / name, field="body")
        assert corpus.passages == tuple(texts) and corpus.field == "body", name


@pytest.mark.parametrize("write, field, message", [
    (lambda p: p.write_text("\n \n"), None, "has no passages"),
    (lambda p: p.write_bytes(b"caf\xe9\n"), None, "not UTF-8 text"),
    (lambda p: None, None, "cannot read .*: No such file or directory"),
    (lambda p: p.with_suffix(".jsonl").write_text('{"text": "a"}\n{"body": "b"}\n'), None,
     "line 2: no text field 'text'"),
    (lambda p: pq.write_table(pa.table({"body": ["a"]}), p.with_suffix(".parquet")), "text",
     "has no column 'text' \\(it has body\\)"),
    (lambda p: p.write_text("a"), "body", "--field applies to JSONL"),
])
def test_bad_corpora_are_refused_in_one_line(tmp_path, write, field, message):
    path = tmp_path / "c.txt"
    write(path)
    for candidate in (path, path.with_suffix(".jsonl"), path.with_suffix(".parquet")):
        if candidate.exists():
            path = candidate
    with pytest.raises(CorpusError, match=message) as info:
        read_corpus(path, field)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["the to a", "from a to b", "from ( to b > 0.5", "from a to b > 1.5"])
def test_bad_patterns_are_refused(text):
    with pytest.raises(CorpusError, match="pattern"):
        Pattern.parse(text)


def test_compare_gives_each_heads_jensen_shannon_divergence_and_weight_differences(model, text_corpus, peer,
                                                                                    tmp_path):
    path, hf = model
    other_hf = llama_folder(tmp_path / "other", seed=1)
    texts = read_corpus(text_corpus).passages[:40]
    (tmp_path / "few.txt").write_text("\n".join(texts))
    settings = Settings(model=path, compare=str(tmp_path / "other"))
    census(read_corpus(tmp_path / "few.txt"), tmp_path / "out", settings, runner=run)
    heads = read_heads(tmp_path / "out")
    total, rows = 0, 0
    for ids, p in peer[:40]:  # torch's KL divergence against the mixture, row by row
        with torch.no_grad():
            q = torch.stack(other_hf(torch.tensor([ids]), output_attentions=True).attentions)[:, 0].double()
        log_m = ((p + q) / 2)[:, :, 1:].clamp_min(1e-300).log()  # rows i >= 2; masked keys have p = q = 0
        for a in (p, q):
            total = total + 0.5 * torch.nn.functional.kl_div(log_m, a[:, :, 1:], reduction="none").sum((-1, -2))
        rows += len(ids) - 1
    np.testing.assert_allclose(heads["jsd"], (total / rows).numpy(), atol=1e-6, rtol=0)
    d_k, group = 8, 2  # hidden 32 / 4 heads; 4 heads share 2 K/V heads
    for layer in range(2):
        for head in range(4):
            circuits = []
            for m_ in (hf, other_hf):
                attn = m_.model.layers[layer].self_attn
                w_q = attn.q_proj.weight[head * d_k:(head + 1) * d_k].double()
                kv = slice(head // group * d_k, (head // group + 1) * d_k)
                w_k, w_v = attn.k_proj.weight[kv].double(), attn.v_proj.weight[kv].double()
                w_o = attn.o_proj.weight[:, head * d_k:(head + 1) * d_k].double()
                circuits.append((w_q.T @ w_k, w_o @ w_v))
            for name, i in (("dW_QK", 0), ("dW_OV", 1)):
                want = torch.linalg.matrix_norm(circuits[0][i] - circuits[1][i]).item()
                assert heads[name][layer, head] == pytest.approx(want, rel=1e-6), (name, layer, head)


def test_on_a_trained_induction_model_the_induction_statistic_singles_out_layer_2(tmp_path):
    from attn_gui.engine.train.tasks import Task
    from attn_gui.engine.train.loop import Trainer
    from attn_gui.engine.train.model import TrainConfig

    config = TrainConfig(task="induction", symbols=8, length=16, layers=2, heads=2, d_model=32, batch=64, lr=1e-2)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # as tests/engine/test_training.py trains it: a previous-token head in layer 1, induction in layer 2
        trainer = Trainer(config)
        list(trainer.run(250))
    finally:
        torch.set_num_threads(before)
    trainer.save(tmp_path / "model")
    task = Task("induction", symbols=8, length=16)
    inputs = task.batch(100, torch.Generator().manual_seed(7)).inputs
    (tmp_path / "tasks.txt").write_text("\n".join(task.sentence(row) for row in inputs))
    census(read_corpus(tmp_path / "tasks.txt"), tmp_path / "out", Settings(model=str(tmp_path / "model")),
           runner=run)
    heads = read_heads(tmp_path / "out")
    assert heads["induction"][1].max() > 0.5 > 2 * heads["induction"][0].max()  # 0.88 against 0.17 here
    assert heads["previous"][0].max() > heads["previous"][1].max()


def test_a_passage_longer_than_the_model_reads_is_cut_and_counted(model, tmp_path):
    path, hf = model
    limit = passage_limit(model_spec(path).max_tokens)  # max_position_embeddings of the folder's config, <= 512
    long = " ".join(WORDS[3 + i % 40] for i in range(limit + 6))
    (tmp_path / "c.txt").write_text(f"{long}\nthe cat sat on the mat\n")
    census(read_corpus(tmp_path / "c.txt"), tmp_path / "out", Settings(model=path), runner=run)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["cut"], manifest["max_tokens"], manifest["tokens"]) == (1, limit, limit + 6)
    total, rows = 0, 0
    for text in (long, "the cat sat on the mat"):  # transformers on the first ``limit`` tokens
        ids = [WORDS.index(w) for w in text.split()][:limit]
        with torch.no_grad():
            alpha = torch.stack(hf(torch.tensor([ids]), output_attentions=True).attentions)[:, 0].double()
        total, rows = total + alpha.diagonal(-1, -2, -1).sum(-1), rows + len(ids) - 1
    np.testing.assert_allclose(read_heads(tmp_path / "out")["previous"], (total / rows).numpy(), atol=1e-4)


def test_the_dla_is_left_out_where_no_sum_of_head_terms_gives_the_logit():
    from dataclasses import replace

    from attn_gui.engine.model.plan import next_token_refusal
    from attn_gui.engine.specs.decoder import LlamaShape

    plain = LlamaShape(layers=1, heads=2, kv_heads=1, d_k=4, eps=1e-5)
    assert next_token_refusal(plain) is None
    assert "sandwich" in next_token_refusal(replace(plain, block="sandwich"))
    assert "OLMo 2" in next_token_refusal(replace(plain, block="post"))
    assert "final_logit_softcapping" in next_token_refusal(replace(plain, final_softcap=30.0))
    assert "lm_head" in next_token_refusal(plain, predicts=False)
    assert "is an encoder" in dla_refusal("minilm-l6")  # no weights read: the bundled encoder's spec
    assert "dla" not in Settings(model="minilm-l6").stats

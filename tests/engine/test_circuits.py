"""Circuits (issue 49) against their peers, on tiny random decoders made by transformers (float64).

- Node attribution equals transformers' own: hooks on the output projection's input (Z, split per head), on each
  MLP's output and on the embedding, and autograd of the metric; (z_clean - z_corrupt) . dm/dz (1e-5).
- EAP edge scores equal a direct autograd of the decomposed forward, written here from transformers' Llama
  modules (its norms, rotary embedding, MLP and head), each reader reading the residual plus a zero of its own
  that requires grad (1e-5); EAP-IG with one step is EAP, and its 3-step mean is the mean of the three gradients.
- Exact edge patching equals the decomposed forward with one reader's input rebuilt by hand (1e-9), and a circuit of
  every edge recovers exactly 1, of none exactly 0.
- The graph: every reader reads only what was written before it (parallel blocks: not its own layer's heads).
"""

from __future__ import annotations

import math

import pytest
import torch
import transformers
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from attn_gui.engine import ConfigError
from attn_gui.engine.analysis.circuits import circuit, exact_edges, prepare
from attn_gui.engine.analysis.circuits import scores
from attn_gui.engine.analysis.circuits.graph import Graph
from attn_gui.engine.analysis.circuits.scores import edge_scores, faithfulness, ranked
from attn_gui.engine.analysis.circuits.tasks import Pair, PairTask
from tiny_decoders import WORDS, tiny_decoder  # tests/

ID = {w: i for i, w in enumerate(WORDS)}


def _ids(text: str) -> tuple[int, ...]:
    return tuple(ID[w] for w in text.split())


PAIRS = (  # two lengths (two batches), answers against wrong tokens at the last position; the third scores two
    Pair(_ids("the cat sat on a mat and the dog"), _ids("the dog sat on a mat and the cat"), (8,),
         ((ID["ran"],),), ((ID["sat"],),)),
    Pair(_ids("a dog ran on the mat and a cat"), _ids("a cat ran on the mat and a dog"), (8,),
         ((ID["sat"],),), ((ID["ran"],),)),
    Pair(_ids("w1 w2 w3 w1 w2 w3"), _ids("w4 w5 w6 w1 w2 w3"), (3, 4),
         ((ID["w2"],), (ID["w3"],)), ((ID["w5"],), (ID["w6"],))),
)
TASK = PairTask("tiny", "logit-diff", PAIRS)


@pytest.fixture(scope="module", params=["llama", "gpt2", "qwen2"])
def model(request, tmp_path_factory):
    """A tiny random decoder (grouped-query Llama, GPT-2, Qwen2 with its biases), and transformers' model."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = tiny_decoder(request.param, folder)
    if request.param == "gpt2":  # at transformers' 0.02 its attention is near uniform: scale the matrices
        with torch.no_grad():
            for p in hf.parameters():
                if p.dim() == 2:
                    p.mul_(10.0)
        hf.save_pretrained(folder)
    return request.param, str(folder), hf.double()


def _metric(logits: torch.Tensor, pair: Pair) -> torch.Tensor:
    """The pair's logit difference, mean over its scored positions, from transformers' logits (1, n, V)."""
    return torch.stack([logits[0, p, a[0]] - logits[0, p, w[0]]
                        for p, a, w in zip(pair.positions, pair.answers, pair.wrongs, strict=True)]).mean()


def _modules(kind: str, hf):
    """(the embedding's module and whether its output (else input) is the embedding writer, each layer's (attention
    output projection, MLP)): where transformers' forward holds what each writer adds."""
    if kind == "gpt2":
        return (hf.transformer.drop, False), [(b.attn.c_proj, b.mlp) for b in hf.transformer.h]
    return (hf.model.embed_tokens, True), [(b.self_attn.o_proj, b.mlp) for b in hf.model.layers]


def _captured(kind: str, hf, ids: tuple[int, ...], pair: Pair, grad: bool):
    """transformers' forward with hooks: the embedding, every o_proj input (Z) and MLP output, and the metric."""
    seen: dict[str, torch.Tensor] = {}
    (embed, output), layers = _modules(kind, hf)

    def keep(name, tensor):
        if grad:
            tensor.retain_grad()
        seen[name] = tensor
    hooks = [embed.register_forward_hook(lambda m, i, o: keep("embed", o if output else i[0]))]
    for n, (o_proj, mlp) in enumerate(layers):
        hooks.append(o_proj.register_forward_pre_hook(lambda m, i, n=n: keep(f"z{n}", i[0])))
        hooks.append(mlp.register_forward_hook(lambda m, i, o, n=n: keep(f"mlp{n}", o)))
    try:
        with torch.set_grad_enabled(grad):
            metric = _metric(hf(torch.tensor([ids])).logits, pair)
            if grad:
                metric.backward()
    finally:
        for h in hooks:
            h.remove()
    return seen


def test_node_attribution_equals_transformers_hooks_and_autograd(model):
    kind, folder, hf = model
    found = circuit(folder, TASK, "eap", dtype="float64", faithful=False)
    g = found.graph
    want = torch.zeros(g.n_writers, dtype=torch.float64)
    heads, d_v = g.heads, hf.config.hidden_size // g.heads
    for pair in PAIRS:
        clean, corrupt = _captured(kind, hf, pair.clean, pair, True), _captured(kind, hf, pair.corrupt, pair, False)
        for name, value in clean.items():
            term = ((value - corrupt[name]) * value.grad).detach()[0]  # (n, d) or (n, h d_v)
            if name == "embed":
                want[0] += term.sum() / len(PAIRS)
            elif name.startswith("mlp"):
                want[g.mlp(int(name[3:]))] += term.sum() / len(PAIRS)
            else:
                per_head = term.view(term.size(0), heads, d_v).sum((0, 2))
                layer = int(name[1:])
                want[[g.head(layer, i) for i in range(heads)]] += per_head / len(PAIRS)
    assert torch.allclose(found.nodes, want, atol=1e-5, rtol=0)
    assert want.abs().max() > 1e-2  # not a comparison of zeros


def _decomposed_llama(hf, ids: tuple[int, ...], first: torch.Tensor | None = None,
                      shift: dict[int, torch.Tensor] | None = None):
    """transformers' Llama forward with every reader's input its own: the residual plus a zero that requires grad
    (plus ``shift[reader]`` where given); ``first``: the embedding (1, n, d) in place of the tokens'.

    Returns the logits (1, n, V), every writer's part (Graph order) and each reader's zero, by Graph index."""
    m, cfg = hf.model, hf.config
    h, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    d_k = cfg.hidden_size // h
    g = Graph(cfg.num_hidden_layers, h, kv)
    n = len(ids)
    zeros: dict[int, torch.Tensor] = {}

    def read(reader: int, resid: torch.Tensor) -> torch.Tensor:
        zeros[reader] = torch.zeros_like(resid, requires_grad=True)
        return resid + zeros[reader] + (shift or {}).get(reader, 0.0)
    resid = m.embed_tokens(torch.tensor([ids])) if first is None else first
    writes = [resid]
    cos, sin = m.rotary_emb(resid, torch.arange(n)[None])
    causal = torch.full((n, n), -math.inf, dtype=resid.dtype).triu(1)
    for layer, block in enumerate(m.layers):
        att, ln = block.self_attn, block.input_layernorm
        w_q, w_k, w_v = (p.weight.view(-1, d_k, cfg.hidden_size) for p in (att.q_proj, att.k_proj, att.v_proj))
        keys = [ln(read(g.reader(layer, "k", j), resid)) @ w_k[j].T for j in range(kv)]  # (1, n, d_k)
        values = [ln(read(g.reader(layer, "v", j), resid)) @ w_v[j].T for j in range(kv)]
        for i in range(h):
            j = i // (h // kv)
            q = ln(read(g.reader(layer, "q", i), resid)) @ w_q[i].T
            q, k = apply_rotary_pos_emb(q[:, None], keys[j][:, None], cos, sin)
            alpha = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d_k) + causal, -1)
            writes.append((alpha @ values[j][:, None])[:, 0] @ att.o_proj.weight[:, i * d_k:(i + 1) * d_k].T)
        resid = resid + sum(writes[-h:])
        writes.append(block.mlp(block.post_attention_layernorm(read(g.reader(layer, "mlp"), resid))))
        resid = resid + writes[-1]
    return hf.lm_head(m.norm(read(g.logits, resid))), [part.detach() for part in writes], zeros


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    return str(folder), tiny_decoder("llama", folder).double()


def test_eap_equals_autograd_of_the_decomposed_forward(llama):
    folder, hf = llama
    found = circuit(folder, TASK, "eap", dtype="float64", faithful=False)
    g = found.graph
    want = torch.zeros(g.n_writers, g.n_readers, dtype=torch.float64)
    for pair in PAIRS:
        logits, clean, zeros = _decomposed_llama(hf, pair.clean)
        own = hf(torch.tensor([pair.clean])).logits
        assert torch.allclose(logits, own, atol=1e-7)  # transformers' forward (its RoPE angles are float32)
        _, corrupt, _ = _decomposed_llama(hf, pair.corrupt)
        _metric(logits, pair).backward()
        for r, zero in zeros.items():
            for u in range(g.n_writers):
                if g.allowed[u, r]:
                    want[u, r] += float(((clean[u] - corrupt[u]) * zero.grad).sum()) / len(PAIRS)
    assert torch.allclose(found.scores, want, atol=1e-5, rtol=0)
    assert want.abs().max() > 1e-2 and (found.scores[~g.allowed] == 0).all()


@pytest.mark.parametrize("together", [1, 2, 3])
def test_eap_ig_of_one_step_is_eap_and_of_three_the_mean_gradient(llama, together, monkeypatch):
    """The points run one per forward, two (a forward of two, then one of one) or all three in one forward and one
    backward: each equals the mean of transformers' per-reader gradients (autograd of the decomposed forward)."""
    monkeypatch.setattr(scores, "points_at_once", lambda split, batch: together)
    folder, hf = llama
    pairs = prepare(folder, TASK, dtype="float64", batch=2)
    eap = edge_scores(pairs)
    assert torch.allclose(edge_scores(pairs, steps=1), eap, atol=1e-12)
    want = torch.zeros_like(eap)
    g = pairs.split.graph
    for pair in PAIRS:  # the embedding at k/3 between the corrupted and the clean one, k = 1, 2, 3
        e_clean, e_corrupt = (hf.model.embed_tokens(torch.tensor([ids])) for ids in (pair.clean, pair.corrupt))
        _, clean, _ = _decomposed_llama(hf, pair.clean)
        _, corrupt, _ = _decomposed_llama(hf, pair.corrupt)
        for k in (1, 2, 3):
            logits, _, zeros = _decomposed_llama(hf, pair.clean, (e_corrupt + k / 3 * (e_clean - e_corrupt)).detach())
            _metric(logits, pair).backward()
            for r, zero in zeros.items():
                for u in g.allowed[:, r].nonzero()[:, 0].tolist():
                    want[u, r] += float(((clean[u] - corrupt[u]) * zero.grad).sum()) / (3 * len(PAIRS))
    assert torch.allclose(edge_scores(pairs, steps=3), want, atol=1e-5, rtol=0)


def test_exact_patching_rebuilds_one_readers_input(llama):
    """m(clean) - m(clean with one edge read from the corrupted prompt), rebuilt by hand on transformers' modules."""
    folder, hf = llama
    pairs = prepare(folder, TASK, dtype="float64")
    g = pairs.split.graph
    top = ranked(edge_scores(pairs), g.allowed)
    kinds = {g.reader_kind(r)[0]: (u, r) for u, r in reversed(top.tolist())}  # the largest of each kind of reader
    edges = [kinds[kind] for kind in ("q", "k", "v", "mlp", "logits")]
    got = exact_edges(pairs, edges)
    for e, (u, r) in enumerate(edges):
        want = 0.0
        for pair in PAIRS:
            with torch.no_grad():
                logits, clean, _ = _decomposed_llama(hf, pair.clean)
                _, corrupt, _ = _decomposed_llama(hf, pair.corrupt)
                # u is below r, and nothing below r changes: u's part in the patched run is its clean one
                patched, _, _ = _decomposed_llama(hf, pair.clean, shift={r: corrupt[u] - clean[u]})
                want += float(_metric(logits, pair) - _metric(patched, pair)) / len(PAIRS)
        # 1e-7: transformers computes RoPE's angles in float32 (its logits differ from float64's by 2e-8)
        assert got[e] == pytest.approx(want, abs=1e-7), g.edge_name(u, r)
        assert abs(want) > 1e-5, g.edge_name(u, r)


def test_every_edge_kept_recovers_one_and_none_zero(llama):
    folder, _ = llama
    pairs = prepare(folder, TASK, dtype="float64", batch=2)
    scores = edge_scores(pairs)
    curve = faithfulness(pairs, scores, ks=(0, pairs.split.graph.n_edges))
    assert curve.recovered[0] == pytest.approx(0.0, abs=1e-9)
    assert curve.recovered[-1] == pytest.approx(1.0, abs=1e-9)


def test_the_graph_reads_only_what_was_written_before():
    g = Graph(2, 4, 2)
    assert g.n_writers == 11 and g.n_readers == 2 * (4 + 2 + 2 + 1) + 1
    assert g.reader_names[g.reader(1, "k", 1)] == "L2H3-4 k"  # a key input shared by heads 3 and 4
    assert g.allowed[g.head(0, 0), g.reader(1, "q", 0)] and not g.allowed[g.head(1, 0), g.reader(1, "q", 0)]
    assert g.allowed[g.head(1, 0), g.reader(1, "mlp")]  # in sequence the MLP reads its layer's heads
    assert not Graph(2, 4, 2, parallel=True).allowed[g.head(1, 0), g.reader(1, "mlp")]  # side by side it does not
    assert g.allowed[:, g.logits].all()
    assert g.n_edges == int(g.allowed.sum())


def test_bad_input_is_one_line(llama, tmp_path):
    folder, _ = llama
    for bad, match in ((dict(method="x"), "method"), (dict(metric="x"), "metric"),
                       (dict(task="nope"), "task must be one of")):
        args = dict(model=folder, task=TASK, method="eap") | bad
        with pytest.raises(ConfigError, match=match):
            circuit(args.pop("model"), args.pop("task"), args.pop("method"), faithful=False, **args)
    lines = tmp_path / "pairs.jsonl"
    lines.write_text('{"clean": "the cat", "corrupt": "the cat sat", "answer": "ran"}\n')
    with pytest.raises(ConfigError, match="line 1: the clean prompt has 2 tokens"):
        circuit(folder, lines)


def test_a_sandwich_norm_is_refused(tmp_path):
    hf = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(
        "gemma2", hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, vocab_size=len(WORDS)))
    hf.save_pretrained(tmp_path)
    tiny_decoder("llama", tmp_path / "unused")  # its tokenizer.json
    (tmp_path / "tokenizer.json").write_bytes((tmp_path / "unused" / "tokenizer.json").read_bytes())
    with pytest.raises(ConfigError, match="sandwich"):
        prepare(str(tmp_path), TASK)


def test_pairs_batch_by_length():
    batches = TASK.batches(8)
    assert sorted(b.clean.shape[1] for b in batches) == [6, 9]


def test_routes_are_ferrando_and_voitas_importance_of_transformers_residual(llama):
    """Information-flow routes: Ferrando and Voita 2024's eq. 2, max(||y||_1 - ||y - z||_1, 0) normalised over the
    parts z, with y transformers' residual (its hidden states; the MLP's: the layer's input plus its heads' writes)
    and z the decomposed forward's parts; mean over every position (the logits: the scored ones) and the pairs."""
    folder, hf = llama
    found = circuit(folder, TASK, "routes", dtype="float64", faithful=False)
    g = found.graph
    want = torch.zeros(g.n_writers, g.n_readers, dtype=torch.float64)
    for pair in PAIRS:
        with torch.no_grad():
            _, parts, _ = _decomposed_llama(hf, pair.clean)
            hidden = hf(torch.tensor([pair.clean]), output_hidden_states=True).hidden_states
        for r in range(g.n_readers):
            layer, kind = g.reader_layer(r), g.reader_kind(r)[0]
            writers = g.allowed[:, r].nonzero()[:, 0].tolist()
            if kind == "logits":
                y = sum(parts)
            else:
                y = hidden[layer] + (sum(parts[g.head(layer, i)] for i in range(g.heads)) if kind == "mlp" else 0)
            near = torch.stack([(y.abs().sum(-1) - (y - parts[u]).abs().sum(-1)).clamp(min=0) for u in writers])
            share = (near / near.sum(0))[:, 0]  # (writers, n)
            if kind == "logits":
                share = share[:, list(pair.positions)]
            want[writers, r] += share.mean(1) / len(PAIRS)
    assert torch.allclose(found.scores, want, atol=1e-6, rtol=0)
    assert torch.allclose(found.scores.sum(0), torch.ones(g.n_readers, dtype=torch.float64))

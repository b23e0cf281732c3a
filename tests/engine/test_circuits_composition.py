"""An edge looked at closely (``engine.circuits.composition``) against transformers' weights and forward.

- The Q-, K- and V-composition scores of Elhage et al. 2021 ("A Mathematical Framework for Transformer Circuits",
  section "Composition": ||M W_OV|| / (||M|| ||W_OV||), M = W_QK^T, W_QK or W_OV of the reader), computed here in
  torch straight from transformers' q/k/v/o_proj weights of a tiny grouped-query Llama, the input norm's gain
  folded into the reading projections as TransformerLens's fold_ln does (1e-10).
- The heads' α on a prompt equal transformers' output_attentions (eager attention, 1e-6).
"""

from __future__ import annotations

import pytest
import torch

from attn_gui.engine.analysis.circuits import circuit, prepare
from attn_gui.engine.analysis.circuits.composition import alphas, composition, look
from tiny_decoders import circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    hf = tiny_decoder("llama", folder)  # 2 layers, 4 query heads, 2 key/value heads, d = 32, d_head = 8
    return str(folder), circuit_pairs(folder), hf.double()


def _fro(m: torch.Tensor) -> torch.Tensor:
    return (m ** 2).sum().sqrt()


def _peer(hf, writer: tuple[int, int], reader: tuple[int, int], kind: str) -> float:
    """Elhage et al.'s score from transformers' weights, written out here (module docstring)."""
    d_head, group = 8, 2

    def folded(layer, proj, rows):
        block = hf.model.layers[layer]
        return getattr(block.self_attn, proj).weight[rows] * block.input_layernorm.weight  # W diag(γ)

    def ov(layer, head):
        v = folded(layer, "v_proj", slice(head // group * d_head, (head // group + 1) * d_head))
        return hf.model.layers[layer].self_attn.o_proj.weight[:, head * d_head:(head + 1) * d_head] @ v

    def qk(layer, head):
        q = folded(layer, "q_proj", slice(head * d_head, (head + 1) * d_head))
        k = folded(layer, "k_proj", slice(head // group * d_head, (head // group + 1) * d_head))
        return q.T @ k
    a = ov(*writer)
    m = {"q": lambda: qk(*reader).T, "k": lambda: qk(*reader), "v": lambda: ov(*reader)}[kind]()
    return float(_fro(m @ a) / (_fro(m) * _fro(a)))


def test_composition_scores_equal_elhage_et_al_from_transformers_weights(llama):
    folder, _, hf = llama
    split = prepare(folder, llama[1], dtype="float64").split
    g = split.graph
    with torch.no_grad():
        for writer_head in range(4):
            u = g.head(0, writer_head)
            for kind, count in (("q", 4), ("k", 2), ("v", 2)):
                for index in range(count):
                    r = g.reader(1, kind, index)
                    heads = list(g.reader_heads(r))
                    want = [_peer(hf, (0, writer_head), (1, j), kind) for j in heads]
                    assert composition(split, u, r) == pytest.approx(want, rel=1e-10, abs=1e-12)
    assert composition(split, 0, g.reader(1, "k", 0)) == ()  # the embedding is no head
    assert composition(split, g.head(0, 0), g.logits) == ()


def test_alpha_and_the_edge_look_follow_transformers(llama):
    folder, pairs, hf = llama
    prepared = prepare(folder, pairs, dtype="float64")
    split = prepared.split
    ids = torch.tensor(prepared.task.pairs[0].clean)
    with torch.no_grad():
        want = hf(ids[None], output_attentions=True).attentions  # (1, h, n, n) per layer
    got = alphas(split, ids, [(1, 3), (0, 2)])
    torch.testing.assert_close(got[0], want[1][0, 3], atol=1e-6, rtol=0)
    torch.testing.assert_close(got[1], want[0][0, 2], atol=1e-6, rtol=0)

    found = circuit(folder, pairs, "eap", faithful=False, dtype="float64", prepared=prepared)
    g = split.graph
    u, r = g.head(0, 1), g.reader(1, "k", 1)  # L1H2 -> "L2H3-4 k": the key shared by heads 3 and 4
    seen = look(split, found.scores, u, r, ids)
    assert (seen.writer, seen.reader, seen.kind, seen.heads) == ("L1H2", "L2H3-4 k", "K", (2, 3))
    assert seen.score == found.edge("L1H2", "L2H3-4 k")
    best = 2 + max(range(2), key=lambda i: seen.composition[i])
    assert seen.writer_head == (0, 1) and seen.reader_head == (1, best)
    assert seen.writer_alpha is not None and seen.reader_alpha is not None
    torch.testing.assert_close(seen.writer_alpha, want[0][0, 1], atol=1e-6, rtol=0)
    torch.testing.assert_close(seen.reader_alpha, want[1][0, best], atol=1e-6, rtol=0)
    embed = look(split, found.scores, 0, g.logits, ids)
    assert embed.writer_alpha is None and embed.reader_alpha is None and embed.composition == () and embed.kind == ""

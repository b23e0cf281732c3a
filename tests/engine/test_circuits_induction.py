"""The induction ground truth (issue 49): a 2-layer attention-only model trained with ``attn-gui train`` on the
induction task, one head per layer so that the circuit is the textbook one (Elhage et al. 2021, "A Mathematical
Framework for Transformer Circuits"; Olsson et al. 2022): layer 1's previous-token head writes "my previous
token was x_i" into the residual; layer 2's induction head reads it through its **key** (K-composition), attends
to the token after the earlier copy of the current token and copies it (its value: the embedding) to the logits.

The project's own detector labels the two heads first; then EAP-IG must put that K-composition edge among the five
largest, a circuit of at most 5 edges must recover at least 80 % of the metric, and exact patching of that one edge
(``exact_edges``, m(clean) - m(clean with the edge read from the corrupted prompt)) must remove at least a third of
the clean - corrupted gap and rank among the five largest exact effects. Measured figures are in
docs/benchmarks.md, "Circuits" (EAP without IG ranks the key edge lower: the induction head's softmax saturates on
the clean prompt, and with it the gradient EAP reads).
"""

from __future__ import annotations

import pytest
import torch

from attn_gui.cli import main
from attn_gui.engine import AttentionConfig
from attn_gui.engine.analysis.attribution.heads import detect_heads
from attn_gui.engine.analysis.circuits import circuit, exact_edges, prepare
from attn_gui.engine.analysis.circuits.scores import ranked
from attn_gui.engine.train.checkpoint import probe_sentence

TRAIN = ["train", "--task", "induction", "--symbols", "8", "--length", "16", "--layers", "2", "--heads", "1",
         "--d-model", "32", "--batch", "64", "--lr", "0.01", "--steps", "300", "--seed", "0", "--threads", "1"]
KEY_EDGE = ("L1H1", "L2H1 k")  # layer 1's previous-token head into layer 2's induction head's key


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The checkpoint (about 15 s on one core) and its induction pairs, prepared once."""
    folder = tmp_path_factory.mktemp("induction") / "ckpt"
    assert main([*TRAIN, "--out", str(folder)]) == 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield str(folder), prepare(str(folder), "induction", pairs=20, seed=0)
    finally:
        torch.set_num_threads(threads)


def test_the_detector_labels_the_two_heads(trained):
    folder, _ = trained
    found = detect_heads(AttentionConfig(sentence=probe_sentence(folder), model=folder))
    assert found.labels[0] == ["previous-token"] and found.labels[1] == ["induction"]


def test_eap_ig_finds_the_key_composition_and_a_small_faithful_circuit(trained):
    folder, pairs = trained
    found = circuit(folder, "induction", "eap-ig", steps=10, prepared=pairs, ks=(1, 2, 3, 4, 5))
    assert found.clean - found.corrupt > 5.0  # the model has learnt the task: a gap of logits to recover
    assert found.rank(*KEY_EDGE) <= 5
    assert found.edge(*KEY_EDGE) > 0
    assert found.faithfulness is not None and found.faithfulness.smallest is not None
    assert found.faithfulness.smallest <= 5 and max(found.faithfulness.recovered) >= 0.8


def test_exact_patching_of_the_key_edge_confirms_it(trained):
    _, pairs = trained
    g = pairs.split.graph
    every = [tuple(e) for e in ranked(torch.zeros(g.allowed.shape, dtype=torch.float64), g.allowed).tolist()]
    effects = exact_edges(pairs, every)
    clean, corrupt = pairs.metrics()
    key = every.index((g.find_writer(KEY_EDGE[0]), g.find_reader(KEY_EDGE[1])))
    assert float(effects[key]) >= (clean - corrupt) / 3
    assert int((effects.abs() > effects[key].abs()).sum()) < 5  # among the five largest exact effects

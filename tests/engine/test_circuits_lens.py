"""Circuits (issue 49) against TransformerLens 4.3's own edge attribution patching, the reference.

TransformerLens (``transformer_lens.tools.analysis.attribution_patching``, ``granularity="edge"``) scores an edge per
position, (a_clean[u] - a_corrupt[u]) . dm/d input_v with the gradient taken on the *corrupted* prompt (its
"denoising" convention); attn-gui takes it on the clean prompt (Syed et al. 2023, Hanna et al. 2024), and sums over
positions. So TransformerLens's scores summed over positions equal attn-gui's with the two prompts swapped and the
sign turned (the writers' difference turns, the gradient is the other prompt's): within 1e-5 on a tiny random Llama
without grouped-query attention (TransformerLens refuses it: a K/V input shared by query heads), in float64.
"""

from __future__ import annotations

import pytest
import torch
import transformers

pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")

from attn_gui.engine.analysis.circuits import circuit  # noqa: E402
from attn_gui.engine.analysis.circuits.tasks import Pair, PairTask  # noqa: E402
from tiny_decoders import WORDS, tiny_decoder  # noqa: E402  tests/

ID = {w: i for i, w in enumerate(WORDS)}
PROMPTS = (("the cat sat on a mat and the dog", "the dog sat on a mat and the cat", "ran", "sat"),
           ("a dog ran on the mat and a cat", "a cat ran on the mat and a dog", "sat", "ran"))


def _ids(text: str) -> tuple[int, ...]:
    return tuple(ID[w] for w in text.split())


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny random Llama, one key/value head per query head, and a TransformerLens bridge around it (float64)."""
    from transformer_lens.model_bridge import TransformerBridge

    folder = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", folder, num_key_value_heads=4)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"),
                                                     unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    tokenizer.save_pretrained(folder)
    hf = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager",
                                                           dtype=torch.float64).eval()
    bridge = TransformerBridge.boot_transformers(str(folder), hf_model=hf,
                                                 tokenizer=transformers.AutoTokenizer.from_pretrained(folder))
    return str(folder), bridge


def _theirs(bridge, clean, corrupt, answer, wrong):
    """TransformerLens's edge scores of one pair, summed over positions, by (writer, reader) node names."""
    from transformer_lens.tools.analysis.attribution_patching import EdgeAttributionConfig, attribution_patch

    def metric(logits):
        return logits[0, -1, ID[answer]] - logits[0, -1, ID[wrong]]
    result = attribution_patch(bridge, torch.tensor([_ids(clean)]), torch.tensor([_ids(corrupt)]), metric,
                               EdgeAttributionConfig(granularity="edge"))
    out: dict[tuple, float] = {}
    for (u, r), score in result.edge_scores.items():
        key = ((u.kind, u.layer, u.head), (r.kind, r.layer, r.head))
        out[key] = out.get(key, 0.0) + score
    return out


def _index(graph, node) -> tuple[str, int]:
    """A TransformerLens node (kind, layer, head) as attn-gui's writer or reader index."""
    kind, layer, head = node
    writers = {"embed": lambda: 0, "attn_head_out": lambda: graph.head(layer, head),
               "mlp_out": lambda: graph.mlp(layer)}
    if kind in writers:
        return "writer", writers[kind]()
    readers = {"q_input": "q", "k_input": "k", "v_input": "v", "mlp_in": "mlp"}
    return "reader", graph.logits if kind == "logits" else graph.reader(layer, readers[kind], head or 0)


def test_edge_scores_equal_transformer_lens_with_the_prompts_swapped(model):
    folder, bridge = model
    theirs: dict[tuple, float] = {}
    for clean, corrupt, answer, wrong in PROMPTS:
        for key, value in _theirs(bridge, clean, corrupt, answer, wrong).items():
            theirs[key] = theirs.get(key, 0.0) + value / len(PROMPTS)
    swapped = PairTask("swapped", "logit-diff", tuple(
        Pair(_ids(corrupt), _ids(clean), (len(_ids(clean)) - 1,), ((ID[answer],),), ((ID[wrong],),))
        for clean, corrupt, answer, wrong in PROMPTS))
    mine = circuit(folder, swapped, "eap", dtype="float64", faithful=False)
    g = mine.graph
    assert len(theirs) == g.n_edges  # the same graph: every edge, none more
    want = torch.zeros_like(mine.scores)
    for (u, r), value in theirs.items():
        want[_index(g, u)[1], _index(g, r)[1]] = value
    assert torch.allclose(-mine.scores, want, atol=1e-5, rtol=0)
    assert want.abs().max() > 1e-2

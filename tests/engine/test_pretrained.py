"""Model mode: our BERT forward pass gives transformers' numbers for all-MiniLM-L6-v2."""

import pytest
import torch
import torch.nn.functional as F

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, Projections, check_tokens, formula, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine import compute
from attn_gui.engine.model.source import ModelSource
from attn_gui.engine.model.registry import is_available
from attn_gui.engine.model.encoder.minilm import load_model, model_tokenize, run_encoder, sentence_embedding

pytestmark = pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")

SENTENCES = [
    "The animal didn't cross the street because it was too tired",
    "When in doubt look intelligent",
    "a",
    "Ünïcödé text, numbers 12345 and emoji 🙂 mixed together!",
]


@pytest.fixture(scope="module")
def hf_model():
    import transformers
    from attn_gui.engine.readers.catalog import model_spec
    from attn_gui.engine.model.encoder.minilm import model_dir

    folder = model_dir(model_spec("minilm-l6"))
    model = transformers.BertModel.from_pretrained(str(folder), attn_implementation="eager",
                                                   local_files_only=True)
    return model.eval()


@pytest.mark.parametrize("sentence", SENTENCES)
def test_every_layer_matches_transformers(hf_model, sentence):
    ids = torch.tensor(model_tokenize("minilm-l6", sentence).token_ids)
    with torch.no_grad():
        out = hf_model(ids[None], output_attentions=True, output_hidden_states=True)
    hidden, weights = run_encoder("minilm-l6", ids)
    for layer in range(6):
        assert torch.allclose(weights[layer], out.attentions[layer][0], atol=1e-5), layer
        assert torch.allclose(hidden[layer], out.hidden_states[layer][0], atol=1e-4), layer
    assert torch.allclose(hidden[-1], out.last_hidden_state[0], atol=1e-4)
    pooled = torch.nn.functional.normalize(out.last_hidden_state[0].mean(0), dim=-1)
    assert torch.allclose(sentence_embedding("minilm-l6", sentence), pooled, atol=1e-5)


def test_compute_shows_a_real_layer():
    cfg = AttentionConfig(sentence=SENTENCES[0], model="minilm-l6", layer=3)
    assert (cfg.dims.d_model, cfg.dims.d_k, cfg.dims.d_v, cfg.dims.heads) == (384, 32, 32, 12)
    r = compute(cfg)
    assert r.tokens[0] == "[CLS]" and r.tokens[-1] == "[SEP]" and "animal" in r.tokens
    T = len(r.tokens)
    assert r.weights.shape == (12, T, T) and r.layer_weights.shape == (6, 12, T, T)
    assert torch.equal(r.layer_weights[3], r.weights)
    assert r.next_tokens is None  # an encoder predicts no next token
    ids = torch.tensor(model_tokenize("minilm-l6", SENTENCES[0]).token_ids)
    hidden, _ = run_encoder("minilm-l6", ids)
    assert torch.equal(r.x, hidden[3])  # X is the hidden state entering layer 3
    assert r.w_q.shape == (12, 384, 32)  # row layout shows W as d x d_k
    # q includes the bias: q = x W + b
    w = load_model("minilm-l6").weights
    q0 = r.x @ w["encoder.layer.3.attention.self.query.weight"].T + w["encoder.layer.3.attention.self.query.bias"]
    assert torch.allclose(r.q[1], q0[:, 32:64], atol=1e-5)
    # some head of layer 3 links "it" to a noun of the sentence more than to anything else
    it = r.tokens.index("it")
    nouns = [r.tokens.index("animal"), r.tokens.index("street")]
    best = r.weights[:, it].argmax(-1)
    assert any(int(b) in nouns for b in best)


def test_model_config_validation():
    with pytest.raises(ConfigError,
                       match=r"MiniLM-L6 .* has layers 1 to 6 \(layer = 0 to 5 counted from 0\); got layer = 6"):
        plan(AttentionConfig(model="minilm-l6", layer=6))
    with pytest.raises(ConfigError,
                       match=r"^model 'gpt-9' is neither a bundled model \(minilm-l6, smollm2-135m\) nor an existing "
                             r"folder or .gguf file \(or none\)$"):
        plan(AttentionConfig(model="gpt-9"))
    too_long = AttentionConfig(model="minilm-l6", sentence="word " * 600)  # the config reads no tokens
    with pytest.raises(ConfigError, match="at most 512 tokens; this text has 602"):
        check_tokens(too_long)
    with pytest.raises(ConfigError, match="at most 512 tokens"):
        compute(too_long)
    with pytest.raises(ConfigError, match="only used with a pretrained model"):
        AttentionConfig(layer=2)


@pytest.mark.parametrize("layout", ["row", "column"])
@pytest.mark.parametrize("layer", [0, 4])
def test_model_results_carry_their_biases(hf_model, layout, layer):
    """q = x W_q + b_q (and k, v, output) against torch's F.linear with the model's own nn.Linear."""
    cfg = AttentionConfig(sentence=SENTENCES[0], model="minilm-l6", layer=layer, layout=layout)
    r = compute(cfg)
    attn = hf_model.encoder.layer[layer].attention
    T = len(r.tokens)
    assert r.b_q.shape == (12, 1, 32) and r.b_v.shape == (12, 1, 32) and r.b_o.shape == (1, 384)
    with torch.no_grad():
        for name, linear in (("q", attn.self.query), ("k", attn.self.key), ("v", attn.self.value)):
            peer = F.linear(r.x, linear.weight, linear.bias).view(T, 12, 32).transpose(0, 1)  # (h, T, d_k)
            assert torch.allclose(getattr(r, name), peer, atol=1e-5), name
            assert torch.allclose(getattr(r, "b_" + name).flatten(), linear.bias), name
            w = getattr(r, "w_" + name)
            xw = r.x @ w if layout == "row" else r.x @ w.transpose(-2, -1)  # (h, T, d_k)
            mine = xw + getattr(r, "b_" + name)
            assert torch.allclose(mine, peer, atol=1e-5), name
        dense = attn.output.dense
        assert torch.allclose(r.output, F.linear(r.concat, dense.weight, dense.bias), atol=1e-5)
        assert torch.allclose(r.b_o[0], dense.bias)
    assert {"b_q", "b_k", "b_v", "b_o"} <= set(r.fields())
    assert set(r.to_numpy()) >= {"b_q", "b_o"}
    want = "Q = X W_q + b_q" if layout == "row" else "Q = X W_qᵀ + b_q  (q_i = W_q x_i + b_q)"
    assert formula("q", plan(cfg)) == want
    assert formula("output", plan(cfg)).endswith("+ b_O")


def test_minilm_is_a_model_source():
    src = source("minilm-l6")
    assert isinstance(src, ModelSource) and src.spec is model_spec("minilm-l6") and src.available()
    p = src.layer_weights(2, "cpu", torch.float32)
    assert isinstance(p, Projections)
    assert p.w_q.shape == (12, 32, 384) and p.w_o.shape == (384, 384)  # column layout
    ids = torch.tensor(src.tokenize("a b c").token_ids)
    hidden, weights = src.layer_inputs(ids, "cpu", torch.float32)
    assert len(hidden) == 7 and weights.shape == (6, 12, 5, 5)

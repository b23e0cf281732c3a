"""Model mode: our BERT forward pass gives transformers' numbers for all-MiniLM-L6-v2."""

import pytest
import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.pretrained import is_available, load_model, model_tokenize, run_encoder, sentence_embedding

pytestmark = pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")

SENTENCES = [
    "The animal didn't cross the street because it was too tired",
    "When in doubt look intelligent",
    "a",
    "Ünïcödé text, numbers 12345 and emoji 🙂 mixed together!",
]


@pytest.fixture(scope="module")
def hf_model():
    transformers = pytest.importorskip("transformers")
    from attn_gui.engine.pretrained import MODELS, model_dir

    folder = model_dir(MODELS["minilm-l6"])
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
    assert (cfg.d_model, cfg.d_k, cfg.d_v, cfg.heads) == (384, 32, 32, 12)
    r = compute(cfg)
    assert r.tokens[0] == "[CLS]" and r.tokens[-1] == "[SEP]" and "animal" in r.tokens
    T = len(r.tokens)
    assert r.weights.shape == (12, T, T) and r.layer_weights.shape == (6, 12, T, T)
    assert torch.equal(r.layer_weights[3], r.weights)
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
    with pytest.raises(ValueError, match="layers 0 to 5"):
        AttentionConfig(model="minilm-l6", layer=6)
    with pytest.raises(ValueError, match="model must be one of"):
        AttentionConfig(model="gpt-9")
    with pytest.raises(ValueError, match="at most 512 tokens"):
        AttentionConfig(model="minilm-l6", sentence="word " * 600)
    with pytest.raises(ValueError, match="only used with a pretrained model"):
        AttentionConfig(layer=2)

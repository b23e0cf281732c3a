"""A model object in memory (``attn_gui.register``), never saved: every layer's α equals its own eager
attentions (transformers, the peer), and bad input is one error naming what is wrong."""

from __future__ import annotations

import pytest
import torch
import transformers

import attn_gui
from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute
from attn_gui.engine.model.registry import source
from transformers_peer import WORDS, alphas_equal_transformers, tiny_qwen2, word_tokenizer  # tests/

SENTENCE = "the cat sat on a mat"
_qwen2, _tokenizer = tiny_qwen2, word_tokenizer


@pytest.fixture(scope="module")
def qwen2():
    return _qwen2()


def test_a_model_in_memory_equals_its_own_attentions(qwen2):
    name = attn_gui.register(qwen2, _tokenizer(), name="mine")
    assert name == "mine"
    alphas_equal_transformers("mine", qwen2, SENTENCE, layers=2)
    weights = source("mine").layer_weights(0, "cpu", torch.float32)
    b_q = qwen2.model.layers[0].self_attn.q_proj.bias.view(4, 8)  # (heads, d_k)
    assert torch.equal(weights.b_q.reshape(4, 8), b_q)


def test_weights_are_read_without_a_copy(qwen2):
    from attn_gui.engine.model.decoder.source import load_model

    attn_gui.register(qwen2, _tokenizer(), name="shared")
    stored = load_model("shared").weights["model.layers.1.self_attn.k_proj.weight"]
    assert stored.data_ptr() == qwen2.model.layers[1].self_attn.k_proj.weight.data_ptr()


def test_a_transformers_tokenizer_and_registering_again(qwen2):
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=_tokenizer(), unk_token="<unk>")
    attn_gui.register(qwen2, fast, name="again")
    first = compute(AttentionConfig(sentence=SENTENCE, model="again"))
    other = _qwen2()
    with torch.no_grad():
        other.model.layers[0].self_attn.q_proj.weight.mul_(3)
    attn_gui.register(other, fast, name="again")  # the name now means the other model
    with torch.no_grad():
        out = other(torch.tensor([source("again").tokenize(SENTENCE).token_ids]), output_attentions=True)
    second = compute(AttentionConfig(sentence=SENTENCE, model="again"))
    assert torch.allclose(second.weights, out.attentions[0][0], atol=1e-5, rtol=0)
    assert not torch.allclose(first.weights, second.weights, atol=1e-3)


def test_a_gpt_neox_in_memory_reads_its_own_lm_head():
    """transformers 5 names GPT-NeoX's head lm_head in memory (embed_out on disk): it is read, not the embedding."""
    torch.manual_seed(0)
    config = transformers.GPTNeoXConfig(vocab_size=len(WORDS), hidden_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, intermediate_size=48, max_position_embeddings=64)
    hf = transformers.GPTNeoXForCausalLM(config).eval()
    hf.set_attn_implementation("eager")
    with torch.no_grad():
        for key, p in hf.named_parameters():
            if key.endswith("bias") or "layernorm" in key or "layer_norm" in key:
                p.normal_(0, 0.3).add_(1.0 if key.endswith("weight") else 0.0)
    attn_gui.register(hf, _tokenizer(), name="neox")
    out, _, _ = alphas_equal_transformers("neox", hf, SENTENCE, layers=2)
    ids = torch.tensor(source("neox").tokenize(SENTENCE).token_ids)
    logits = source("neox").forward(ids, "cpu", torch.float32).logits
    assert torch.allclose(logits, out.logits[0, -1], atol=1e-4, rtol=0)


def test_bad_input_is_one_clear_error(qwen2):
    with pytest.raises(ConfigError, match="takes a transformers PreTrainedModel; got Linear"):
        attn_gui.register(torch.nn.Linear(2, 2), _tokenizer())
    with pytest.raises(ConfigError, match="transformers tokenizer or a tokenizers.Tokenizer; got dict"):
        attn_gui.register(qwen2, {"the": 1})
    with pytest.raises(ConfigError, match=f"the embedding has {len(WORDS)} rows"):
        attn_gui.register(qwen2, _tokenizer(WORDS + [f"x{i}" for i in range(20)]), name="wrongtok")
    with pytest.raises(ConfigError, match="bundled model"):
        attn_gui.register(qwen2, _tokenizer(), name="minilm-l6")
    with torch.device("meta"):
        meta = transformers.Qwen2ForCausalLM(qwen2.config)
    with pytest.raises(ConfigError, match="meta device"):
        attn_gui.register(meta, _tokenizer(), name="meta")
    if torch.cuda.is_available():
        split = _qwen2()
        split.model.layers[1].to("cuda")
        with pytest.raises(ConfigError, match=r"split across devices \(cpu, cuda:0\)"):
            attn_gui.register(split, _tokenizer(), name="split")
    bert = transformers.BertModel(transformers.BertConfig(hidden_size=8, num_hidden_layers=1,
                                                          num_attention_heads=2, intermediate_size=8))
    with pytest.raises(ConfigError, match="register\\(\\) reads the decoders"):
        attn_gui.register(bert, _tokenizer())
    with pytest.raises(ConfigError, match="is neither a bundled model .* nor an existing folder"):
        plan(AttentionConfig(model="never-registered"))

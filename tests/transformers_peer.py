"""The check most model tests start with: every layer's α equals transformers' on the same model."""

import torch

from attn_gui.engine import AttentionConfig, compute
from attn_gui.engine.model.registry import source


def alphas_equal_transformers(path: str, hf, sentence: str, layers: int = 2, atol: float = 1e-5,
                              dtype: str = "float32"):
    """Every layer's α of the model at ``path`` on ``sentence`` (the shown layer's and, where the run keeps them, the
    model view's) equals ``hf``'s eager attentions within ``atol`` (1e-5), computed in ``dtype``; returns
    transformers' output, the config and each layer's result for further checks."""
    ids = torch.tensor(source(path).tokenize(sentence).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    cfg = AttentionConfig(sentence=sentence, model=path, dtype=dtype)
    results = [compute(cfg.replace(layer=layer)) for layer in range(layers)]
    for layer, r in enumerate(results):
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=atol, rtol=0), layer
        if r.layer_weights is not None:
            assert torch.allclose(r.layer_weights[layer], out.attentions[layer][0], atol=atol, rtol=0), layer
    return out, cfg, results


WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(61)] + ["the", "cat", "sat", "on", "a", "mat", "and",
                                                                   "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"


def word_tokenizer(words=WORDS):
    """A word-level tokenizers.Tokenizer of ``words`` (ids in their order), split on whitespace (adds nothing)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def top5_equals_transformers(cfg, logits: torch.Tensor, vocab) -> None:
    """``compute(cfg)``'s next-token top 5 are the softmax of transformers' last ``logits`` (V,): tokens, p 1e-5."""
    import pytest

    probs = torch.softmax(logits.double(), -1).topk(5)
    got = compute(cfg).next_tokens
    assert [t for t, _ in got] == [vocab[i] for i in probs.indices.tolist()]
    assert [p for _, p in got] == pytest.approx(probs.values.tolist(), abs=1e-5)


def residuals_equal_transformers(path: str, hf, sentence: str):
    """The model at ``path``'s residual stream after every layer (and the final norm) equals ``hf``'s hidden
    states for ``sentence`` (1e-4); returns transformers' output."""
    ids = torch.tensor(source(path).tokenize(sentence).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_hidden_states=True)
    residual = source(path).forward(ids, "cpu", torch.float32).residual
    for ours, theirs in zip(residual, out.hidden_states, strict=True):
        assert torch.allclose(ours, theirs[0], atol=1e-4, rtol=1e-4)
    return out


def cached_steps_equal_recomputing(cfg, steps: int = 2):
    """Each cached decoding step's alpha and logits equal a full recompute's; returns the decoder."""
    from attn_gui.engine.run.decoding import Decoder

    decoder = Decoder(cfg)
    for _ in range(steps):
        step = decoder.step()
        full = decoder.recompute()
        assert torch.allclose(step.weights, full.weights[:, :, -1], atol=1e-5, rtol=0)
        assert torch.allclose(decoder.logits, full.logits, atol=1e-5, rtol=1e-5)
    return decoder


def tiny_qwen2(**changes):
    """A random 2-layer Qwen2ForCausalLM (4 heads, 2 K/V heads, d = 32) over ``WORDS``, eager attention,
    with random biases and norm gains; built in memory, never saved."""
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen2Config(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=len(WORDS),
                                      max_position_embeddings=64, tie_word_embeddings=False, **changes)
    hf = transformers.Qwen2ForCausalLM(config).eval()
    hf.config._attn_implementation = "eager"
    with torch.no_grad():  # random, not zero, biases and norm gains: a dropped one would show
        for layer in hf.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_()
            layer.input_layernorm.weight.normal_()
    return hf


def llama2_normalized(theirs):
    """``theirs`` (transformers' tokenizer of a SentencePiece GGUF, ``AutoTokenizer.from_pretrained(gguf_file=)``:
    its LlamaTokenizer, whose Metaspace puts "▁" only at the start of a text that has none) given the normalizer
    of Llama 2's, TinyLlama's and Mistral's own tokenizer.json: transformers' ``LlamaConverter`` with ``legacy``
    (Prepend "▁", then spaces as "▁", on every stretch of text between added tokens: also after <s> and before a
    leading space, where llama.cpp puts it) and no pre-tokenizer. Its vocabulary, merges, added tokens and
    post-processor stay transformers' own."""
    from types import SimpleNamespace

    from transformers.convert_slow_tokenizer import LlamaConverter

    legacy = SimpleNamespace(original_tokenizer=SimpleNamespace(legacy=True, add_prefix_space=True))
    backend = theirs.backend_tokenizer
    backend.normalizer = LlamaConverter.normalizer(legacy, None)
    backend.pre_tokenizer = LlamaConverter.pre_tokenizer(legacy, "▁", True)  # legacy: None
    return theirs

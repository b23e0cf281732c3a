"""The check most model tests start with: every layer's α equals transformers' on the same model."""

import torch

from attn_gui.engine import AttentionConfig, compute, source


def alphas_equal_transformers(path: str, hf, sentence: str, layers: int = 2):
    """Every layer's α of the model at ``path`` on ``sentence`` equals ``hf``'s eager attentions
    (1e-5); returns transformers' output, the config and each layer's result for further checks."""
    ids = torch.tensor(source(path).tokenize(sentence).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    cfg = AttentionConfig(sentence=sentence, model=path)
    results = [compute(cfg.replace(layer=layer)) for layer in range(layers)]
    for layer, r in enumerate(results):
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
    return out, cfg, results


WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(40)] + ["the", "cat", "sat", "on", "a", "mat"]


def word_tokenizer(words=WORDS):
    """A word-level tokenizers.Tokenizer of ``words`` (ids in their order), split on whitespace."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


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

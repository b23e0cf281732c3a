"""A tiny random Llama folder and 200 sentences for the corpus census tests (``test_corpus``, ``test_cli_corpus``)."""

import random

import torch

WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(40)] + ["the", "cat", "sat", "on", "a", "mat"]


def sentences(n: int = 200, seed: int = 0) -> list[str]:
    """``n`` sentences of 3 to 14 words; every third repeats a span of itself (induction has rows)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS[3:]) for _ in range(rng.randint(3, 10))]
        if i % 3 == 0:
            words += words[: rng.randint(2, len(words))]
        out.append(" ".join(words))
    return out


def llama_folder(path, seed: int = 0, layers: int = 2, heads: int = 4):
    """Save a tiny random Llama (eager attention) with a WordLevel tokenizer in ``path``; return the model."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(seed)
    config = transformers.AutoConfig.for_model("llama", hidden_size=32, intermediate_size=48,
                                               num_hidden_layers=layers, num_attention_heads=heads,
                                               num_key_value_heads=2, vocab_size=len(WORDS), bos_token_id=1,
                                               eos_token_id=2, tie_word_embeddings=False, max_position_embeddings=64,
                                               rope_theta=500.0)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:  # random, not one, norm gains: they must be read
                p.normal_(1.0, 0.3)
            elif "q_proj" in name or "k_proj" in name:  # sharper heads than the default draw's near-uniform ones
                p.normal_(0.0, 0.5)
    hf.save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path / "tokenizer.json"))
    return hf

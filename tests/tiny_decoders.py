"""Tiny random decoders of each family, made by transformers (save_pretrained) with a WordLevel tokenizer,
their biases and norm gains random (transformers' 0 and 1 would hide one that is dropped)."""

import torch
import transformers

WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(21)] + ["the", "cat", "sat", "on", "a", "mat", "and",
                                                                   "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"
FAMILIES = {
    "llama": dict(num_key_value_heads=2, rope_theta=500.0),  # grouped-query
    "qwen2": dict(num_key_value_heads=2),  # Q/K/V biases
    "qwen3": dict(num_key_value_heads=2, head_dim=16),  # per-head q_norm and k_norm
    "gpt2": {},  # LayerNorm (centring, a bias), learned positions, biases everywhere
}


def tiny_decoder(kind: str, folder, layers: int = 2, **changes) -> transformers.PreTrainedModel:
    """Save a ``layers``-layer (2), 4-head, d = 32 model of family ``kind`` in ``folder``; return transformers'
    model. ``changes``: config fields over ``FAMILIES[kind]``'s (num_key_value_heads=4: no grouped-query)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    if kind == "gpt2":
        config = transformers.GPT2Config(vocab_size=len(WORDS), n_positions=64, n_embd=32, n_layer=layers, n_head=4,
                                         bos_token_id=1, eos_token_id=2, **changes)
    else:
        config = transformers.AutoConfig.for_model(kind, hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
                                                   num_attention_heads=4, vocab_size=len(WORDS), eos_token_id=2,
                                                   bos_token_id=1, tie_word_embeddings=False,
                                                   **{"max_position_embeddings": 128, **FAMILIES[kind], **changes})
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name or ".ln_" in name:
                p.normal_(0, 0.3).add_(1.0 if name.endswith("weight") else 0.0)
    hf.save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return hf


CIRCUIT_PAIRS = [  # circuit pairs in WORDS (attn-gui circuit's JSONL): answers against wrong tokens
    {"clean": "the cat sat on a mat and the dog", "corrupt": "the dog sat on a mat and the cat",
     "answer": "ran", "wrong": "sat"},
    {"clean": "a dog ran on the mat and a cat", "corrupt": "a cat ran on the mat and a dog",
     "answer": "sat", "wrong": "ran"}]


def circuit_pairs(folder) -> str:
    """Write ``CIRCUIT_PAIRS`` as folder/pairs.jsonl; its path."""
    import json
    from pathlib import Path

    path = Path(folder) / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in CIRCUIT_PAIRS), encoding="utf-8")
    return str(path)

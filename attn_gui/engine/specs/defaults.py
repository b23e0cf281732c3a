"""What a config.json that leaves a field out means: the family's transformers config class default.

transformers reads a field that config.json lacks at its config class's default (``Gemma2Config()``:
soft-caps 50 and 30, query_pre_attn_scalar 256, head_dim 256), so the engine must too, or it shows another
model's numbers without a word. The table is written here so it holds without transformers installed;
``tests/engine/test_fidelity_third.py`` checks every entry against the config classes themselves.

Fields a family reads that the table leaves out (``LEFT_OUT``) are ones whose absence changes no number
(sizes that the weights must match and a missing one is refused, token ids, fields whose default the reader
already derives as transformers does).
"""

from __future__ import annotations

ROPE = 10000.0  # every RoPE family's base but Gemma 3's global one (``hf.spec.rope``'s default where none is given)
_LLAMA: dict[str, object] = {"rms_norm_eps": 1e-6, "max_position_embeddings": 2048}

DEFAULTS: dict[str, dict[str, object]] = {  # by model_type: field -> the config class's default
    "llama": _LLAMA,
    "mistral": {**_LLAMA, "max_position_embeddings": 131072, "sliding_window": 4096},
    "qwen2": {**_LLAMA, "max_position_embeddings": 32768, "use_sliding_window": False, "max_window_layers": 28},
    "qwen3": {**_LLAMA, "max_position_embeddings": 32768, "use_sliding_window": False, "max_window_layers": 28,
              "head_dim": 128},
    "olmo2": {**_LLAMA, "rms_norm_eps": 1e-5},
    "phi3": {**_LLAMA, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096},
    "gemma2": {**_LLAMA, "max_position_embeddings": 8192, "head_dim": 256, "sliding_window": 4096,
               "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0},
    "gemma3_text": {"rms_norm_eps": 1e-6, "max_position_embeddings": 131072, "head_dim": 256, "sliding_window": 4096,
                    "query_pre_attn_scalar": 256, "attn_logit_softcapping": None, "final_logit_softcapping": None,
                    "rope_theta": 1e6, "rope_local_base_freq": ROPE},
    "gpt2": {"layer_norm_epsilon": 1e-5, "n_positions": 1024, "scale_attn_weights": True,
             "scale_attn_by_inverse_layer_idx": False},
    "gpt_neox": {"layer_norm_eps": 1e-5, "max_position_embeddings": 2048, "use_parallel_residual": True,
                 "attention_bias": True},  # its Q/K/V and output biases, required where it says so
    "bert": {"layer_norm_eps": 1e-12, "max_position_embeddings": 512},
    "roberta": {"layer_norm_eps": 1e-12, "max_position_embeddings": 512},
    "distilbert": {"max_position_embeddings": 512},  # its LayerNorms' eps is 1e-12 in the modeling code
    "deberta-v2": {"layer_norm_eps": 1e-7, "max_position_embeddings": 512, "relative_attention": False,
                   "pos_att_type": None, "max_relative_positions": -1, "position_biased_input": True},
    "modernbert": {"norm_eps": 1e-5, "max_position_embeddings": 8192, "local_attention": 128},
}

# read, and absent from the table: why each changes no number when config.json leaves it out
LEFT_OUT = {
    "hidden_size": "a size the weights must match (refused where missing)",
    "num_attention_heads": "a size the weights must match (refused where missing)",
    "num_hidden_layers": "a size the weights must match (refused where missing)",
    "num_key_value_heads": "the weights' size; the class's default (the heads, or a size the weights must match)",
    "n_embd": "a size the weights must match", "n_head": "a size the weights must match",
    "n_layer": "a size the weights must match", "dim": "a size the weights must match",
    "n_heads": "a size the weights must match", "n_layers": "a size the weights must match",
    "head_dim": "hidden_size / heads where the class derives it so (Llama, Mistral, Qwen2, OLMo 2, Phi-3)",
    "hidden_act": "Family.act, the class's default (checked beside the table)",
    "hidden_activation": "Family.act", "activation_function": "Family.act", "activation": "Family.act",
    "attention_bias": "read from the weights (a bias is applied where the weights hold one; GPT-NeoX's tabled)",
    "mlp_bias": "read from the weights",
    "rope_parameters": "absent: the plain RoPE at rope_theta's default", "rope_scaling": "absent: no scaling",
    "original_max_position_embeddings": "only for a scaled RoPE, whose rope_scaling names it",
    "partial_rotary_factor": "Family.rotary, the class's default", "rotary_pct": "Family.rotary",
    "rotary_emb_base": "GPT-NeoX's older name of rope_theta",
    "rope_theta": "ROPE, hf.spec.rope's default (Gemma 3's in the table); filled in, it would hide rotary_emb_base",
    "eos_token_id": "a token id, no number of the forward",
    "pad_token_id": "RoBERTa's position offset: its class default 1 is position_offset's",
    "sliding_window": "no window where the class's default is None; ModernBERT's sets local_attention (tabled)",
    "use_sliding_window": "off where the class has none", "max_window_layers": "Qwen's only",
    "layer_types": "derived from the window pattern, as the class derives it",
    "sliding_window_pattern": "Gemma 3's Family.window_pattern", "_sliding_window_pattern": "Family.window_pattern",
    "is_decoder": "GPT-NeoX: causal either way",
    "model_type": "the family itself", "intermediate_size": "a size the weights carry",
    "vocab_size": "a size the weights carry", "type_vocab_size": "a size the weights carry",
    "norm_bias": "read from the weights",
    "position_buckets": "DeBERTa: no class default; the modeling code's -1, as encoder_config reads it",
    "share_att_key": "DeBERTa: no class default; the modeling code's False", "norm_rel_ebd": "DeBERTa: 'none'",
    "global_attn_every_n_layers": "ModernBERT's older field; the modeling code's 3, as encoder_config reads it",
    "global_rope_theta": "ModernBERT's older field (160000)", "local_rope_theta": "ModernBERT's older field",
}


def completed(cfg: dict) -> dict:
    """``cfg`` (config.json's dict) with every field its family reads and it leaves out at transformers' default
    for the family; a field it gives, null included, is kept as given."""
    return {**DEFAULTS.get(str(cfg.get("model_type")), {}), **cfg}

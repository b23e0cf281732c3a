"""The model families, one table for Hugging Face folders and GGUF files (no heavy imports here).

A family is a row of declared differences from the one decoder (``llama.py``) or the one
encoder (``encoder.py``), as transformers' modular files write Qwen3 as Llama plus q/k norms.
``readers/hf`` finds a folder's row by its config.json ``model_type``; ``readers/gguf`` finds a
file's by its ``general.architecture`` (``Family.gguf``). Both describe a decoder with
``decoder_spec``, so the window says the same of a model whichever file it came from.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from .spec import ModelSpec

# the most tokens an encoder (or a decoder with soft-capped scores) reads here: its every layer's T x T maps are
# kept; a decoder reads up to its own context length, streamed (engine.compute)
MAX_TOKENS = 512

# config.json fields that never change the numbers shown: names, ids, output switches, training-only settings
# (dropouts, initialisation), sizes the weights themselves carry, and the feed-forward split of pretraining_tp
# (the same product, computed in slices)
INERT = frozenset({
    "_name_or_path", "architectures", "auto_map", "transformers_version", "dtype", "torch_dtype", "model_type",
    "id2label", "label2id", "problem_type", "return_dict", "output_attentions", "output_hidden_states", "use_cache",
    "initializer_range", "initializer_factor", "bos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "chunk_size_feed_forward", "is_encoder_decoder", "gradient_checkpointing", "task_specific_params",
    "attention_dropout", "hidden_dropout", "attn_pdrop", "embd_pdrop", "resid_pdrop", "dropout", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "classifier_dropout", "qa_dropout", "seq_classif_dropout",
    "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type", "summary_use_proj",
    "summary_last_dropout",
    "vocab_size", "intermediate_size", "n_inner", "hidden_dim", "type_vocab_size", "n_ctx", "pretraining_tp",
    "tie_word_embeddings",  # the weights say: lm_head.weight, else the embedding
    "reorder_and_upcast_attn",  # GPT-2's softmax in float32: the same numbers
    "sinusoidal_pos_embds",  # DistilBERT's sinusoidal positions are stored in its position embedding
    # older or tool-written configs: generation defaults (sampling, not the forward pass), caches, tooling
    "output_past", "_num_labels", "finetuning_task", "prefix", "tokenizer_class", "torchscript", "use_bfloat16",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "tf_legacy_loss",
    "cache_implementation", "is_llama_config", "transformers.js_config",
    # how attn-gui's trainer made the folder (engine/train/checkpoint.py): a record
    "attn_gui_train", "attn_gui_step", "attn_gui_task",
})
# fields transformers' loading reads (from_pretrained: the quantizer rewrites the stored weights), not its modeling
# code: every family refuses them where set (a quantized checkpoint's tensors are not the model's weights)
LOADING_REFUSES = ("quantization_config",)
# the fields the Llama-family decoder reads (every rms/gated family): biases and the MLP's biases are read
# where the weights hold them (attention_bias, mlp_bias); the window's fields as transformers reads them for
# the family (``Family.window``: Llama's sliding_window is ignored by transformers, and so here)
DECODER_READS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "head_dim",
                 "max_position_embeddings", "rms_norm_eps", "hidden_act", "attention_bias", "mlp_bias",
                 "rope_theta", "rope_parameters", "rope_scaling", "original_max_position_embeddings",
                 "partial_rotary_factor", "eos_token_id",
                 "sliding_window", "use_sliding_window", "max_window_layers", "layer_types")
ENCODER_READS = ("hidden_size", "num_attention_heads", "num_hidden_layers", "max_position_embeddings",
                 "layer_norm_eps", "hidden_act", "eos_token_id")
ENCODER_FIXED = (("is_decoder", False), ("add_cross_attention", False), ("position_embedding_type", "absolute"))


@dataclass(frozen=True)
class Family:
    """What one family declares beyond the Llama decoder or the BERT encoder."""

    label: str
    path: str = "decoder"  # "decoder": llama.py; "encoder": encoder.py
    names: tuple[tuple[str, str], ...] = ()  # config.json's own key for a size, where it is not BERT's / Llama's
    window: str = ""  # "every": sliding_window in every layer (Mistral); "layers": Qwen's use_sliding_window
    #                   and layer_types say which layers slide; "local": ModernBERT's local and global layers,
    #                   each with its window and RoPE base (encoder_config.local_layers); "types": layer_types
    #                   alone, each layer its own (Gemma 2: local and global layers alternating); "": none
    norm: str = "rms"  # the norm and its gain: "rms" (x̂ γ), "gemma" (x̂ (1 + γ), in float32), "layer" (LayerNorm)
    block: str = "pre"  # the residual wiring, a row of ``llama.BLOCKS`` (decoders) or ``encoder.BLOCKS``:
    #                   "pre" (Llama: a norm before attention and before the MLP); "parallel" (GPT-NeoX, where
    #                   use_parallel_residual: attention and the MLP read one residual, their sum added);
    #                   "sandwich" (Gemma 2: a norm after attention and around the MLP too); "post" (OLMo 2: no norm
    #                   before attention or the MLP, each output normed before its residual; q/k norms over all
    #                   heads); encoders: "post_ln" (BERT: LayerNorm after each residual), "pre_ln" (ModernBERT)
    mlp: str = "gated"  # "gated": W_down (act(W_gate x) * W_up x) (SwiGLU with silu); "plain": W_down act(W_up x);
    #                   "geglu": ModernBERT's W_o (act(a) * g), a, g = W_i x split in two
    act: str = "silu"  # the activation when config.json names none (transformers' config default)
    relative: bool = False  # DeBERTa's disentangled attention: c2p and p2c terms (attention.Relative)
    qk_norm: bool = False  # Qwen3: q_norm and k_norm, each head's q and k RMS-normed before RoPE
    positions: str = "rope"  # "rope"; "learned": absolute positions added to the embedding (GPT-2's wpe)
    rotary: float | None = None  # reads a partial rotary share (rope_parameters' partial_rotary_factor,
    #                              rotary_pct), this one where config.json names none; None: every dimension
    rename: str = ""  # the reader that renames and splits its weights into llama.py's names (hf.RENAMES)
    embed_scale: bool = False  # Gemma: the embedding multiplied by √d
    window_pattern: int = 2  # window "types" without layer_types: every pattern-th layer global, the others local
    layer_rope: bool = False  # Gemma 3: local and global layers each with their own RoPE (rope_parameters by type)
    gguf: str = ""  # the general.architecture llama.cpp writes it as ("": no GGUF of it is read here)
    permuted: bool = False  # llama.cpp's converter interleaved W_q's and W_k's rows for its RoPE (LlamaModel.permute)
    gguf_names: tuple[tuple[str, str], ...] = ()  # llama.cpp's tensor leaves that are not Llama's, each with
    #                   transformers' name (readers.gguf.tensors.LEAVES); "self_attn.qkv_proj" and
    #                   "mlp.gate_up_proj" are fused in the file and split when it is read (tensors.to_hf)
    gguf_27b: int = 0  # Gemma: the block count llama.cpp takes for the 27B, whose scores it divides by
    #                   √(d / h) instead of √key_length (llama-model.cpp, f_attention_scale)
    also: tuple[str, ...] = ()  # other models of the family, named where a GGUF is refused
    reads: tuple[str, ...] = DECODER_READS  # the config.json fields it honours (INERT ones aside)
    fixed: tuple[tuple[str, object], ...] = ()  # fields it runs at one value only; another is refused
    refuses: tuple[str, ...] = ()  # fields transformers' modeling code for the family reads and attn-gui does not
    #                                compute: refused in one line. Any other field is inert: transformers never
    #                                reads it (tie_weights_, reference_compile, ...), so it changes no number
    #                                (tests/engine/test_family_fields.py derives both from transformers' source)
    softcap: bool = True  # applies attn_logit_softcapping where config.json has it (Gemma 3's is read by its config
    #                       but its attention never caps: transformers' Gemma3Attention passes no softcap)


# llama.cpp's names of Gemma's sandwich norms (gguf-py's tensor_mapping: ATTN_POST_NORM, FFN_NORM, FFN_POST_NORM)
GEMMA_NAMES = (("post_attention_norm", "post_attention_layernorm"), ("ffn_norm", "pre_feedforward_layernorm"),
               ("post_ffw_norm", "post_feedforward_layernorm"))

FAMILIES = {  # by config.json's model_type
    "llama": Family("Llama", gguf="llama", permuted=True, also=("SmolLM", "TinyLlama")),
    "mistral": Family("Mistral", window="every", gguf="llama", permuted=True),  # llama.cpp writes Mistral as llama
    "qwen2": Family("Qwen2", window="layers", gguf="qwen2"),
    "qwen3": Family("Qwen3", window="layers", qk_norm=True, gguf="qwen3"),  # Qwen3Model(Qwen2Model): no permute
    "olmo2": Family("OLMo 2", qk_norm=True, block="post", gguf="olmo2",  # Olmo2Config: Llama's fields
                    gguf_names=(("post_attention_norm", "post_attention_layernorm"),
                                ("post_ffw_norm", "post_feedforward_layernorm"))),
    "phi3": Family("Phi-3", window="every", rotary=1.0, rename="phi3", also=("Phi-4",),  # fused qkv, gate_up
                   gguf="phi3", gguf_names=(("attn_qkv", "self_attn.qkv_proj"), ("ffn_up", "mlp.gate_up_proj"))),
    "gemma2": Family("Gemma 2", names=(("act", "hidden_activation"),), window="types", norm="gemma",
                     act="gelu_pytorch_tanh", block="sandwich", embed_scale=True, gguf="gemma2",
                     gguf_names=GEMMA_NAMES, gguf_27b=46,
                     reads=(*DECODER_READS, "hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping",
                            "final_logit_softcapping"), fixed=(("use_bidirectional_attention", False),)),
    "gemma3_text": Family("Gemma 3", names=(("act", "hidden_activation"),), window="types", norm="gemma",
                          act="gelu_pytorch_tanh", block="sandwich", embed_scale=True, qk_norm=True,
                          window_pattern=6,
                          layer_rope=True, gguf="gemma3", gguf_names=GEMMA_NAMES, gguf_27b=62, softcap=False,
                          reads=(*DECODER_READS, "hidden_activation", "query_pre_attn_scalar",
                                 "attn_logit_softcapping", "final_logit_softcapping", "rope_local_base_freq",
                                 "sliding_window_pattern", "_sliding_window_pattern"),
                          fixed=(("use_bidirectional_attention", False),)),
    "gpt2": Family("GPT-2", names=(("heads", "n_head"), ("d_model", "n_embd"), ("layers", "n_layer"),
                                    ("positions", "n_positions"), ("eps", "layer_norm_epsilon"),
                                    ("act", "activation_function")), norm="layer", mlp="plain", act="gelu_new",
                   positions="learned", rename="gpt2",
                   reads=("n_embd", "n_head", "n_layer", "n_positions", "layer_norm_epsilon", "activation_function",
                          "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "eos_token_id"),
                   fixed=(("add_cross_attention", False),)),
    "gpt_neox": Family("GPT-NeoX", norm="layer", mlp="plain", act="gelu", rotary=0.25, block="parallel",
                       rename="gpt_neox", also=("Pythia",),  # GPTNeoXConfig: rotary_pct 0.25, use_parallel_residual
                       gguf="gptneox", gguf_names=(("attn_qkv", "self_attn.qkv_proj"),),
                       reads=("hidden_size", "num_attention_heads", "num_hidden_layers", "max_position_embeddings",
                              "layer_norm_eps", "hidden_act", "attention_bias", "rope_theta", "rotary_emb_base",
                              "rope_parameters", "rope_scaling", "rotary_pct", "partial_rotary_factor",
                              "use_parallel_residual", "eos_token_id",
                              "is_decoder"),  # causal either way: modeling_gpt_neox never reads is_decoder
                       refuses=("head_dim",)),  # transformers takes it for the rotary width only, not the heads
    "bert": Family("BERT", path="encoder", norm="layer", block="post_ln", mlp="plain", act="gelu",
                   reads=ENCODER_READS, fixed=ENCODER_FIXED),
    "roberta": Family("RoBERTa", path="encoder", norm="layer", block="post_ln", mlp="plain", act="gelu",
                      reads=(*ENCODER_READS, "pad_token_id"), fixed=ENCODER_FIXED),
    "distilbert": Family("DistilBERT", path="encoder", names=(("heads", "n_heads"), ("d_model", "dim"),
                                                             ("layers", "n_layers"), ("act", "activation")),
                         norm="layer", block="post_ln", mlp="plain", act="gelu",
                         reads=("dim", "n_heads", "n_layers", "max_position_embeddings",
                                                         "activation", "eos_token_id")),
    # their fields: encoder_config.FIELDS (honoured, refused, unused), checked there
    "deberta-v2": Family("DeBERTa-v2", path="encoder", norm="layer", block="post_ln", relative=True, mlp="plain",
                         act="gelu"),  # v3 folders too
    "modernbert": Family("ModernBERT", path="encoder", names=(("eps", "norm_eps"), ("act", "hidden_activation")),
                         window="local", block="pre_ln", norm="layer", mlp="geglu", act="gelu"),
}


def gguf_architectures() -> dict[str, list[str]]:
    """The GGUF architectures read here, each with the model_types llama.cpp writes as it, in table order."""
    found: dict[str, list[str]] = {}
    for kind, family in FAMILIES.items():
        if family.gguf:
            found.setdefault(family.gguf, []).append(kind)
    return found


def gguf_family(arch: str, name: str) -> Family | None:
    """The family of a GGUF of ``general.architecture`` ``arch`` and ``general.name`` ``name``; None if not read.

    Where llama.cpp writes several families as one architecture (Mistral as llama), the one
    named in ``general.name`` is chosen, as transformers' GGUF loader chooses; else the first.
    """
    kinds = gguf_architectures().get(arch)
    if not kinds:
        return None
    named = [kind for kind in kinds if kind in name.lower()]
    return FAMILIES[(named or kinds)[0]]


def supported_ggufs() -> str:
    """The architectures for a refusal: "llama (Llama, Mistral, SmolLM, TinyLlama), qwen2, qwen3"."""
    parts = []
    for arch, kinds in gguf_architectures().items():
        names = [FAMILIES[kind].label for kind in kinds] + [n for kind in kinds for n in FAMILIES[kind].also]
        parts.append(f"{arch} ({', '.join(names)})" if len(names) > 1 else arch)
    return ", ".join(parts)


def decoder_spec(name: str, label: str, reader: str, family: Family, *, weights: str = "",
                 notes: tuple[str, ...] = (), parallel: bool = True, **sizes) -> ModelSpec:
    """The spec of a decoder of ``family`` read by module ``reader``, described once for every file kind.

    ``weights`` says how exact the weights are (quantized ones); ``notes`` are further facts the window says
    of the model (a GGUF key read and, as llama.cpp reads it, not applied); ``parallel``: the file's
    use_parallel_residual (GPT-NeoX: false wires the block "pre"); ``sizes`` are ``ModelSpec``'s.
    """
    block = "pre" if family.block == "parallel" and not parallel else family.block
    about = ("output is the attention block's output, before the residual",
             "the model is causal by construction: the causal mask is always on", *((weights,) if weights else ()),
             *notes)
    x_is = f"{'LayerNorm' if family.norm == 'layer' else 'RMSNorm'} of the residual stream entering the layer"
    if block == "post":
        x_is = "the residual stream entering the layer (no norm before attention)"
        about = (*about, "the attention and MLP outputs are RMS-normed before each is added to the residual")
    return ModelSpec(name, label, module="decoder", reader=reader, causal=True, qk_norm=family.qk_norm,
                     qk_norm_across=block == "post", norm=family.norm, block=block,
                     x_is=x_is, about=about, **sizes)


def regular(path: Path) -> bool:
    """A regular file (a FIFO or a device is never opened: reading one could block forever)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False

"""Tiny GGUF files written as llama.cpp's converter writes them, from tiny random transformers decoders
(``tests/engine/test_gguf_files.py``, ``tests/ui/test_open_model.py``): the ``gguf`` package's
GGUFWriter, llama.cpp's metadata keys and tensor names, W_q and W_k rows permuted for llama,
a byte-level or SentencePiece vocabulary."""

import numpy as np
import torch

from attn_gui.engine.readers.gguf import tensors as gguf_tensors
from attn_gui.engine.text.byte_bpe import bytes_to_unicode

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]


def byte_level_vocab():
    """A byte-level BPE vocabulary (GPT-2's byte alphabet, merges that spell the words), as llama.cpp writes
    SmolLM2's and Qwen2's: (tokens, types, merges)."""
    spell = bytes_to_unicode()
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *(spell[b] for b in range(256)), "<tool_call>"]
    types = [3, 3, 3] + [1] * 256 + [4]
    merges = []
    for word in [*("Ġ" + w for w in WORDS), *WORDS, "12", "345"]:
        pieces = list(word)
        while len(pieces) > 1:
            merge = f"{pieces[0]} {pieces[1]}"
            if merge not in merges:
                merges.append(merge)
                tokens.append(pieces[0] + pieces[1])
                types.append(1)
            pieces[:2] = [pieces[0] + pieces[1]]
    return tokens, types, merges


def sentencepiece_vocab():
    """A SentencePiece vocabulary as llama.cpp writes TinyLlama's and Mistral's: <unk>, <s>, </s>, the 256
    byte pieces, then pieces with scores (no merges)."""
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256))]
    types = [2, 3, 3] + [6] * 256
    pieces = list("▁thecasonmdgr")
    for word in WORDS:
        word = "▁" + word
        for k in range(2, len(word) + 1):
            if word[:k] not in pieces:
                pieces.append(word[:k])
    pieces += ["he", "at"]
    tokens += pieces
    types += [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, types, scores


def write_vocab(writer, kind):
    if kind == "spm":
        tokens, types, scores = sentencepiece_vocab()
        writer.add_tokenizer_model("llama")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_scores(scores)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_unk_token_id(0)
        return tokens
    tokens, types, merges = byte_level_vocab()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2" if kind in ("qwen2", "qwen3") else "smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)
    return tokens


def permute(w, heads):
    """llama.cpp's ``LlamaModel.permute``: each head's rows from the half-split RoPE pairing to interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


LEAVES = {v: k for k, v in gguf_tensors.LEAVES.items()}


def write_gguf(path, hf, arch, vocab, name, dtype=np.float32, quant=None, raw=None, **extra):
    """``hf`` (a transformers decoder) as llama.cpp's converter writes it; ``extra`` adds or overrides keys.

    ``raw`` (transformers' name -> ((rows, bytes) uint8 blocks, their ggml type), rows in transformers' order)
    replaces those matrices: written as given, rows permuted as llama.cpp permutes them."""
    cfg = hf.config
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(128)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    for key, value in extra.items():
        if isinstance(value, str):
            writer.add_string(key.format(arch=arch), value)
        else:
            writer.add_uint32(key.format(arch=arch), value)
    write_vocab(writer, vocab)
    for key, w in hf.state_dict().items():
        w, raw_kind = raw[key] if raw and key in raw else (w.detach().numpy(), quant)
        if key == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if arch == "llama" and key.endswith("q_proj.weight"):
            w = permute(w, cfg.num_attention_heads)
        elif arch == "llama" and key.endswith("k_proj.weight"):
            w = permute(w, cfg.num_key_value_heads)
        if key.startswith("model.layers."):
            _, _, layer, *leaf = key.split(".")
            *leaf, kind = leaf
            out = f"blk.{layer}.{LEAVES['.'.join(leaf)]}.{kind}"
        else:
            out = {v: k for k, v in gguf_tensors.TOP.items()}[key]
        if w.dtype == np.uint8:  # blocks given as they are
            writer.add_tensor(out, w, raw_dtype=raw_kind)
        elif quant is not None and w.ndim == 2:  # a quantized type (Q8_0 …), as llama-quantize writes it
            writer.add_tensor(out, gguf.quants.quantize(w.astype(np.float32), quant), raw_dtype=quant)
        else:
            writer.add_tensor(out, w.astype(dtype if w.ndim == 2 else np.float32))  # norms and biases: F32
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def quantized_llama(path, kind_of, blocks=None, ffn=256, tied=True, gains=(0.0, 1.0), seed=0):
    """A tiny Llama (d 256: whole K-quant blocks of 256) written to ``path`` with each matrix in the ggml type
    ``kind_of(name)`` as ``blocks(w, kind, rng)`` gives its rows of blocks (default: ``gguf``'s quantize, for the
    types it quantizes), and the same model in float (transformers,
    eager) holding the dequantized matrices (``gguf``'s dequantize); its norm gains N(``gains``), random: they must be
    read. Returns (path, transformers' model)."""
    import transformers
    from gguf.quants import dequantize, quantize

    blocks = blocks or (lambda w, kind, rng: quantize(w, kind))

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=ffn, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      vocab_size=len(byte_level_vocab()[0]), tie_word_embeddings=tied,
                                      max_position_embeddings=128, rope_theta=500.0, rms_norm_eps=1e-5)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    raw = {}
    with torch.no_grad():
        for key, w in hf.state_dict().items():
            if w.ndim == 1:
                w.normal_(*gains)
            elif not (tied and key == "lm_head.weight"):  # tied: the embedding's
                kind = kind_of(key)
                raw[key] = blocks(w.numpy(), kind, rng), kind
                w.copy_(torch.from_numpy(dequantize(raw[key][0], kind)))
    return write_gguf(path, hf, "llama", "byte", f"Tiny {path.stem}", raw=raw), hf


def tiny(model_type, vocab_size, dtype=np.float32, tied=True, seed=0):
    """A tiny random transformers decoder (2 layers, 4 heads over 2 K/V heads, d 32), its matrices
    rounded to ``dtype`` as the file stores them."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.AutoConfig.for_model(model_type, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab_size,
                                               tie_word_embeddings=tied, max_position_embeddings=128,
                                               rope_theta=500.0, rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
                                               **({"sliding_window": None} if model_type == "mistral" else {}),
                                               **({"head_dim": 8} if model_type == "qwen3" else {}))
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for w in hf.state_dict().values():
            if w.ndim == 1:
                w.normal_()  # random gains and (Qwen2's) biases, not ones and zeros: they must be read
            w.copy_(torch.from_numpy(w.numpy().astype(dtype if w.ndim == 2 else np.float32).astype(np.float32)))
    return hf


ARCHES = {"gemma2": "GEMMA2", "gemma3": "GEMMA3", "phi3": "PHI3", "olmo2": "OLMO2", "gptneox": "GPTNEOX",
          "llama": "LLAMA", "qwen2": "QWEN2"}  # general.architecture -> gguf-py's MODEL_ARCH


def llama3_rope_freqs(d_k, rope):
    """llama.cpp's rope_freqs of a Llama 3.1 RoPE (``LlamaModel.generate_extra_tensors``): per pair, 1 where the
    wavelength is short, ``factor`` where it is long, 1 / ((1 - smooth) / factor + smooth) between."""
    import math

    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, d_k, 2, dtype=torch.float32) / d_k))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    out = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write_converted(path, hf, arch, vocab, name):
    """``hf`` (a tiny transformers decoder) as llama.cpp's converter (convert_hf_to_gguf.py) writes ``arch``:
    Gemma2Model, Gemma3Model, Phi3MiniModel (LongRoPE's factors too), Olmo2Model, GPTNeoXModel, LlamaModel
    with a Llama 3.1 RoPE, or Qwen2Model with YaRN.

    The metadata each ``set_gguf_parameters`` writes (Gemma 2 and GPT-NeoX write no rope.freq_base: llama.cpp
    takes 10000; Phi-3 writes rope.scaling.original_context_length and a sliding window of 0 for none), the
    tensor names of gguf-py's tensor_mapping (its ``get_tensor_name_map``, which the converter maps with), and
    each ``modify_tensors``: Gemma's norm gains stored as 1 + g and its lm_head dropped, GPT-NeoX's per-head
    query_key_value rows regrouped into [Q; K; V], Phi-3's qkv_proj and gate_up_proj kept fused, Llama's W_q and
    W_k permuted and its rope_freqs (``LlamaModel.generate_extra_tensors``). Left out: Gemma3Model's cut of the
    embedding to the vocabulary's length (the tests' Gemma checkpoints have 4 rows more, for the tokens
    transformers' Gemma tokenizer adds, which the folder's tokenizer.json holds)."""
    import math

    import gguf

    cfg = hf.config
    rope = cfg.rope_parameters
    rope = rope.get("full_attention", rope)  # Gemma 3: its global layers'
    d, h = cfg.hidden_size, cfg.num_attention_heads
    d_k = getattr(cfg, "head_dim", None) or d // h
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(d)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(h)
    if arch == "gptneox":
        writer.add_rope_dimension_count(int(rope["partial_rotary_factor"] * d_k))
        writer.add_parallel_residual(cfg.use_parallel_residual)
        writer.add_layer_norm_eps(cfg.layer_norm_eps)
    else:
        writer.add_head_count_kv(cfg.num_key_value_heads)
        writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    if arch in ("gemma2", "gemma3"):
        writer.add_key_length(d_k)
        writer.add_value_length(d_k)
        writer.add_sliding_window(cfg.sliding_window)
        if cfg.final_logit_softcapping:
            writer.add_final_logit_softcapping(cfg.final_logit_softcapping)
    if arch == "gemma2":
        writer.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
    elif arch != "gptneox":
        writer.add_rope_freq_base(rope["rope_theta"])
    if arch == "gemma3" and rope.get("rope_type") == "linear":  # TextModel's linear scaling, the global layers'
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(rope["factor"])
    if rope.get("rope_type") == "yarn":  # TextModel's YaRN: its type, factor and original context length
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(rope["factor"])
        writer.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    if arch == "phi3":
        original = rope.get("original_max_position_embeddings") or cfg.original_max_position_embeddings
        writer.add_rope_scaling_orig_ctx_len(original)
        writer.add_rope_dimension_count(int(rope.get("partial_rotary_factor", 1.0) * d) // h)
        writer.add_sliding_window(cfg.sliding_window or 0)
        if rope.get("long_factor"):  # Phi3MiniModel.generate_extra_tensors: LongRoPE's factors and attention factor
            scale = cfg.max_position_embeddings / original
            writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1
                                                 else 1.0)
            writer.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], dtype=np.float32))
            writer.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], dtype=np.float32))
    if arch == "llama":
        writer.add_rope_dimension_count(d_k)
    write_vocab(writer, vocab)
    if vocab == "spm" and arch.startswith("gemma"):
        writer.add_add_space_prefix(False)  # Gemma2Model.set_vocab
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[ARCHES[arch]], cfg.num_hidden_layers)
    for key, w in hf.state_dict().items():
        if key == "lm_head.weight" and (cfg.tie_word_embeddings or arch.startswith("gemma")):
            continue
        w = w.detach().float()
        if arch.startswith("gemma") and key.endswith("norm.weight"):
            w = w + 1
        if arch == "gptneox" and ".query_key_value." in key:
            w = w.reshape(h, 3, d_k, *w.shape[1:])
            w = torch.cat([w[:, j].reshape(h * d_k, *w.shape[3:]) for j in range(3)])
        if arch == "llama" and key.endswith("q_proj.weight"):
            w = torch.from_numpy(permute(w.numpy(), h))
        elif arch == "llama" and key.endswith("k_proj.weight"):
            w = torch.from_numpy(permute(w.numpy(), cfg.num_key_value_heads))
        out = names.get_name(key, try_suffixes=(".weight", ".bias"))
        assert out is not None, key
        writer.add_tensor(out, w.numpy())
    if arch == "llama":
        writer.add_tensor("rope_freqs.weight", llama3_rope_freqs(d_k, rope))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)

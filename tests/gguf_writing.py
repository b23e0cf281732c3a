"""Tiny GGUF files written as llama.cpp's converter writes them, from tiny random transformers decoders
(``tests/engine/test_gguf_files.py``, ``tests/ui/test_open_model.py``): the ``gguf`` package's
GGUFWriter, llama.cpp's metadata keys and tensor names, W_q and W_k rows permuted for llama,
a byte-level or SentencePiece vocabulary."""

import numpy as np
import torch

from attn_gui.engine.sources import gguf_file
from attn_gui.engine.sources.byte_bpe import bytes_to_unicode

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


LEAVES = {v: k for k, v in gguf_file.LEAVES.items()}


def write_gguf(path, hf, arch, vocab, name, dtype=np.float32, quant=None, **extra):
    """``hf`` (a transformers decoder) as llama.cpp's converter writes it; ``extra`` adds or overrides keys."""
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
        w = w.detach().numpy()
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
            out = {v: k for k, v in gguf_file.TOP.items()}[key]
        if quant is not None and w.ndim == 2:  # a quantized type (Q8_0 …), as llama-quantize writes it
            writer.add_tensor(out, gguf.quants.quantize(w.astype(np.float32), quant), raw_dtype=quant)
        else:
            writer.add_tensor(out, w.astype(dtype if w.ndim == 2 else np.float32))  # norms and biases: F32
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


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

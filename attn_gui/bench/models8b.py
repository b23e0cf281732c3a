"""The files researchers run, written from random numbers: a Llama-3-8B-shaped GGUF and bfloat16 folder.

``write_gguf`` writes a GGUF shaped as Llama-3-8B (32 layers, 32 query heads over 8 K/V heads,
d_model 4096, feed-forward 14336, a 128,256-token vocabulary, RoPE base 500000) from random blocks,
one tensor at a time, in the types llama.cpp's ``llama-quantize`` gives each tensor
(``llama-quant.cpp: llama_tensor_get_type``): "Q4_0", every matrix Q4_0 but the output matrix, Q6_K;
"Q4_K_M", every matrix Q4_K but the output matrix and, where ``use_more_bits`` holds (the first and
last eighth of the layers and every third between), attn_v and ffn_down, Q6_K; the norms F32. Each
block's scales are set so that the weights have the spread of a trained model's (about 0.02), its
other bytes random. The vocabulary is byte-level BPE as Llama 3's (pre-tokenizer "llama-bpe"):
the 256 byte tokens, merges spelling ``WORDS`` with and without a leading space, random merges up
to 128,000 tokens, and 256 special tokens from <|begin_of_text|> (id 128000, put first).

``write_folder`` writes the same shape as a transformers folder in bfloat16 (16 GB).
``sentence(T)`` is a sentence of exactly T tokens with the first one.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

LLAMA3_8B = dict(d=4096, ffn=14336, layers=32, heads=32, kv_heads=8, vocab=128256, context=8192, rope=500000.0)
WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "to", "big", "red", "house", "near", "old",
         "tree", "by", "river", "in", "small", "town", "where", "people", "walk", "every", "morning", "their",
         "children", "play", "games", "under", "bright", "blue", "sky", "while", "birds", "sing", "songs",
         "about", "summer", "days"]
SPECIAL = 256  # Llama 3's special tokens after the 128,000 BPE tokens
TYPES = {"F32": 0, "Q4_0": 2, "Q4_K": 12, "Q6_K": 14}
SPREAD = 0.02  # the weights' standard deviation, as a trained model's


def use_more_bits(layer: int, layers: int) -> bool:
    """llama.cpp's rule for the layers whose attn_v and ffn_down get more bits in Q4_K_M."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tensor_type(name: str, mix: str, layers: int) -> str:
    """The ggml type llama-quantize gives tensor ``name`` in ``mix`` ("Q4_0" or "Q4_K_M")."""
    if name.endswith("norm.weight"):
        return "F32"
    if name == "output.weight":
        return "Q6_K"
    if mix == "Q4_0":
        return "Q4_0"
    if (".attn_v." in name or ".ffn_down." in name) and use_more_bits(int(name.split(".")[1]), layers):
        return "Q6_K"
    return "Q4_K"


def tensors(sizes: dict) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor of a Llama GGUF of ``sizes``, in llama.cpp's order and names, (rows, columns)."""
    d, f, v = sizes["d"], sizes["ffn"], sizes["vocab"]
    kv = d // sizes["heads"] * sizes["kv_heads"]
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (v, d))]
    for i in range(sizes["layers"]):
        out += [(f"blk.{i}.attn_norm.weight", (d,)), (f"blk.{i}.attn_q.weight", (d, d)),
                (f"blk.{i}.attn_k.weight", (kv, d)), (f"blk.{i}.attn_v.weight", (kv, d)),
                (f"blk.{i}.attn_output.weight", (d, d)), (f"blk.{i}.ffn_norm.weight", (d,)),
                (f"blk.{i}.ffn_gate.weight", (f, d)), (f"blk.{i}.ffn_up.weight", (f, d)),
                (f"blk.{i}.ffn_down.weight", (d, f))]
    return out + [("output_norm.weight", (d,)), ("output.weight", (v, d))]


def blocks(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Random ``kind`` blocks for a matrix of ``shape`` (rows, bytes per row) uint8, their scales set so that the
    weights spread about ``SPREAD`` (ggml's block_q4_0: d and 16 bytes of nibbles; block_q4_K: d, dmin, 12 bytes
    of 6-bit scales and minima, 128 of nibbles; block_q6_K: 192 bytes of 6-bit values, 16 int8 scales, d)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    values, size = GGML_QUANT_SIZES[GGMLQuantizationType[kind]]
    rows, cols = shape
    raw = np.frombuffer(rng.bytes(rows * cols // values * size), dtype=np.uint8).reshape(-1, size).copy()
    half = lambda x: np.full((raw.shape[0], 1), x, dtype=np.float16).view(np.uint8)  # noqa: E731
    if kind == "Q4_0":  # w = d (q - 8), q uniform on 0..15: spread 4.6 d
        raw[:, 0:2] = half(SPREAD / 4.6)
    elif kind == "Q4_K":  # w = d sc q - dmin m, sc and m uniform on 0..63: spread about 32 d 4.6, centred by dmin m
        raw[:, 0:2] = half(SPREAD / (32 * 4.6))
        raw[:, 2:4] = half(SPREAD / (32 * 4.6) * 7.5)
    else:  # Q6_K: w = d sc (q - 32), sc uniform int8 (spread 74), q on 0..63 (spread 18.5)
        raw[:, 208:210] = half(SPREAD / (74 * 18.5))
    return raw.reshape(rows, -1)


def vocabulary(rng: np.random.Generator, size: int = 128256) -> tuple[list[str], list[int], list[str]]:
    """Llama 3's vocabulary's shape: (tokens, token types, merges), ``size`` - 256 byte-level BPE tokens (128,000)
    then 256 special."""
    from ..engine.text.byte_bpe import bytes_to_unicode

    spell = bytes_to_unicode()
    tokens = [spell[b] for b in range(256)]
    known, merges = set(tokens), []

    def merge(a: str, b: str) -> None:
        if a + b not in known:
            known.add(a + b)
            tokens.append(a + b)
            merges.append(f"{a} {b}")

    # each word one token, with a space before it too: every word's letters left to right, the longest words first
    # (a shorter word's merge inside a longer one comes later, so it never splits it), then each word after "Ġ"
    for word in sorted(WORDS, key=len, reverse=True):
        for k in range(1, len(word)):
            merge(word[:k], word[k])
    for word in WORDS:
        merge("Ġ", word)
    letters = [spell[b] for b in b"etaoinshrdlucmfwypvbgkqjxz "]
    while len(tokens) < size - SPECIAL:
        base = tokens[rng.integers(256, len(tokens))] if len(tokens) > 256 else "Ġ"
        merge(base if len(base) < 12 else "Ġ", letters[rng.integers(len(letters))])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", *(f"<|reserved_special_token_{i}|>" for i in
                                                         range(SPECIAL - 2))]
    return tokens + specials, [1] * len(tokens) + [3] * SPECIAL, merges


def sentence(T: int) -> str:
    """A sentence of ``WORDS`` that the vocabulary reads as exactly T tokens, the first token included."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(T - 1))


def write_gguf(path: Path, mix: str, sizes: dict = LLAMA3_8B, seed: int = 0, log=lambda message: None) -> int:
    """Write a Llama GGUF of ``sizes`` in ``mix`` ("Q4_0" or "Q4_K_M") from random blocks, tensor by tensor (the
    model is never whole in memory); returns the file's bytes."""
    import gguf

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"Random Llama-3-8B-shaped {mix}")
    writer.add_context_length(sizes["context"])
    writer.add_embedding_length(sizes["d"])
    writer.add_block_count(sizes["layers"])
    writer.add_feed_forward_length(sizes["ffn"])
    writer.add_head_count(sizes["heads"])
    writer.add_head_count_kv(sizes["kv_heads"])
    writer.add_rope_freq_base(sizes["rope"])
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(sizes["d"] // sizes["heads"])
    writer.add_vocab_size(sizes["vocab"])
    tokens, types, merges = vocabulary(rng, sizes["vocab"])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(sizes["vocab"] - SPECIAL)  # <|begin_of_text|>
    writer.add_eos_token_id(sizes["vocab"] - SPECIAL + 1)
    writer.add_add_bos_token(True)
    plan = [(name, shape, tensor_type(name, mix, sizes["layers"])) for name, shape in tensors(sizes)]
    for name, shape, kind in plan:
        if kind == "F32":
            writer.add_tensor_info(name, shape, np.dtype(np.float32), 4 * shape[0])
        else:
            from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

            values, size = GGML_QUANT_SIZES[GGMLQuantizationType[kind]]
            nbytes = shape[0] * shape[1] // values * size
            writer.add_tensor_info(name, (shape[0], shape[1] // values * size), np.dtype(np.uint8), nbytes,
                                   raw_dtype=GGMLQuantizationType[kind])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for i, (_, shape, kind) in enumerate(plan):
        if kind == "F32":
            writer.write_tensor_data((1.0 + 0.1 * rng.standard_normal(shape[0])).astype(np.float32))
        else:
            writer.write_tensor_data(blocks(kind, shape, rng))
        if i % 36 == 0:
            log(f"{path.name}: {i + 1} of {len(plan)} tensors written")
    writer.close()
    return path.stat().st_size


def write_folder(folder: Path, sizes: dict = LLAMA3_8B, seed: int = 0, log=lambda message: None) -> int:
    """Write a Llama folder of ``sizes`` in bfloat16 (model.safetensors tensor by tensor, ``folder.write_bf16``;
    config.json; a small word-level tokenizer), weights N(0, 0.02), norm gains near 1; returns the weights'
    bytes on disk."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers

    from .folder import write_bf16

    folder.mkdir(parents=True, exist_ok=True)
    d, f, v = sizes["d"], sizes["ffn"], sizes["vocab"]
    kv = d // sizes["heads"] * sizes["kv_heads"]
    names: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (v, d))]
    for i in range(sizes["layers"]):
        p = f"model.layers.{i}."
        names += [(p + "input_layernorm.weight", (d,)), (p + "self_attn.q_proj.weight", (d, d)),
                  (p + "self_attn.k_proj.weight", (kv, d)), (p + "self_attn.v_proj.weight", (kv, d)),
                  (p + "self_attn.o_proj.weight", (d, d)), (p + "post_attention_layernorm.weight", (d,)),
                  (p + "mlp.gate_proj.weight", (f, d)), (p + "mlp.up_proj.weight", (f, d)),
                  (p + "mlp.down_proj.weight", (d, f))]
    names += [("model.norm.weight", (d,)), ("lm_head.weight", (v, d))]
    gen = torch.Generator().manual_seed(seed)
    write_bf16(folder / "model.safetensors", names,
               lambda _, shape: 1.0 + 0.1 * torch.randn(shape, generator=gen) if len(shape) == 1
               else torch.randn(shape, generator=gen) * SPREAD, log)
    config = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=d, intermediate_size=f,
                  num_hidden_layers=sizes["layers"], num_attention_heads=sizes["heads"],
                  num_key_value_heads=sizes["kv_heads"], vocab_size=v, max_position_embeddings=sizes["context"],
                  rms_norm_eps=1e-5, rope_theta=sizes["rope"], tie_word_embeddings=False, torch_dtype="bfloat16",
                  hidden_act="silu", bos_token_id=0, eos_token_id=1)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<s>", "</s>", *WORDS])}, unk_token="<s>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return (folder / "model.safetensors").stat().st_size

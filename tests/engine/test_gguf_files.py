"""A model is a .gguf file: tiny random Llama, Qwen2 and Mistral models written as llama.cpp's
converter writes them (``gguf.GGUFWriter``: its metadata keys, its tensor names, W_q and W_k rows
permuted for llama but not for qwen2, a byte-level or SentencePiece vocabulary) give through
``compute`` every layer's alpha of transformers' eager model on the same weights (1e-5) and its
next-token top 5; the tokens equal those of transformers' own GGUF tokenizer, transformers reads
the written files as the same models, the conversion is cached, and bad files are refused in one line.
"""

import os
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
import transformers

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.run.decoding import Decoder
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.engine.readers.gguf import load as gguf_load, spec as gguf_spec, vocab as gguf_vocab
from gguf_writing import byte_level_vocab, sentencepiece_vocab, tiny, write_gguf  # (tests/)
from transformers_peer import alphas_equal_transformers, llama2_normalized  # (tests/)

SENTENCE = "the cat sat on a mat and the dog ran"
TOKEN_SENTENCES = ["the cat sat on a mat", "  the  dog\nran 12345 times", "Café 漢字 🙂!",
                   "<|im_start|>the cat<|im_end|>", "the <tool_call>dog", "<s>the cat</s>", "", " the cat", "\nthe cat",
                   "<unk>the", "the </s> dog"]


CASES = {  # arch in the file, tokenizer, name, transformers' model_type, dtype of the matrices, tied
    "llama": ("llama", "byte", "Tiny SmolLM", "llama", np.float32, True),
    "qwen2": ("qwen2", "qwen2", "Tiny Qwen2", "qwen2", np.float32, True),
    "mistral": ("llama", "spm", "Tiny Mistral", "mistral", np.float16, False),  # llama.cpp writes Mistral as llama
}


@pytest.fixture(scope="module", params=sorted(CASES))
def model_file(request, tmp_path_factory):
    arch, vocab, name, kind, dtype, tied = CASES[request.param]
    tokens = (sentencepiece_vocab if vocab == "spm" else byte_level_vocab)()[0]
    hf = tiny(kind, len(tokens), dtype, tied)
    path = write_gguf(tmp_path_factory.mktemp(request.param) / f"{request.param}-tiny.gguf", hf, arch, vocab, name,
                      dtype)
    return path, hf, request.param


def test_the_spec_comes_from_the_header(model_file):
    path, hf, case = model_file
    spec = model_spec(path)
    assert (spec.layers, spec.heads, spec.kv_heads, spec.d_model, spec.d_k) == (2, 4, 2, 32, 8)
    assert spec.rope_base == 500.0 and spec.causal and spec.reader == "gguf_file" and spec.max_tokens == 128
    assert spec.has_bias == (case == "qwen2")
    family = dict(llama="Llama", qwen2="Qwen2", mistral="Mistral")[case]
    assert spec.label == f"{case}-tiny.gguf ({family} decoder, GGUF)"
    assert spec.special_tokens == (("<unk>", "<s>", "</s>") if case == "mistral" else
                                   ("<|endoftext|>", "<|im_start|>", "<|im_end|>"))
    cfg = AttentionConfig(model=path, layer=1)
    assert plan(cfg).causal and cfg.dims.kv_heads == 2 and plan(cfg).shown.rope_base == 500.0


def test_every_layer_equals_transformers(model_file):
    path, hf, case = model_file
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layout="column")
    model = source(path)
    ids = torch.tensor(model.tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True, output_hidden_states=True)
    T = len(ids)
    assert T >= 10
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
        attn = hf.model.layers[layer].self_attn
        x = hf.model.layers[layer].input_layernorm(out.hidden_states[layer][0])
        with torch.no_grad():
            q = attn.q_proj(x).view(T, -1, 8).transpose(0, 1)
            k = attn.k_proj(x).view(T, -1, 8).transpose(0, 1)
        assert torch.allclose(r.q_unrotated, q, atol=1e-4, rtol=1e-4)  # un-permuted where llama.cpp permuted
        assert torch.allclose(r.k_unrotated, k, atol=1e-4, rtol=1e-4)
        assert (r.b_q is not None) == (case == "qwen2")
    run = model.forward(ids, "cpu", torch.float32)
    for ours, theirs in zip(run.residual, out.hidden_states, strict=False):
        assert torch.allclose(ours, theirs[0], atol=1e-4, rtol=1e-4)
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)
    vocab = model.tokenize("the").vocab
    got = compute(cfg).next_tokens
    assert [t for t, _ in got] == [vocab[i] for i in probs.indices.tolist()]
    assert [p for _, p in got] == pytest.approx(probs.values.tolist(), abs=1e-5)


def test_a_qwen3_file_norms_q_and_k_per_head_as_transformers(tmp_path):
    # written as llama.cpp's Qwen3Model writes it (as Qwen2: W_q and W_k not permuted), with random norm gains
    hf = tiny("qwen3", len(byte_level_vocab()[0]))
    path = write_gguf(tmp_path / "qwen3-tiny.gguf", hf, "qwen3", "qwen3", "Tiny Qwen3")
    spec = model_spec(path)
    assert spec.qk_norm and not spec.has_bias and spec.label == "qwen3-tiny.gguf (Qwen3 decoder, GGUF)"
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE)
    assert all(r.q_normed is not None and r.k_normed is not None for r in results)
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)
    assert [p for _, p in compute(cfg).next_tokens] == pytest.approx(probs.values.tolist(), abs=1e-5)


@pytest.mark.parametrize("arch, vocab", [("qwen2", "qwen2"), ("llama", "byte")])
def test_a_llama_or_qwen_files_window_runs_as_both_readers_of_the_file_run_it(tmp_path, arch, vocab):
    """{arch}.attention.sliding_window = 4 on a qwen2 or llama file: llama.cpp reads no window for these
    architectures, and transformers' GGUF loader maps none (its Qwen2 slides only with use_sliding_window, from
    layer max_window_layers on, and no GGUF carries either; Llama has no window). So every layer reads every key:
    its α equals that of transformers' model read from the same file, on a text of 10 tokens, where a window of 4
    would have hidden keys that get weight here. The window's notes say the key is not applied (where it is
    shorter than the file's positions: a longer one could change nothing)."""
    import warnings

    hf = tiny(arch, len(byte_level_vocab()[0]), seed=3)
    path = write_gguf(tmp_path / f"{arch}-window.gguf", hf, arch, vocab, f"Tiny {arch}",
                      **{"{arch}.attention.sliding_window": 4})
    spec = model_spec(path)
    assert spec.window is None and spec.layer_windows == ()
    assert (f"attention.sliding_window = 4 is not applied: llama.cpp runs every layer of a {arch} file over all "
            "keys, as transformers reads the file") in spec.about
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=Path(path).name,
                                                                   attn_implementation="eager").eval()
    assert getattr(theirs.config, "sliding_window", None) is None  # Qwen2Config: use_sliding_window false
    out, _, results = alphas_equal_transformers(path, theirs, SENTENCE)
    T = out.attentions[0].shape[-1]
    assert T == 10
    for r in results:  # the last query gives weight to keys 4 and more behind it, which the window would hide
        assert (r.weights[:, -1, :T - 4].sum(-1) > 1e-3).all()
    longer = write_gguf(tmp_path / "longer.gguf", hf, arch, vocab, f"Tiny {arch}",
                        **{"{arch}.attention.sliding_window": 4096})  # Qwen2's, past the file's 128 positions
    assert not any("sliding_window" in line for line in model_spec(longer).about)  # it could change nothing


def test_tokens_equal_transformers_gguf_tokenizer(model_file):
    """The ids of transformers' own tokenizer of the file; a SentencePiece file's (Mistral's) with the normalizer of
    Mistral's own tokenizer.json (``llama2_normalized``), which puts "▁" before every stretch of text as llama.cpp
    does: transformers' LlamaTokenizer of the file leaves it out before a leading space and after an added token,
    and in no other sentence here."""
    path, _, case = model_file
    folder, name = os.path.split(path)
    theirs = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if case == "mistral":
        plain = [theirs(s)["input_ids"] for s in TOKEN_SENTENCES]
        theirs = llama2_normalized(theirs)
        assert [s for s, ids in zip(TOKEN_SENTENCES, plain, strict=True) if ids != theirs(s)["input_ids"]] == [
            "  the  dog\nran 12345 times", "<s>the cat</s>", " the cat", "<unk>the", "the </s> dog"]
    model = decoder.load_model(path)
    bos = [1] if case == "mistral" else []  # SentencePiece files put <s> first (no add_bos_token: llama.cpp's default)
    for sentence in TOKEN_SENTENCES:
        ids = theirs(sentence)["input_ids"]
        ours = list(source(path).tokenize(sentence).token_ids) if sentence else \
            bos + model.tokenizer.encode("", add_special_tokens=False).ids
        assert ours == ids, sentence
        assert source(path).decode_text(ours) == theirs.decode(ids), sentence
    # shown readable: a space as ␣, the bytes of 漢 (no token of their own) as \xNN
    assert source(path).tokenize("the cat 漢").tokens == (*(["<s>", "␣the"] if case == "mistral" else ["the"]),
                                                         "␣cat", "␣", "\\xe6", "\\xbc", "\\xa2")
    assert source(path).tokenize("dog\n").tokens[-1] == "↵"


def test_transformers_reads_the_written_file_as_the_same_model(model_file):
    """The peer is right about the file: transformers' own GGUF loader (which reverses llama.cpp's
    permutation for llama) gives the original model's logits."""
    path, hf, _ = model_file
    folder, name = os.path.split(path)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name,
                                                                   attn_implementation="eager").eval()
    ids = torch.tensor([[5, 9, 40, 7, 100, 3]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, hf(ids).logits, atol=1e-4, rtol=1e-4)


def test_cached_decoding_equals_recomputing(model_file):
    path, _, _ = model_file
    decoder = Decoder(AttentionConfig(sentence=SENTENCE, model=path))
    step = decoder.step()
    full = decoder.recompute()
    assert torch.allclose(step.weights, full.weights[:, :, -1], atol=1e-5, rtol=0)


def test_the_conversion_is_cached_and_redone_when_the_file_changes(tmp_path):
    from attn_gui.engine.readers import cache

    hf = tiny("qwen2", len(byte_level_vocab()[0]), seed=1)
    path = write_gguf(tmp_path / "cached.gguf", hf, "qwen2", "qwen2", "Cached")
    spec = model_spec(path)
    seen = []
    first = gguf_load.load(spec, tmp_path / "cached.gguf", lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]  # the vocabulary read, the tokenizer built, the cache written
    assert sorted(p.name for p in (cache.cache_root() / gguf_load.cache_name(Path(path))).iterdir()) == \
        ["manifest.json", "tokenizer.json"]
    folder = cache.cache_root() / gguf_load.cache_name(tmp_path / "cached.gguf")
    assert (folder / "manifest.json").is_file() and str(folder).startswith(os.environ[cache.CACHE_ENV])
    seen.clear()
    again = gguf_load.load(spec, tmp_path / "cached.gguf", lambda d, t: seen.append((d, t)))
    assert seen == [] and all(torch.equal(first["weights"][k], again["weights"][k]) for k in first["weights"])
    os.utime(path, ns=(1, 1))  # another modification time: converted again
    gguf_load.load(spec, tmp_path / "cached.gguf", lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (3, 3)


@pytest.mark.parametrize("edit", [dict(eps=0.5), dict(add_bos=True, bos_id=0), dict(eps="1e-6"),
                                  dict(special_ids=None)])
def test_an_edited_cache_manifest_is_rebuilt_from_the_file(tmp_path, edit):
    """A fact edited in the cache's manifest (an epsilon, add_bos, a value of another type) is neither used
    (another result, a token added) nor a traceback: the cache is rebuilt from the file."""
    import json

    from attn_gui.engine.readers import cache

    hf = tiny("qwen2", len(byte_level_vocab()[0]), seed=1)
    path = write_gguf(tmp_path / "edited.gguf", hf, "qwen2", "qwen2", "Edited")
    spec = model_spec(path)
    first = gguf_load.load(spec, tmp_path / "edited.gguf")
    manifest_path = cache.cache_root() / gguf_load.cache_name(Path(path)) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert first["shape"].eps == manifest["meta"]["eps"] and first["add_bos"] is None  # qwen2: no begin token
    manifest["meta"].update(edit)
    manifest_path.write_text(json.dumps(manifest))
    seen = []
    again = gguf_load.load(spec, tmp_path / "edited.gguf", lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (3, 3)  # converted again
    assert again["shape"].eps == first["shape"].eps and again["add_bos"] is None
    assert json.loads(manifest_path.read_text())["meta"] != manifest["meta"]


@pytest.mark.parametrize("child", [True, False])
def test_the_first_open_builds_the_tokenizer_in_a_child(tmp_path, monkeypatch, child):
    """A first open (empty cache) builds the tokenizer off this process's interpreter lock, in a child; where no
    child can start, here. Either way its ids are those of transformers' GGUF tokenizer of the same file."""
    import sys

    hf = tiny("qwen2", len(byte_level_vocab()[0]), seed=3)
    path = write_gguf(tmp_path / "first.gguf", hf, "qwen2", "qwen2", "First")
    built_here = []
    build = gguf_vocab.build_tokenizer
    monkeypatch.setattr(gguf_vocab, "build_tokenizer", lambda header: built_here.append(1) or build(header))
    if not child:
        monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    seen = []
    loaded = gguf_load.load(model_spec(path), Path(path), lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)] and built_here == ([] if child else [1])
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="first.gguf")
    for sentence in TOKEN_SENTENCES[:-1]:
        ids = theirs(sentence)["input_ids"]
        assert loaded["tokenizer"].encode(sentence, add_special_tokens=False).ids == ids, sentence
    assert loaded["eos_id"] == theirs.eos_token_id


def test_float16_matrices_stay_float16(model_file):
    path, _, case = model_file
    w = decoder.load_model(path).weights
    assert w["model.layers.0.self_attn.q_proj.weight"].dtype == (torch.float16 if case == "mistral" else torch.float32)
    assert w["model.layers.0.input_layernorm.weight"].dtype == torch.float32
    assert ("lm_head.weight" in w) == (case == "mistral")  # untied: output.weight is read


def test_a_quantized_file_equals_transformers_reading_it(tmp_path):
    """Q8_0 matrices: dequantized as transformers' GGUF loader dequantizes them (exactly), every layer's α alike."""
    hf = tiny("llama", len(byte_level_vocab()[0]), seed=4)
    path = write_gguf(tmp_path / "q8.gguf", hf, "llama", "byte", "Q8", quant=gguf.GGMLQuantizationType.Q8_0)
    assert model_spec(path).about[-1].startswith(
        "the weights stay quantized (Q8_0) in the mapped file; in float32 and float64 each layer's are dequantized to "
        "float32 as the forward reads them, as llama.cpp's own dequantization gives them; in bfloat16 ")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peer = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file="q8.gguf",
                                                                 attn_implementation="eager").eval()
    ours = decoder.load_model(path).weights
    for key, w in peer.state_dict().items():
        assert torch.equal(ours["model.embed_tokens.weight" if key == "lm_head.weight" else key], w), key
    alphas_equal_transformers(path, peer, SENTENCE)


# ------------------------------------------------------------------ bad files: one line each

def _llama(tmp_path, name="bad.gguf", arch="llama", vocab="byte", **extra):
    hf = tiny("llama", len(byte_level_vocab()[0]), seed=2)
    return write_gguf(tmp_path / name, hf, arch, vocab, "Bad", **extra)


def _refused(path, pattern):
    with pytest.raises(ConfigError, match=pattern) as info:
        plan(AttentionConfig(model=path))
    assert "\n" not in str(info.value)
    return str(info.value)


def test_an_unsupported_architecture_gets_one_line(tmp_path):
    writer = gguf.GGUFWriter(str(tmp_path / "falcon.gguf"), "falcon")
    writer.add_block_count(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    _refused(str(tmp_path / "falcon.gguf"), r"^falcon.gguf is a 'falcon' GGUF; supported architectures: "
                                            r"llama \(Llama, Mistral, SmolLM, TinyLlama\), qwen2, qwen3, olmo2, "
                                            r"phi3 \(Phi-3, Phi-4\), gemma2, gemma3, gptneox \(GPT-NeoX, Pythia\)$")


@pytest.mark.parametrize("cut", [10, 200, 5000, 60])
def test_a_truncated_or_corrupt_file_gets_one_line(tmp_path, cut):
    path = _llama(tmp_path)
    data = Path(path).read_bytes()
    if cut == 60:  # same size, the header's counts garbled
        data = data[:8] + b"\xff" * 16 + data[24:]
    elif cut > 100:
        data = data[:len(data) - cut]
    else:
        data = data[:cut]
    Path(path).write_bytes(data)
    gguf_spec.spec_for.cache_clear()
    _refused(path, r"^bad.gguf is not a readable GGUF file: ")


def test_not_a_gguf_and_missing_and_a_fifo(tmp_path):
    (tmp_path / "text.gguf").write_text("hello, not a model at all")
    _refused(str(tmp_path / "text.gguf"), "^text.gguf is not a readable GGUF file: it does not start with GGUF$")
    _refused(str(tmp_path / "none.gguf"), "is neither a bundled model, a model folder nor a .gguf file")
    (tmp_path / "dir.gguf").mkdir()
    _refused(str(tmp_path / "dir.gguf"), "^dir.gguf is a folder, not a GGUF file$")
    os.mkfifo(tmp_path / "fifo.gguf")  # never opened: reading a FIFO would wait for a writer forever
    _refused(str(tmp_path / "fifo.gguf"), r"^fifo.gguf is not a regular file \(a FIFO or a device is never opened\)$")


@pytest.mark.parametrize("extra, message", [
    ({"{arch}.rope.scaling.type": "dynamic"}, "uses RoPE scaling 'dynamic', which attn-gui does not apply to a GGUF "
                                              "yet"),
    ({"{arch}.rope.dimension_count": 4}, r"rotates 4 of each head's 8 dimensions \(partial RoPE\), which attn-gui's "
                                         r"Llama path does not apply \(only Phi-3 and GPT-NeoX turn a part\)$"),
    ({"{arch}.attention.sliding_window_pattern": 2}, r"^bad.gguf: its metadata llama.attention.sliding_window_pattern "
                                                     r"= 2 is not read by attn-gui's Llama path \(it could change the "
                                                     r"numbers\)$"),
    ({"tokenizer.ggml.model": "bert"}, r"has the tokenizer 'bert'; supported: gpt2 \(byte-level BPE\), llama"),
])
def test_what_is_not_run_yet_is_refused_in_one_line(tmp_path, extra, message):
    if "tokenizer.ggml.model" in extra:
        path = _header_only(tmp_path / "bad.gguf", tokenizer=extra["tokenizer.ggml.model"])
    else:
        path = _llama(tmp_path, **extra)
    _refused(path, message)


def _header_only(path, arch="llama", tokenizer="gpt2", tensors=()):
    """A GGUF with a few sizes, a one-token vocabulary and ``tensors`` (name, array): refused before its tensors."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(2)
    writer.add_embedding_length(32)
    writer.add_head_count(4)
    writer.add_tokenizer_model(tokenizer)
    writer.add_token_list(["a"])
    for name, array in tensors:
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def test_a_tensor_a_llama_has_not_or_lacks_is_refused(tmp_path):
    path = _header_only(tmp_path / "odd.gguf", tensors=[("blk.0.attn_q_norm.weight", np.ones(8, dtype=np.float32))])
    _refused(path, r"^odd.gguf holds blk.0.attn_q_norm.weight, which a llama decoder does not have here$")
    path = _header_only(tmp_path / "few.gguf", tensors=[("token_embd.weight", np.ones((4, 32), dtype=np.float32))])
    _refused(path, r"^few.gguf lacks output_norm.weight and 18 more tensors$")


def test_the_cli_takes_a_gguf_and_refuses_a_bad_one_in_one_line(qwen2_gguf, tmp_path, capsys):
    from attn_gui.cli import main

    path, _ = qwen2_gguf  # one file: an export renders every map
    assert main(["export", "--model", path, "--sentence", "the cat sat", "--layer", "2", "--out",
                 str(tmp_path / "out")]) in (0, None)
    assert (tmp_path / "out" / "weights.npy").is_file()
    progress = capsys.readouterr().err  # the first load (in this session) reports its conversion
    assert not progress or "qwen2-tiny.gguf (Qwen2 decoder, GGUF): building its tokenizer into the cache" in progress
    (tmp_path / "junk.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert main(["export", "--model", str(tmp_path / "junk.gguf"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "junk.gguf is not a readable GGUF file" in err and err.count("\n") == 1


def test_a_folder_of_gguf_files_names_them(tmp_path, qwen2_gguf):
    import shutil

    path, _ = qwen2_gguf
    shutil.copy(path, tmp_path / "model-Q4_K_M.gguf")
    _refused(str(tmp_path), "has no config.json; open one of its GGUF files: model-Q4_K_M.gguf$")


def test_a_file_larger_than_the_free_memory_is_refused_before_converting(tmp_path, qwen2_gguf, monkeypatch):
    import shutil

    from attn_gui.engine.readers import cache, stored

    path = str(shutil.copy(qwen2_gguf[0], tmp_path / "big.gguf"))
    monkeypatch.setattr(stored, "free_bytes", lambda: 1000)
    with pytest.raises(ConfigError, match=r"^big.gguf needs about \d+ MB of memory \(the \d+ MB file and \d+ MB to "
                                          r"dequantize a matrix\) and 0 MB is available \(free memory and page "
                                          r"cache\); nothing was loaded$"):
        decoder.load_model(path)
    assert not (cache.cache_root() / gguf_load.cache_name(Path(path))).exists()

"""GGUF files of the newer families: Gemma 2, Gemma 3, Phi-3, OLMo 2, GPT-NeoX (Pythia), and a Llama 3.1 with
its scaled RoPE, each written as llama.cpp's converter writes it (``gguf_writing.write_converted``: its
metadata, gguf-py's tensor names, its +1 on Gemma's norms, GPT-NeoX's regrouped query_key_value, Phi-3's fused
qkv and gate_up, Llama's permuted W_q, W_k and rope_freqs) from a tiny random transformers checkpoint (random
non-zero norms and biases). Through ``compute`` every layer's alpha equals transformers' eager attentions of
that checkpoint (1e-5), the residual stream its hidden states (1e-4), the next-token top 5 the softmax of its
logits; and the tokens equal those of the same model opened as a folder, whose tokenizer.json is
transformers' own conversion of the file's vocabulary.
"""

import re
import warnings

import gguf
import numpy as np
import pytest
import torch
import transformers

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.registry import source
from gguf_writing import byte_level_vocab, sentencepiece_vocab, write_converted, write_vocab  # (tests/)
from transformers_peer import (alphas_equal_transformers, cached_steps_equal_recomputing,  # (tests/)
                               residuals_equal_transformers)

SENTENCE = "the cat sat on a mat and the dog ran"
# A SentencePiece file (Phi-3's) puts "▁" before every stretch of text as llama.cpp does: before a leading space
# too, and after each special token (<s>, </s>, <unk>); Gemma's files (add_space_prefix false) nowhere. No
# whitespace after </s>: llama.cpp strips it for a model whose general.name says Phi-3 (its RSTRIP), not read here
TOKEN_SENTENCES = ["the cat sat on a mat", "the  dog\nran 12345 times", "Café 漢字 🙂!", "", " the cat", "  the dog",
                   "\nthe dog", "<s>the dog", "the cat</s>dog", "the <s> dog", "<unk> the cat", "漢 the"]
BYTE_LEVEL_SENTENCES = ["  the  dog", "the <|im_start|>dog"]
SIZES = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, max_position_embeddings=128,
             pad_token_id=0, bos_token_id=1, eos_token_id=2)
CASES = {  # a name: (general.architecture, transformers' model_type, vocabulary, layers, the family's own fields)
    # local layers of 3 keys, query_pre_attn_scalar = head_dim (no GGUF carries it: llama.cpp divides by
    # √key_length below the 27B), soft-caps that bite, rope_theta 10000 (Gemma2Model writes no freq_base)
    "gemma2": ("gemma2", "gemma2", "spm", 3, dict(num_key_value_heads=2, head_dim=8, sliding_window=3,
                                                  query_pre_attn_scalar=8, attn_logit_softcapping=2.0,
                                                  final_logit_softcapping=3.0)),
    # 6 layers: llama.cpp's pattern makes every 6th global; local RoPE at 10000 (llama.cpp's), global at 5000 scaled
    "gemma3": ("gemma3", "gemma3_text", "spm", 6, dict(
        num_key_value_heads=2, head_dim=8, sliding_window=3, query_pre_attn_scalar=8, final_logit_softcapping=3.0,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5000.0}})),
    "phi3": ("phi3", "phi3", "spm", 2, dict(num_key_value_heads=2, partial_rotary_factor=0.5, sliding_window=4)),
    # Phi-3's 128k models: LongRoPE, its short factors up to the original 64 positions
    "phi3-longrope": ("phi3", "phi3", "spm", 2, dict(num_key_value_heads=2, original_max_position_embeddings=64,
                                                     rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                                                      "short_factor": [1.0, 1.5, 3.0, 6.0],
                                                                      "long_factor": [1.0, 2.0, 4.0, 8.0],
                                                                      "original_max_position_embeddings": 64})),
    "olmo2": ("olmo2", "olmo2", "byte", 2, dict(num_key_value_heads=2)),
    # YaRN (a Qwen2.5 with its 128k scaling switched on): factor = max_position_embeddings / the original length
    "qwen2-yarn": ("qwen2", "qwen2", "byte", 2, dict(num_key_value_heads=2, rope_parameters={
        "rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32})),
    "gptneox": ("gptneox", "gpt_neox", "byte", 2, dict(rotary_pct=0.5)),  # 4 of d_k = 8 turned; parallel residual
    # Llama 3.1: wavelengths below 16, between 16 and 64 and above 64 positions (each kind of pair)
    "llama3": ("llama", "llama", "byte", 2, dict(num_key_value_heads=2, rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})),
}
GEMMA = ("gemma2", "gemma3")


def _tiny(case):
    """The tiny random checkpoint of ``case``: matrices of std 0.2 (a dropped scale shows), every norm gain and
    bias random (Gemma's gains around its 0, the others' around 1)."""
    arch, kind, vocab, layers, fields = CASES[case]
    size = len((sentencepiece_vocab if vocab == "spm" else byte_level_vocab)()[0])
    if arch in GEMMA:
        size += 4  # transformers' Gemma tokenizer adds <pad>, <eos>, <bos> and <mask> after the file's pieces
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, **SIZES, vocab_size=size, num_hidden_layers=layers,
                                               tie_word_embeddings=arch in GEMMA, **fields)  # Gemma ties its head
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if p.ndim > 1:
                p.normal_(0, 0.2)
            else:
                p.normal_(0, 0.5 if arch in GEMMA else 0.1).add_(1.0 if "norm" in name and arch not in GEMMA else 0.0)
    return hf


def _folder_tokenizer(folder, gguf_path, arch, vocab):
    """transformers' tokenizer of the file's vocabulary, saved as the folder's tokenizer.json. transformers reads
    no olmo2 or gptneox GGUF: their vocabulary is read from a file of it alone, written as gpt2 (byte-level)."""
    source_file = gguf_path
    if arch in ("olmo2", "gptneox"):
        source_file = folder / "vocab.gguf"
        writer = gguf.GGUFWriter(str(source_file), "gpt2")
        write_vocab(writer, vocab)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.AutoTokenizer.from_pretrained(str(source_file.parent), gguf_file=source_file.name)
    theirs.backend_tokenizer.save(str(folder / "tokenizer.json"))
    if source_file != gguf_path:
        source_file.unlink()
    return theirs


@pytest.fixture(scope="module", params=sorted(CASES))
def written(request, tmp_path_factory):
    arch, _, vocab, _, _ = CASES[request.param]
    hf = _tiny(request.param)
    folder = tmp_path_factory.mktemp(request.param)
    path = write_converted(folder / f"{arch}-tiny.gguf", hf, arch, vocab, f"Tiny {arch}")
    hf.save_pretrained(folder)
    theirs = _folder_tokenizer(folder, folder / f"{arch}-tiny.gguf", arch, vocab)
    return arch, path, str(folder), hf, theirs


def test_every_layer_equals_transformers(written):
    arch, path, _, hf, _ = written
    spec = model_spec(path)
    family = {"gemma3": "Gemma 3", "gemma2": "Gemma 2", "phi3": "Phi-3", "olmo2": "OLMo 2", "gptneox": "GPT-NeoX",
              "llama": "Llama", "qwen2": "Qwen2"}[arch]
    assert spec.label == f"{arch}-tiny.gguf ({family} decoder, GGUF)"
    layers = hf.config.num_hidden_layers
    out, cfg, _ = alphas_equal_transformers(path, hf, SENTENCE, layers=layers)
    residuals_equal_transformers(path, hf, SENTENCE)
    vocab = source(path).tokenize("the").vocab
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)
    got = compute(cfg).next_tokens
    assert [t for t, _ in got] == [vocab[i] for i in probs.indices.tolist()]
    assert [p for _, p in got] == pytest.approx(probs.values.tolist(), abs=1e-5)
    cached_steps_equal_recomputing(cfg)


def test_every_family_runs_with_bfloat16_matmuls_within_their_rounding(written):
    """dtype bfloat16 (``readers/packed.py``: the file's matrices multiplied in bfloat16): every layer's α within 5e-2
    of transformers' float32 and the logits within 5 % of their largest. The bound is wide: these matrices' std of 0.2
    (ten times a trained model's) sharpens every score, and bfloat16 rounds each product to 8 bits (measured: α
    2e-3 to 3.3e-2, Gemma 3's layer 5 the largest; the logits 3e-3 to 1.8e-2); a matrix read wrongly (a fused
    Q/K/V split, a norm, a bias) moves α by tenths."""
    _, path, _, hf, _ = written
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    run = source(path).forward(ids, "cpu", torch.bfloat16)
    for layer in range(hf.config.num_hidden_layers):
        assert torch.allclose(run.weights[layer], out.attentions[layer][0], atol=5e-2, rtol=0), layer
    assert (run.logits - out.logits[0, -1]).abs().max() <= 0.05 * out.logits[0, -1].abs().max()


def test_the_spec_reads_each_familys_metadata(written):
    from attn_gui.engine.model.whole import model_whole

    arch, path, folder, _, _ = written
    spec, theirs = model_spec(path), model_spec(folder)  # the folder's, from config.json, as transformers reads it
    model_whole(path)  # the window's check of the whole file, before it switches to it, passes
    for fact in ("layers", "heads", "kv_heads", "d_model", "d_k", "rope_dims", "window", "layer_windows", "softcap",
                 "rope_base", "layer_rope_bases", "qk_norm", "qk_norm_across", "has_bias"):
        assert getattr(spec, fact) == getattr(theirs, fact), fact
    if arch in ("llama", "phi3", "qwen2") and spec.rope_scaling:  # the stored frequencies: transformers' ones
        from attn_gui.engine.kernel.rope import inv_freq

        ours, factor = inv_freq(spec.d_k, spec.rope_base, spec.rope_scaling)
        want, their_factor = inv_freq(theirs.d_k, theirs.rope_base, theirs.rope_scaling)
        assert torch.allclose(ours, want, rtol=1e-6, atol=0) and factor == pytest.approx(their_factor, rel=1e-6)
        assert dict(spec.rope_scaling)["rope_type"] == dict(llama="freq_factors", phi3="longrope", qwen2="yarn")[arch]
        assert spec.max_tokens == theirs.max_tokens
    if arch == "gemma3":
        assert spec.layer_rope_scalings == tuple(() if w else (("factor", 4.0), ("max_position_embeddings", 128),
                                                               ("rope_type", "linear")) for w in spec.layer_windows)


def test_the_tokens_equal_the_folders(written):
    arch, path, folder, _, theirs = written
    for sentence in TOKEN_SENTENCES + (BYTE_LEVEL_SENTENCES if arch in ("olmo2", "gptneox", "llama", "qwen2")
                                       else []):
        ours = source(path).tokenize(sentence).token_ids
        assert ours == source(folder).tokenize(sentence).token_ids, sentence
        assert list(ours) == theirs(sentence)["input_ids"], sentence


def _rewritten(tmp_path, arch, **changes):
    """The tiny file of case ``arch`` with metadata ``changes`` (None: the key removed), written anew."""
    arch, case = CASES[arch][0], arch
    reader = gguf.GGUFReader(write_converted(tmp_path / "base.gguf", _tiny(case), arch, CASES[case][2], "T"))
    writer = gguf.GGUFWriter(str(tmp_path / "odd.gguf"), arch)
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture" or field.name in changes:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(field.name, field.contents())
        else:
            writer.add_key_value(field.name, field.contents(), kind)
    for key, value in changes.items():
        if isinstance(value, list):
            writer.add_array(key, value)
        elif value is not None:
            writer.add_key_value(key, value, gguf.GGUFValueType.BOOL if isinstance(value, bool) else
                                 gguf.GGUFValueType.UINT32 if isinstance(value, int) else
                                 gguf.GGUFValueType.STRING if isinstance(value, str) else gguf.GGUFValueType.FLOAT32)
    for t in reader.tensors:
        writer.add_tensor(t.name, np.array(t.data), raw_shape=None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(tmp_path / "odd.gguf")


@pytest.mark.parametrize("arch, changes, message", [
    ("gemma2", {"gemma2.rope.scaling.type": "longrope"}, "uses RoPE scaling 'longrope', which attn-gui does not "
                                                         "apply to a GGUF yet"),
    ("qwen2-yarn", {"qwen2.rope.scaling.yarn_log_multiplier": 0.1}, "its metadata qwen2.rope.scaling.yarn_log_"),
    ("gptneox", {"tokenizer.ggml.add_eos_token": True, "tokenizer.ggml.eos_token_id": None},
     r"has tokenizer.ggml.add_eos_token = true and no end token to add \(tokenizer.ggml.eos_token_id = None, of "
     r"\d+ tokens\)$"),
    ("phi3", {"tokenizer.ggml.add_eos_token": True, "tokenizer.ggml.eos_token_id": 100000},
     r"no end token to add \(tokenizer.ggml.eos_token_id = 100000, of \d+ tokens\)$"),
    ("phi3", {"tokenizer.ggml.eos_token_id": [2, 32000]}, r"tokenizer.ggml.eos_token_id is an array of 2, not one "
                                                           "token id$"),
    ("phi3", {"tokenizer.ggml.bos_token_id": 4_000_000_000, "tokenizer.ggml.add_bos_token": True},
     r"has tokenizer.ggml.add_bos_token = true and no begin token to add \(tokenizer.ggml.bos_token_id = "
     r"4000000000, of \d+ tokens\)$"),
    ("phi3", {"tokenizer.ggml.bos_token_id": 4_000_000_000, "tokenizer.ggml.add_bos_token": False}, None),  # unused
    ("olmo2", {"olmo2.expert_count": 0}, None),  # no experts: read, as some converters write it
    ("qwen2-yarn", {"qwen2.attention.sliding_window": 4}, None),  # run as llama.cpp runs it (test_gguf_files)
    ("olmo2", {"olmo2.expert_count": 8}, "its metadata olmo2.expert_count = 8 is not read"),
    ("olmo2", {"olmo2.attention.sliding_window": 4}, r"slides a window of 4 keys \(OLMo 3\), which attn-gui does "
                                                     "not run for an olmo2 GGUF yet"),
    ("phi3", {"phi3.rope.scaling.attn_factor": 1.2}, r"rope.scaling.attn_factor = 1.2\d* scales RoPE only with "
                                                     "Phi-3's LongRoPE factors, which the file does not hold$"),
    ("olmo2", {"olmo2.attention.scale": 0.5}, r"its metadata olmo2.attention.scale = 0.5 is not read by attn-gui's "
                                              r"OLMo 2 path \(it could change the numbers\)$"),
    ("gptneox", {"gptneox.rope.dimension_count": 3}, r"rotates 3 of each head's 8 dimensions \(partial RoPE\), "
                                                     "which attn-gui's GPT-NeoX path does not apply$"),
])
def test_what_is_not_run_is_refused_in_one_line(tmp_path, arch, changes, message):
    path = _rewritten(tmp_path, arch, **changes)
    if message is None:
        assert model_spec(path).layers == CASES[arch][3]
        return
    with pytest.raises(ConfigError, match=message) as info:
        plan(AttentionConfig(model=path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("case, end", [("phi3", "</s>"), ("llama3", "<|im_end|>")])
def test_an_end_token_is_put_after_the_text_where_the_file_says_add_eos_token(tmp_path, case, end):
    """tokenizer.ggml.add_eos_token = true: the tokens end with the file's end token (shown like any token), as
    llama.cpp's tokenize appends it and as transformers' tokenizer of the file gives them (it reads the flag into
    add_eos_token: LlamaTokenizer's post-processor "<s> $A </s>"); a folder whose tokenizer.json is that tokenizer
    saved gives the same ids. Every layer equals transformers on them, and the next tokens its logits after the
    end token. Generation is refused in one line: a continuation would follow the end of the text (llama.cpp's
    llama-cli asserts add_eos_token false before it generates)."""
    from attn_gui.engine.run.decoding import Decoder, generate

    layers = CASES[case][3]
    path = _rewritten(tmp_path, case, **{"tokenizer.ggml.add_eos_token": True})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="odd.gguf")
    hf = _tiny(case)  # the checkpoint _rewritten wrote (seed 0)
    folder = tmp_path / "folder"
    hf.save_pretrained(folder)
    theirs.backend_tokenizer.save(str(folder / "tokenizer.json"))
    eos = theirs.convert_tokens_to_ids(end)
    for sentence in ["the cat sat", " the dog", "", "the cat\n", "漢"]:
        ids = theirs(sentence)["input_ids"]
        assert ids[-1] == eos, sentence  # the peer adds it
        assert list(source(path).tokenize(sentence).token_ids) == ids, sentence
        assert list(source(str(folder)).tokenize(sentence).token_ids) == ids, sentence
    assert source(path).tokenize("the cat").tokens[-1] == end
    out, cfg, _ = alphas_equal_transformers(path, hf, SENTENCE, layers=layers)
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)
    assert [p for _, p in compute(cfg).next_tokens] == pytest.approx(probs.values.tolist(), abs=1e-5)
    for start in (lambda: Decoder(cfg), lambda: generate(cfg, 1)):
        with pytest.raises(ConfigError, match=rf"ends every text with {re.escape(end)} \(add_eos_token\), so a "
                                              "continuation would follow the end of the text") as info:
            start()
        assert "\n" not in str(info.value)


def test_a_llama3_file_is_wrong_without_its_rope_freqs(tmp_path, monkeypatch):
    """The control: the scaled frequencies matter at these positions (plain RoPE's alphas are off)."""
    from attn_gui.engine.readers.gguf import spec as gguf_spec

    hf = _tiny("llama3")
    path = write_converted(tmp_path / "plain.gguf", hf, "llama", "byte", "T")
    monkeypatch.setattr(gguf_spec, "rope_of", lambda *args: ())
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        want = hf(ids[None], output_attentions=True).attentions[1][0]
    got = compute(AttentionConfig(sentence=SENTENCE, model=path, layer=1)).weights
    assert (got - want).abs().max() > 1e-3


@pytest.mark.parametrize("kind, config", [  # the published config.json of each (Hugging Face's google/ repos)
    ("gemma2", dict(num_hidden_layers=46, hidden_size=4608, num_attention_heads=32, head_dim=128,
                    query_pre_attn_scalar=144)),  # gemma-2-27b
    ("gemma2", dict(num_hidden_layers=42, hidden_size=3584, num_attention_heads=16, head_dim=256,
                    query_pre_attn_scalar=256)),  # gemma-2-9b
    ("gemma3_text", dict(num_hidden_layers=62, hidden_size=5376, num_attention_heads=32, head_dim=128,
                         query_pre_attn_scalar=168)),  # gemma-3-27b
    ("gemma3_text", dict(num_hidden_layers=48, hidden_size=3840, num_attention_heads=16, head_dim=256,
                         query_pre_attn_scalar=256)),  # gemma-3-12b
])
def test_gemmas_query_pre_attn_scalar_as_llama_cpp_infers_it(kind, config):
    """No GGUF carries query_pre_attn_scalar: llama.cpp's rule gives each published model's own."""
    from attn_gui.engine.readers.gguf import spec as gguf_spec
    from attn_gui.engine.specs.families import FAMILIES

    d_head = config["hidden_size"] // config["num_attention_heads"]
    got = gguf_spec.score_scalar(FAMILIES[kind], config["num_hidden_layers"], d_head, config["head_dim"])
    assert got == config["query_pre_attn_scalar"]


def test_every_tensor_a_family_reads_is_one_llama_cpp_names_for_its_architecture():
    """The family table's tensor names (Llama's and each family's gguf_names) against gguf-py's own list of each
    architecture's tensors (gguf.constants.MODEL_TENSORS, TENSOR_NAMES): none is read that llama.cpp never writes."""
    from gguf.constants import MODEL_ARCH_NAMES, MODEL_TENSORS, TENSOR_NAMES

    from attn_gui.engine.readers.gguf import tensors as gguf_tensors
    from attn_gui.engine.specs.families import FAMILIES

    arches = {name: arch for arch, name in MODEL_ARCH_NAMES.items()}
    checked = set()
    for family in FAMILIES.values():
        if not family.gguf:
            continue
        names = {TENSOR_NAMES[t].removeprefix("blk.{bid}.") for t in MODEL_TENSORS[arches[family.gguf]]}
        assert set(gguf_tensors.leaves(family)) <= names, family.label
        assert {"token_embd", "output_norm"} <= names  # output: where untied (Gemma 2 always ties)
        checked.add(family.gguf)
    assert checked == {"llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "olmo2", "gptneox"}

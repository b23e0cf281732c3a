"""Every config.json field that changes the numbers is honoured or refused in one line naming it,
and RoPE's scalings (llama3, linear, dynamic, yarn, longrope) equal transformers'.

The fields each family reads are listed here (``families.FAMILIES``); every field of transformers'
own config of the family is read, inert (``families.INERT``) or fixed. The formerly silent cases
are checked against transformers on tiny random checkpoints (random biases and norm gains): a
gated MLP with another activation, Llama's ``mlp_bias``, GPT-2's two score scalings, and the
``<s>`` a tokenizer.json adds (the same ids from the folder and from the model's GGUF).
"""

import json
import os

import pytest
import torch
import transformers
from gguf_writing import sentencepiece_vocab, tiny, write_gguf  # tests/
from transformers_peer import alphas_equal_transformers  # tests/

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, formula
from attn_gui.engine.model.registry import source
from attn_gui.engine.specs.families import DECODER_READS, FAMILIES, INERT

WORDS = ["<unk>", "<s>", "</s>", "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"

READS = {  # what each family's path honours, beyond INERT
    "llama": set(DECODER_READS), "mistral": set(DECODER_READS), "qwen2": set(DECODER_READS),
    "qwen3": set(DECODER_READS), "olmo2": set(DECODER_READS), "phi3": set(DECODER_READS),
    "gemma2": {*DECODER_READS, "hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping",
               "final_logit_softcapping"},
    "gemma3_text": {*DECODER_READS, "hidden_activation", "query_pre_attn_scalar", "attn_logit_softcapping",
                    "final_logit_softcapping", "rope_local_base_freq", "sliding_window_pattern",
                    "_sliding_window_pattern"},
    "gpt2": {"n_embd", "n_head", "n_layer", "n_positions", "layer_norm_epsilon", "activation_function",
             "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "eos_token_id"},
    "gpt_neox": {"hidden_size", "num_attention_heads", "num_hidden_layers", "max_position_embeddings",
                 "layer_norm_eps", "hidden_act", "attention_bias", "rope_theta", "rotary_emb_base", "rope_parameters",
                 "rope_scaling", "rotary_pct", "partial_rotary_factor", "use_parallel_residual", "eos_token_id",
                 "is_decoder"},  # GPTNeoXConfig's; its modeling file never reads it: causal either way
    "bert": {"hidden_size", "num_attention_heads", "num_hidden_layers", "max_position_embeddings", "layer_norm_eps",
             "hidden_act", "eos_token_id"},
    "roberta": {"hidden_size", "num_attention_heads", "num_hidden_layers", "max_position_embeddings",
                "layer_norm_eps", "hidden_act", "eos_token_id", "pad_token_id"},
    "distilbert": {"dim", "n_heads", "n_layers", "max_position_embeddings", "activation", "eos_token_id"},
}
assert DECODER_READS == ("hidden_size", "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "head_dim",
                         "max_position_embeddings", "rms_norm_eps", "hidden_act", "attention_bias", "mlp_bias",
                         "rope_theta", "rope_parameters", "rope_scaling", "original_max_position_embeddings",
                         "partial_rotary_factor", "eos_token_id",
                         "sliding_window", "use_sliding_window", "max_window_layers", "layer_types")


def test_every_family_is_listed():  # DeBERTa-v2's and ModernBERT's: encoder_config.FIELDS, test_encoder_families
    from attn_gui.engine.specs.encoder_config import FIELDS as DECLARED

    assert set(READS) == set(FAMILIES) - set(DECLARED)


@pytest.mark.parametrize("kind", sorted(READS))
def test_every_field_of_transformers_config_is_read_inert_or_fixed(kind):
    family = FAMILIES[kind]
    assert set(family.reads) == READS[kind]
    fields = set(transformers.AutoConfig.for_model(kind).to_dict())
    assert fields - READS[kind] - INERT - dict(family.fixed).keys() == set()


def _tokenizer(folder, bos: bool = False):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos:  # as Llama-2's, TinyLlama's and Mistral's tokenizer.json: <s> before the text
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", 1)])
    tok.save(str(folder / "tokenizer.json"))


def _folder(tmp_path, kind, bos=False, **changes):
    """A tiny random ``kind`` decoder saved with ``changes`` to its config, every 1-D weight random."""
    torch.manual_seed(0)
    sizes = dict(n_embd=32, n_head=4, n_layer=3, n_positions=64) if kind == "gpt2" else dict(
        hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64)
    config = transformers.AutoConfig.for_model(kind, vocab_size=len(WORDS), bos_token_id=1, eos_token_id=2,
                                               tie_word_embeddings=False, **sizes, **changes)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for w in hf.state_dict().values():
            if w.ndim == 1:
                w.normal_()  # random biases and gains, not zeros and ones: a dropped one shows
            else:
                w.normal_(0, 0.2)  # not transformers' std 0.02, whose near-zero scores hide a scaling
    path = tmp_path / kind
    hf.save_pretrained(path)
    _tokenizer(path, bos)
    return str(path), hf


def _next_tokens_equal(cfg, out):
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)
    got = compute(cfg).next_tokens
    assert [t for t, _ in got] == [WORDS[i] for i in probs.indices.tolist()]
    assert [p for _, p in got] == pytest.approx(probs.values.tolist(), abs=1e-5)


@pytest.mark.parametrize("kind, act", [("llama", "gelu"), ("qwen2", "gelu_pytorch_tanh"), ("mistral", "relu"),
                                       ("llama", "gelu_new"), ("qwen3", "silu")])
def test_a_gated_mlp_with_another_activation_equals_transformers(tmp_path, kind, act):
    path, hf = _folder(tmp_path, kind, hidden_act=act)
    out, cfg, _ = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    residual = source(path).forward(torch.tensor(source(path).tokenize(SENTENCE).token_ids), "cpu",
                                    torch.float32).residual
    with torch.no_grad():
        theirs = hf(torch.tensor(source(path).tokenize(SENTENCE).token_ids)[None], output_hidden_states=True)
    for ours, hidden in zip(residual, theirs.hidden_states, strict=True):
        assert torch.allclose(ours, hidden[0], atol=1e-4, rtol=1e-4)
    _next_tokens_equal(cfg, out)


def test_another_activation_is_refused_naming_the_field(tmp_path):
    path, _ = _folder(tmp_path, "llama", hidden_act="quick_gelu")
    with pytest.raises(ConfigError, match=r"^llama: hidden_act 'quick_gelu' is not supported; supported: gelu, "):
        plan(AttentionConfig(model=path))


def test_llama_mlp_and_attention_biases_equal_transformers(tmp_path):
    path, hf = _folder(tmp_path, "llama", mlp_bias=True, attention_bias=True)
    assert hf.model.layers[0].mlp.up_proj.bias is not None
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    assert results[0].b_q is not None and results[0].b_o is not None
    _next_tokens_equal(cfg, out)


@pytest.mark.parametrize("changes, shown", [
    (dict(scale_attn_by_inverse_layer_idx=True), "ω′ = ω / √d_k / 3"),  # layer 3 of 3: divided by 3
    (dict(scale_attn_weights=False), "ω′ = ω + mask"),
    (dict(scale_attn_weights=False, scale_attn_by_inverse_layer_idx=True), "ω′ = ω / 3 + mask"),
])
def test_gpt2_score_scalings_equal_transformers(tmp_path, changes, shown):
    path, hf = _folder(tmp_path, "gpt2", activation_function="gelu_new", **changes)
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    last = cfg.replace(layer=2)
    assert formula("scaled", plan(last)) == (shown if "mask" in shown else shown + " + mask")
    _next_tokens_equal(cfg, out)


@pytest.mark.parametrize("field, value, message", [
    ("quantization_config", {"quant_method": "bitsandbytes"}, "config.json field quantization_config = .* is read by "
                                                              "transformers' loading"),
    ("some_new_scale", 2.0, None),  # transformers never reads it: it changes none of its numbers, nor attn-gui's
])
def test_a_field_transformers_reads_and_attn_gui_does_not_is_refused_naming_it(tmp_path, field, value, message):
    folder = tmp_path / "m"
    folder.mkdir()
    cfg = dict(model_type="llama", hidden_size=32, num_attention_heads=4, num_hidden_layers=2, **{field: value})
    (folder / "config.json").write_text(json.dumps(cfg))
    _tokenizer(folder)
    if message is None:
        assert plan(AttentionConfig(model=str(folder))).dims.heads == 4
        return
    with pytest.raises(ConfigError, match="^m: " + message):
        plan(AttentionConfig(model=str(folder)))
    cfg[field] = None  # a field that is off changes nothing
    (folder / "config.json").write_text(json.dumps(cfg))
    from attn_gui.engine.readers.hf import spec as hf

    hf.spec_for.cache_clear()
    assert AttentionConfig(model=str(folder)).dims.heads == 4


def test_a_fixed_field_at_another_value_is_refused(tmp_path):
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(dict(model_type="gpt2", add_cross_attention=True)))
    _tokenizer(folder)
    with pytest.raises(ConfigError, match=r"^g: config.json has add_cross_attention = true; attn-gui runs GPT-2 only "
                                          r"with add_cross_attention = false$"):
        plan(AttentionConfig(model=str(folder)))


def test_a_tokenizer_json_that_adds_bos_gives_its_ids(tmp_path):
    path, hf = _folder(tmp_path, "llama", bos=True)
    theirs = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"))
    ids = theirs(SENTENCE)["input_ids"]
    assert ids[0] == 1 and list(source(path).tokenize(SENTENCE).token_ids) == ids
    out, cfg, _ = alphas_equal_transformers(path, hf, SENTENCE, layers=3)  # tokens given as transformers gets them
    _next_tokens_equal(cfg, out)


def test_a_gguf_and_its_folder_give_the_same_ids(tmp_path):
    # a SentencePiece GGUF (its <s> added as llama.cpp adds it); the folder holds the same model with the
    # tokenizer.json transformers makes of that file, whose post-processor adds <s>
    hf = tiny("llama", len(sentencepiece_vocab()[0]))
    gguf_path = write_gguf(tmp_path / "tiny.gguf", hf, "llama", "spm", "Tiny Llama")
    folder = tmp_path / "folder"
    hf.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="tiny.gguf").save_pretrained(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file="tiny.gguf")
    for sentence in ("the cat sat on a mat", "dog ran and the cat"):
        ids = theirs(sentence)["input_ids"]
        assert ids[0] == 1
        assert list(source(gguf_path).tokenize(sentence).token_ids) == ids
        assert list(source(str(folder)).tokenize(sentence).token_ids) == ids


SCALINGS = {  # head_dim 8, base 500: wavelengths 6.3 to 664 positions, across every band of each scaling
    "llama3": dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16),
    "linear": dict(factor=4.0),
    "dynamic": dict(factor=2.0),  # changes nothing up to max_position_embeddings, the most tokens read here
    "yarn": dict(factor=4.0, original_max_position_embeddings=16),
    "longrope": dict(short_factor=[1.0, 1.5, 2.0, 3.0], long_factor=[2.0, 3.0, 4.0, 6.0],
                     original_max_position_embeddings=16),  # factor 64 / 16: cos and sin × √1.5
}


@pytest.mark.parametrize("kind", sorted(SCALINGS))
def test_a_scaled_rope_equals_transformers(tmp_path, kind):
    path, hf = _folder(tmp_path, "llama", rope_parameters={"rope_type": kind, "rope_theta": 500.0, **SCALINGS[kind]})
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    T = len(SENTENCE.split())
    rotary = hf.model.rotary_emb
    angles = torch.arange(T, dtype=torch.float32)[:, None] * rotary.inv_freq  # (T, d_k/2): transformers' θ
    for layer, r in enumerate(results):
        assert torch.allclose(r.rope_angles, angles, atol=1e-6, rtol=1e-6)
        x = r.x[None]
        cos, sin = rotary(x, torch.arange(T)[None])  # with the attention factor (YaRN's, LongRoPE's)
        attn = hf.model.layers[layer].self_attn
        with torch.no_grad():
            q = attn.q_proj(x).view(1, T, -1, 8).transpose(1, 2)
            k = attn.k_proj(x).view(1, T, -1, 8).transpose(1, 2)
            q, k = transformers.models.llama.modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
        assert torch.allclose(r.q, q[0], atol=1e-4, rtol=1e-4) and torch.allclose(r.k, k[0], atol=1e-4, rtol=1e-4)
    assert f"{kind} scaling" in formula("q", plan(cfg)) and f"with {kind} scaling" in formula("rope_angles", plan(cfg))
    plain = rotary.compute_default_rope_parameters(hf.config)[0]  # transformers' unscaled inv_freq
    assert torch.allclose(results[0].rope_angles_plain, torch.arange(T, dtype=torch.float32)[:, None] * plain,
                          atol=1e-5, rtol=1e-6)
    from attn_gui.present.maps import map_keys

    names = [name for name, _ in map_keys(results[0])]
    assert names.index("rope_angles") + 1 == names.index("rope_angles_plain")  # side by side
    if kind in ("yarn", "longrope"):
        assert "cos and sin ×" in formula("q", plan(cfg)) and rotary.attention_scaling != 1.0
    _next_tokens_equal(cfg, out)
    from attn_gui.engine.run.decoding import Decoder

    decoder = Decoder(cfg)  # cached decoding equals a full recompute
    step = decoder.step()
    assert torch.allclose(step.weights, decoder.recompute().weights[:, :, -1], atol=1e-5, rtol=0)


@pytest.mark.parametrize("params, message", [
    (dict(rope_type="mrope", factor=2.0), "uses RoPE scaling 'mrope', which attn-gui does not apply"),
    (dict(rope_type="llama3", factor=8.0), "its llama3 RoPE scaling lacks low_freq_factor"),
    (dict(rope_type="linear", factor=2.0, stretch=3), "its linear RoPE scaling has stretch, which attn-gui does not"),
    (dict(rope_type="linear", factor=2.0, partial_rotary_factor=0.5), r"rotates part of each head "),
])
def test_another_rope_scaling_is_refused_naming_it(tmp_path, params, message):
    folder = tmp_path / "m"
    folder.mkdir()
    cfg = dict(model_type="llama", hidden_size=32, num_attention_heads=4, num_hidden_layers=2, rope_scaling=params)
    (folder / "config.json").write_text(json.dumps(cfg))
    _tokenizer(folder)
    with pytest.raises(ConfigError, match="^m(:)? " + message):
        plan(AttentionConfig(model=str(folder)))


def test_a_partial_rotary_share_where_the_family_turns_every_dimension_is_refused(tmp_path):
    """Llama reads partial_rotary_factor (it is in the decoder's list of fields) but turns every dimension of
    a head: a share other than 1 is refused in one line naming the field, never ignored."""
    import json

    from attn_gui.engine import ConfigError, model_spec
    from attn_gui.engine.readers.hf import spec as hf

    folder = tmp_path / "half-rotary"
    folder.mkdir()
    cfg = {"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2,
           "intermediate_size": 48, "vocab_size": 6, "max_position_embeddings": 64, "partial_rotary_factor": 0.5}
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "tokenizer.json").write_text("{}")
    hf.spec_for.cache_clear()
    with pytest.raises(ConfigError, match=r"partial_rotary_factor = 0.5; attn-gui's Llama path turns every dimension"):
        model_spec(str(folder))

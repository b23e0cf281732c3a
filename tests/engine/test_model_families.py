"""Encoders (BERT, RoBERTa, DistilBERT) and GPT-2 as folders: tiny random models made by transformers
(save_pretrained, plus a WordLevel tokenizer.json from ``tokenizers`` with the family's special
tokens) give through ``compute`` every layer's alpha of transformers' eager attention (1e-5), its
hidden states or X, Q, K, V and the block output of forward hooks (1e-4), and for GPT-2 the
next-token top 5 and cached decoding; the MiniLM package folder opened as a path is ``minilm-l6``.
"""

import json

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.run.decoding import Decoder
from attn_gui.engine.model.registry import is_available

import transformers
from transformers_peer import top5_equals_transformers  # (tests/)

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"] + [f"w{i}" for i in range(40)]
SENTENCE = "the cat sat on a mat and the dog ran"
# special tokens first, in each family's order; pad_token_id is where its padding sits
ENCODERS = {
    "bert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]"], "[CLS]", "[SEP]", dict(pad_token_id=0, hidden_size=32,
             num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)),
    "roberta": (["<s>", "<pad>", "</s>", "<unk>"], "<s>", "</s>", dict(pad_token_id=1, bos_token_id=0,
                eos_token_id=2, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                hidden_act="gelu_new")),
    "distilbert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]"], "[CLS]", "[SEP]", dict(pad_token_id=0, dim=32,
                   n_layers=2, n_heads=4, hidden_dim=48)),
}


def _tokenizer(folder, specials, first=None, last=None):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    vocab = specials + WORDS
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token=specials[1]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    if first is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{first} $A {last}", special_tokens=[(first, vocab.index(first)), (last, vocab.index(last))])
    tok.save(str(folder / "tokenizer.json"))
    return vocab


@pytest.fixture(scope="module", params=sorted(ENCODERS))
def encoder(request, tmp_path_factory):
    kind = request.param
    specials, first, last, sizes = ENCODERS[kind]
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, vocab_size=len(specials) + len(WORDS),
                                               max_position_embeddings=64, **sizes)
    hf = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    path = tmp_path_factory.mktemp(kind)
    hf.save_pretrained(path)
    vocab = _tokenizer(path, specials, first, last)
    return kind, str(path), hf, vocab


def _output_projection(hf, kind, layer):
    if kind == "distilbert":
        return hf.transformer.layer[layer].attention.out_lin
    return hf.encoder.layer[layer].attention.output.dense


def test_every_encoder_layer_equals_transformers(encoder):
    kind, path, hf, vocab = encoder
    spec = model_spec(path)
    assert (spec.layers, spec.heads, spec.d_model, spec.d_k, spec.causal) == (2, 4, 32, 8, False)
    assert spec.module == "encoder" and set(spec.special_tokens) == set(ENCODERS[kind][1:3])  # the ones it adds
    toks = source(path).tokenize(SENTENCE)
    specials, first, last, _ = ENCODERS[kind]
    assert toks.tokens == (first, *SENTENCE.split(), last)
    ids = torch.tensor(toks.token_ids)
    seen = {}
    hooks = [_output_projection(hf, kind, i).register_forward_hook(
        lambda m, args, out, i=i: seen.__setitem__(i, out[0])) for i in range(2)]
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True, output_hidden_states=True)
    for h in hooks:
        h.remove()
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layout="column")
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), (kind, layer)
        assert torch.allclose(r.layer_weights[1 - layer], out.attentions[1 - layer][0], atol=1e-5, rtol=0)
        assert torch.allclose(r.x, out.hidden_states[layer][0], atol=1e-4, rtol=1e-4), (kind, layer)
        assert torch.allclose(r.output, seen[layer], atol=1e-4, rtol=1e-4), (kind, layer)
        assert r.next_tokens is None  # an encoder predicts no next token
    hidden, _ = source(path).layer_inputs(ids, "cpu", torch.float32)
    assert torch.allclose(hidden[-1], out.last_hidden_state[0], atol=1e-4, rtol=1e-4)


def test_encoder_folders_refuse_decoder_only_options(encoder):
    _, path, _, _ = encoder
    with pytest.raises(ConfigError, match="has layers 1 to 2"):
        plan(AttentionConfig(model=path, layer=2))
    with pytest.raises(ConfigError, match="decoder"):
        plan(AttentionConfig(model=path, ablate=((0, 0),)))


@pytest.mark.skipif(not is_available("minilm-l6"), reason="the pretrained extra is not installed")
def test_the_minilm_package_folder_as_a_path_is_minilm():
    from attn_gui.engine.model.encoder.minilm import model_dir

    folder = str(model_dir(model_spec("minilm-l6")))
    spec = model_spec(folder)
    assert (spec.layers, spec.heads, spec.d_model, spec.max_tokens) == (6, 12, 384, 512)
    sentence = "The animal didn't cross the street because it was too tired"
    a = compute(AttentionConfig(sentence=sentence, model=folder, layer=3))
    b = compute(AttentionConfig(sentence=sentence, model="minilm-l6", layer=3))
    assert a.tokens == b.tokens and a.tokens[0] == "[CLS]"
    assert torch.equal(a.weights, b.weights) and torch.equal(a.x, b.x) and torch.equal(a.output, b.output)


GPT2_VOCAB = ["<|endoftext|>", "<unk>"] + WORDS


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(GPT2_VOCAB), n_positions=64, n_embd=32, n_layer=2, n_head=4,
                                     bos_token_id=0, eos_token_id=0)
    hf = transformers.GPT2LMHeadModel(config).eval()
    hf.set_attn_implementation("eager")
    with torch.no_grad():  # random, not zero, biases and LayerNorms: they must be read
        for name, p in hf.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                p.normal_(0, 0.1).add_(1.0 if name.endswith("weight") else 0.0)
    path = tmp_path_factory.mktemp("gpt2")
    hf.save_pretrained(path)
    _tokenizer(path, GPT2_VOCAB[:2])
    return str(path), hf


def test_every_gpt2_layer_equals_transformers(gpt2):
    path, hf = gpt2
    spec = model_spec(path)
    assert (spec.causal, spec.rope_base, spec.kv_heads, spec.has_bias) == (True, None, 4, True)
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    seen = {}
    hooks = [block.attn.register_forward_hook(
        lambda m, args, kwargs, out, i=i: seen.__setitem__(i, (args[0][0] if args else kwargs["hidden_states"][0],
                                                                out[0][0])), with_kwargs=True)
        for i, block in enumerate(hf.transformer.h)]
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    for h in hooks:
        h.remove()
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layout="column")
    T, d = len(ids), 32
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        x, block = seen[layer]
        with torch.no_grad():
            q, k, v = hf.transformer.h[layer].attn.c_attn(x).split(d, dim=-1)
        per_head = lambda t: t.view(T, 4, 8).transpose(0, 1)  # noqa: E731
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
        assert torch.allclose(r.x, x, atol=1e-4, rtol=1e-4)
        for got, want in ((r.q, q), (r.k, k), (r.v, v)):
            assert torch.allclose(got, per_head(want), atol=1e-4, rtol=1e-4)
        assert torch.allclose(r.output, block, atol=1e-4, rtol=1e-4)
    top5_equals_transformers(cfg, out.logits[0, -1], GPT2_VOCAB)


def test_gpt2_cached_decoding_counts_positions_on(gpt2):
    path, hf = gpt2
    decoder = Decoder(AttentionConfig(sentence=SENTENCE, model=path))
    for _ in range(3):  # each step adds the learned position of its own index
        step = decoder.step()
        full = decoder.recompute()
        assert torch.allclose(step.weights, full.weights[:, :, -1], atol=1e-5, rtol=0)
        assert torch.allclose(decoder.logits, full.logits, atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        want = hf(torch.tensor(decoder.token_ids)[None]).logits[0, -1]
    assert torch.allclose(decoder.logits, want, atol=1e-4, rtol=1e-4)


def test_unknown_activation_and_family_are_named(tmp_path, gpt2):
    import shutil

    path, _ = gpt2
    odd = tmp_path / "odd"
    shutil.copytree(path, odd)
    cfg = json.loads((odd / "config.json").read_text())
    cfg["activation_function"] = "quick_gelu"
    (odd / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="^odd: activation_function 'quick_gelu' is not supported; supported: gelu, "
                                          "gelu_new"):
        plan(AttentionConfig(model=str(odd)))
    cfg["model_type"] = "t5"
    (odd / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="^odd is a 't5' model; supported model_types: llama, mistral, qwen2, "
                                          "qwen3, olmo2, phi3, gemma2, gemma3_text, gpt2, gpt_neox, bert, roberta, "
                                          "distilbert, deberta-v2, modernbert; others open through transformers, "
                                          "not encoder-decoders \\(is_encoder_decoder\\)$"):
        plan(AttentionConfig(model=str(odd)))

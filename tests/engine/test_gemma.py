"""Gemma 2 and Gemma 3 as declared differences on the one decoder, against transformers' Gemma2ForCausalLM
and Gemma3ForCausalLM.

A tiny random checkpoint (random norm gains, weights of std 0.2 so every difference shows) with
local and global layers alternating (a window shorter than the sentence), query_pre_attn_scalar
unlike head_dim, attention-logit and final-logit soft-caps that bite, sandwich norms, the √d
embedding scale and GeGLU: every layer's α, Q and K after RoPE, the soft-capped scores, the block
output and the residual stream, the next-token top 5, and cached decoding. Gemma 3 adds q/k norms
(gain 1 + g) and a RoPE per layer type (a local base, a linearly scaled global one).
"""


import pytest
import torch
import transformers
from transformers_peer import alphas_equal_transformers, residuals_equal_transformers  # tests/

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, compute, formula, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.run.decoding import Decoder

WORDS = ["<pad>", "<eos>", "<bos>", "<unk>", "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"
WINDOW, CAP, FINAL_CAP, SCALAR = 3, 2.0, 3.0, 12


def _tiny(tmp_path_factory, kind, seed, **changes):
    """A tiny random ``kind`` model saved with a word-level tokenizer.json: 3 layers, 4 heads over 2 K/V heads of
    8, local layers of window 3, scores divided by √12, final logits capped at 3; random gains around Gemma's zero,
    weights of std 0.2 (not 0.02, whose near-zero scores hide a scaling)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(seed)
    config = transformers.AutoConfig.for_model(
        kind, vocab_size=len(WORDS), hidden_size=32, intermediate_size=48, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=64, sliding_window=WINDOW,
        query_pre_attn_scalar=SCALAR, final_logit_softcapping=FINAL_CAP, pad_token_id=0, eos_token_id=1,
        bos_token_id=2, **changes)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for w in hf.state_dict().values():
            w.normal_(0, 1.0 if w.ndim == 1 else 0.2)
    path = tmp_path_factory.mktemp(kind)
    hf.save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path / "tokenizer.json"))
    return str(path), hf


@pytest.fixture(scope="module")
def gemma2(tmp_path_factory):
    return _tiny(tmp_path_factory, "gemma2", 0, attn_logit_softcapping=CAP,
                 rope_parameters={"rope_type": "default", "rope_theta": 500.0})


def test_every_step_equals_transformers(gemma2):
    path, hf = gemma2
    spec = model_spec(path)
    assert spec.layer_windows == (WINDOW, None, WINDOW) and spec.softcap == CAP and spec.score_scalar == SCALAR
    seen = {}
    hooks = [layer.self_attn.register_forward_hook(
        lambda m, args, kwargs, out, i=i: seen.__setitem__(i, out[0][0]), with_kwargs=True)
        for i, layer in enumerate(hf.model.layers)]
    try:
        out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    finally:
        for h in hooks:
            h.remove()
    T = len(SENTENCE.split())
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    assert ids.tolist() == [WORDS.index(w) for w in SENTENCE.split()]
    with torch.no_grad():
        theirs = hf(ids[None], output_hidden_states=True)
    residual = source(path).forward(ids, "cpu", torch.float32).residual
    for ours, hidden in zip(residual, theirs.hidden_states, strict=True):  # sandwich norms, √d, GeGLU
        assert torch.allclose(ours, hidden[0], atol=1e-4, rtol=1e-4)
    for layer, r in enumerate(results):
        attn = hf.model.layers[layer].self_attn
        x = r.x[None]
        cos, sin = hf.model.rotary_emb(x, torch.arange(T)[None])
        with torch.no_grad():
            q = attn.q_proj(x).view(1, T, -1, 8).transpose(1, 2)
            k = attn.k_proj(x).view(1, T, -1, 8).transpose(1, 2)
            q, k = transformers.models.gemma2.modeling_gemma2.apply_rotary_pos_emb(q, k, cos, sin)
        assert torch.allclose(r.q, q[0], atol=1e-4, rtol=1e-4) and torch.allclose(r.k, k[0], atol=1e-4, rtol=1e-4)
        # transformers' eager_attention_forward: (q kᵀ · scaling) / c, tanh, · c, before the mask
        k_heads = k[0].repeat_interleave(2, dim=0)
        capped = torch.tanh(q[0] @ k_heads.transpose(-1, -2) * attn.scaling / CAP) * CAP
        visible = torch.isfinite(r.capped)
        assert torch.allclose(r.capped[visible], capped[visible], atol=1e-5, rtol=1e-5)
        assert r.capped[visible].abs().max() <= CAP and r.scaled[visible].abs().max() > CAP  # the cap bites
        assert torch.allclose(r.output, seen[layer], atol=1e-4, rtol=1e-4)  # before the post-attention norm
        window = WINDOW if layer % 2 == 0 else None
        assert plan(cfg.replace(layer=layer)).shown.window == window
        hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
        if window is not None:
            hidden |= torch.ones(T, T, dtype=torch.bool).tril(-window)
        assert (r.weights[:, hidden] == 0).all() and (r.weights[:, ~hidden] > 0).all()
    assert attn.scaling == SCALAR ** -0.5
    assert formula("scaled", plan(cfg)) == f"ω′ = ω / √{SCALAR:g} + mask"  # query_pre_attn_scalar's root
    assert formula("capped", plan(cfg)) == "ω″ = 2 · tanh(ω′ / 2)"
    assert formula("weights", plan(cfg)) == "α = softmax(ω″)"
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)  # after the final soft-cap
    got = compute(cfg).next_tokens
    assert [t for t, _ in got] == [WORDS[i] for i in probs.indices.tolist()]
    assert [p for _, p in got] == pytest.approx(probs.values.tolist(), abs=1e-5)


def test_the_soft_cap_is_a_map_between_the_scaled_scores_and_alpha(gemma2):
    from attn_gui.present.frame import make_frame
    from attn_gui.present.maps import map_data, map_keys

    path, _ = gemma2
    result = compute(AttentionConfig(sentence=SENTENCE, model=path, layer=1))
    names = list(dict.fromkeys(name for name, _ in map_keys(result)))
    assert names.index("scaled") + 1 == names.index("capped") == names.index("weights") - 1
    assert map_data(make_frame(0, result), "capped", 0).title.startswith("layer 2: ω″ = 2 · tanh(ω′ / 2)")


def test_cached_decoding_equals_recomputing(gemma2):
    path, _ = gemma2
    decoder = Decoder(AttentionConfig(sentence=SENTENCE, model=path))
    for _ in range(3):  # past the window of the local layers
        step = decoder.step()
        full = decoder.recompute()
        assert torch.allclose(step.weights, full.weights[:, :, -1], atol=1e-5, rtol=0)
        assert torch.allclose(decoder.logits, full.logits, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory):
    return _tiny(tmp_path_factory, "gemma3_text", 1, layer_types=["sliding_attention", "full_attention",
                                                                  "sliding_attention"],
                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                  "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 5000.0}})


def test_gemma3_equals_transformers(gemma3):
    path, hf = gemma3
    spec = model_spec(path)
    assert spec.qk_norm and spec.layer_windows == (WINDOW, None, WINDOW)
    assert spec.layer_rope_bases == (100.0, 5000.0, 100.0)
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    T = len(SENTENCE.split())
    residuals_equal_transformers(path, hf, SENTENCE)
    for layer, r in enumerate(results):
        attn = hf.model.layers[layer].self_attn
        x = r.x[None]
        kind = hf.config.layer_types[layer]
        cos, sin = hf.model.rotary_emb(x, torch.arange(T)[None], kind)
        with torch.no_grad():
            q = attn.q_norm(attn.q_proj(x).view(1, T, -1, 8)).transpose(1, 2)
            k = attn.k_norm(attn.k_proj(x).view(1, T, -1, 8)).transpose(1, 2)
            assert torch.allclose(r.q_normed, q[0], atol=1e-4, rtol=1e-4)
            q, k = transformers.models.gemma3.modeling_gemma3.apply_rotary_pos_emb(q, k, cos, sin)
        assert torch.allclose(r.q, q[0], atol=1e-4, rtol=1e-4) and torch.allclose(r.k, k[0], atol=1e-4, rtol=1e-4)
        theta = plan(cfg.replace(layer=layer))
        assert theta.shown.rope_base == (5000.0 if kind == "full_attention" else 100.0)
        assert ("linear scaling" in formula("rope_angles", theta)) == (kind == "full_attention")
        assert r.capped is None  # no attention soft-cap in this Gemma 3
    probs = torch.softmax(out.logits[0, -1].double(), -1).topk(5)
    got = compute(cfg).next_tokens
    assert [t for t, _ in got] == [WORDS[i] for i in probs.indices.tolist()]
    assert [p for _, p in got] == pytest.approx(probs.values.tolist(), abs=1e-5)
    decoder = Decoder(cfg)
    for _ in range(2):
        step = decoder.step()
        assert torch.allclose(step.weights, decoder.recompute().weights[:, :, -1], atol=1e-5, rtol=0)

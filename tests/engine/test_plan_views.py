"""One plan of the model (issue 44): every view around the maps computes from what the model computed.

Each tiny random decoder (made by transformers, biases and norm gains random) is checked against transformers
itself: the score attribution's matrix sums to the pre-softmax score captured inside transformers' eager
attention (the softmax's own input), under the plain RoPE, Llama 3's, linear and YaRN scaling, partial rotary
(Phi-3, GPT-NeoX), GPT-2's ``scale_attn_weights`` off and ``scale_attn_by_inverse_layer_idx``, Gemma 2's
``query_pre_attn_scalar`` with its soft-cap, Qwen3's and OLMo 2's q/k norms; the why-scaling α equals the maps' α;
the walk's formula names the divisor the model applied; the circuits equal a hand computation with the gain the
family applies; a what-if runs every layer changed, its maps and next tokens equal to transformers' model changed
alike; a registered model edited in place is run again; one compute resolves the model once.
"""

import contextlib
import math

import pytest
import torch
import transformers

from attn_gui.engine import AttentionConfig, compute, model_spec
from attn_gui.engine.analysis.attribution.qkov import circuits
from attn_gui.engine.analysis.attribution.score import score_attribution
from attn_gui.engine.analysis.attribution.trace import trace
from attn_gui.engine.model.plan import plan
from attn_gui.present.insight import query_softmax
from attn_gui.present.walk import walk_html

from transformers_peer import SENTENCE, WORDS, word_tokenizer  # (tests/)

SIZES = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             vocab_size=len(WORDS), eos_token_id=2, bos_token_id=1, tie_word_embeddings=False,
             max_position_embeddings=128)
LLAMA3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=8, rope_theta=500.0)
CASES = {  # a name: (model_type, its own config fields)
    "llama": ("llama", dict(num_key_value_heads=2)),
    "llama3": ("llama", dict(num_key_value_heads=2, rope_parameters=LLAMA3)),
    "linear": ("llama", dict(rope_parameters=dict(rope_type="linear", factor=4.0, rope_theta=100.0))),
    "yarn": ("qwen2", dict(num_key_value_heads=2, rope_parameters=dict(
        rope_type="yarn", factor=4.0, original_max_position_embeddings=8, rope_theta=100.0))),
    "phi3": ("phi3", dict(num_key_value_heads=2, partial_rotary_factor=0.5, pad_token_id=0)),
    "gpt_neox": ("gpt_neox", dict(rotary_pct=0.25)),
    "gpt2-unscaled": ("gpt2", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64, scale_attn_weights=False)),
    "gpt2-by-layer": ("gpt2", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                   scale_attn_by_inverse_layer_idx=True)),
    "gemma2": ("gemma2", dict(num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=12, sliding_window=4,
                              attn_logit_softcapping=4.0, final_logit_softcapping=None)),
    "qwen3": ("qwen3", dict(num_key_value_heads=2, head_dim=16)),
    "olmo2": ("olmo2", dict(num_key_value_heads=2, pad_token_id=0)),
}


def tiny(case: str, path):
    """The tiny random model of ``case`` saved with a word-level tokenizer in ``path``, and transformers' model."""
    kind, fields = CASES[case]
    torch.manual_seed(0)
    sizes = {k: v for k, v in SIZES.items() if kind != "gpt2" or k in ("vocab_size", "eos_token_id", "bos_token_id")}
    config = transformers.AutoConfig.for_model(kind, **sizes, **fields)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name or ".ln_" in name:
                p.normal_(0, 0.3).add_(1.0 if name.endswith("weight") and "gemma" not in kind else 0.0)
            elif p.dim() == 2:
                p.mul_(4.0)  # scores far from 0: a wrong divisor or rotation shows
    hf.save_pretrained(path)
    word_tokenizer().save(str(path / "tokenizer.json"))
    return str(path), hf


@pytest.fixture(scope="module", params=sorted(CASES))
def model(request, tmp_path_factory):
    return request.param, *tiny(request.param, tmp_path_factory.mktemp(request.param))


@contextlib.contextmanager
def softmax_inputs():
    """Every input transformers' eager attention gives its softmax (1, h, T, T), layer after layer: the
    pre-softmax scores, scaled, masked and (Gemma 2) soft-capped as transformers computes them."""
    seen, real = [], torch.nn.functional.softmax

    def record(x, dim=None, *args, **kwargs):
        if dim == -1 and x.dim() == 4:
            seen.append(x.detach().clone())
        return real(x, dim, *args, **kwargs)
    torch.nn.functional.softmax = record
    try:
        yield seen
    finally:
        torch.nn.functional.softmax = real


def _ids(path):
    from attn_gui.engine.model.registry import source

    return torch.tensor(source(path).tokenize(SENTENCE).token_ids)


def test_score_attribution_sums_to_the_score_transformers_computed(model):
    case, path, hf = model
    ids = _ids(path)
    with torch.no_grad(), softmax_inputs() as scores:
        hf(ids[None], output_attentions=True)
    assert len(scores) == 2
    T = len(ids)
    for layer in range(2):
        cfg = AttentionConfig(model=path, sentence=SENTENCE, layer=layer)
        traced = trace(cfg)
        for head, query, key in ((0, T - 1, T - 3), (3, T - 2, T - 4), (1, 3, 3)):  # within Gemma's window of 4
            split = score_attribution(cfg, head, query, key, traced)
            theirs = float(scores[layer][0, head, query, key])  # the softmax's input: soft-capped in Gemma 2
            total = float(split.matrix.sum())
            assert total == pytest.approx(split.score, abs=1e-4)
            if split.capped is None:
                assert total == pytest.approx(theirs, abs=1e-4), (case, layer, head, query, key)
            else:  # the terms sum to ω′; the softmax reads c tanh(ω′ / c)
                cap = CASES[case][1]["attn_logit_softcapping"]
                assert cap * math.tanh(total / cap) == pytest.approx(theirs, abs=1e-4) and split.capped == \
                    pytest.approx(theirs, abs=1e-4)


def test_why_scaling_and_the_walk_read_what_the_model_ran(model):
    case, path, hf = model
    for layer in range(2):
        r = compute(AttentionConfig(model=path, sentence=SENTENCE, layer=layer))
        token = r.seq_len - 1
        for head in (0, 3):
            q = query_softmax(r, head, token)  # with and without √d_k: the maps are the one the model runs
            shown = q.scaled if r.resolved.shown.scale else q.unscaled
            assert shown == pytest.approx(r.weights[head, token].numpy(), abs=1e-6), (case, layer, head)
        o = r.resolved.shown
        divisor = " / ".join(o.divisor_text(r.q.shape[-1])) or "1"
        text = walk_html(r, token, 0)
        assert f"/ {divisor}" in text
        if o.softcap is not None:
            assert f"{o.softcap:g} · tanh(" in text and "soft-caps" in text
    spec = model_spec(path)
    if spec.score_scalar is not None:  # Gemma: the root of query_pre_attn_scalar, never √d_k
        assert divisor == f"√{spec.score_scalar:g}" != f"√{r.q.shape[-1]}"
    if spec.layer_scale:  # GPT-2 by the inverse layer index: layer 2 divides by 2 more
        assert divisor.endswith(" / 2")
    if not spec.scale:
        assert divisor == "1"


def test_circuits_equal_a_hand_computation_with_the_family_gain(model):
    """QK[a, b] = (e_a γ W_q,h^T) · (e_b γ W_k,g^T) / divisor and OV[a, b] = e_a γ W_V,g^T W_O,h^T (γ_final u_b), with γ
    the gain the family applies: Gemma's 1 + g, none before OLMo 2's attention, the stored g otherwise."""
    case, path, hf = model
    cfg = AttentionConfig(model=path, sentence=SENTENCE, layer=1)
    c = circuits(cfg, 3)
    distinct = list(dict.fromkeys(_ids(path).tolist()))
    sd = {k: v.double() for k, v in hf.state_dict().items()}
    kind = CASES[case][0]
    if kind == "gpt2":
        emb = sd["transformer.wte.weight"]
        w_qkv, d = sd["transformer.h.1.attn.c_attn.weight"], 32
        w_q, w_k, w_v = (w_qkv[:, i * d:(i + 1) * d].T for i in range(3))
        w_o = sd["transformer.h.1.attn.c_proj.weight"].T
        gamma, final = sd["transformer.h.1.ln_1.weight"], sd["transformer.ln_f.weight"]
        unembed = sd.get("lm_head.weight", emb)
    elif kind == "gpt_neox":
        emb = sd["gpt_neox.embed_in.weight"]
        fused = sd["gpt_neox.layers.1.attention.query_key_value.weight"].view(4, 3, -1, 32)
        w_q, w_k, w_v = (fused[:, i].reshape(-1, 32) for i in range(3))
        w_o = sd["gpt_neox.layers.1.attention.dense.weight"]
        gamma, final = sd["gpt_neox.layers.1.input_layernorm.weight"], sd["gpt_neox.final_layer_norm.weight"]
        unembed = hf.get_output_embeddings().weight.double()
    else:
        emb, p = sd["model.embed_tokens.weight"], "model.layers.1.self_attn."
        if kind == "phi3":
            g = hf.config.num_key_value_heads * 32 // hf.config.num_attention_heads
            w_q, w_k, w_v = sd[p + "qkv_proj.weight"].split([32, g, g])
        else:
            w_q, w_k, w_v = (sd[p + f"{n}_proj.weight"] for n in "qkv")
        w_o = sd[p + "o_proj.weight"]
        shift = 1.0 if kind == "gemma2" else 0.0  # Gemma's RMSNorm multiplies by 1 + g
        gamma = torch.ones(32, dtype=torch.float64) if kind == "olmo2" else \
            sd["model.layers.1.input_layernorm.weight"] + shift
        final = sd["model.norm.weight"] + shift
        unembed = sd["lm_head.weight"]
    d_k = w_q.shape[0] // 4  # 4 heads
    g = 3 // (4 // (w_k.shape[0] // d_k))
    e = emb[distinct]
    q = (e * gamma) @ w_q[3 * d_k:4 * d_k].T
    k = (e * gamma) @ w_k[g * d_k:(g + 1) * d_k].T
    divisor = plan(cfg).layers[1].divisor(d_k)
    assert torch.allclose(c.qk, q @ k.T / divisor, atol=1e-6, rtol=1e-5)
    ov = (e * gamma) @ w_v[g * d_k:(g + 1) * d_k].T @ w_o[:, 3 * d_k:4 * d_k].T @ (unembed[distinct] * final).T
    assert torch.allclose(c.ov, ov, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("change", [dict(scale=False), dict(temperature=2.0), dict(window=2)])
def test_a_what_if_runs_every_layer_changed_its_maps_and_next_tokens_alike(tmp_path, change):
    """A Llama with an option its forward lacks equals transformers' Llama changed the same way in every layer
    (each attention's scaling, or its mask): every layer's α, the model view, and the next tokens."""
    path, hf = tiny("llama", tmp_path / "m")
    ids = _ids(path)
    T = len(ids)
    for attn in (layer.self_attn for layer in hf.model.layers):
        attn.scaling = (attn.scaling if change.get("scale", True) else 1.0) / change.get("temperature", 1.0)
    mask = torch.ones(T, T, dtype=torch.bool).tril() & ~torch.ones(T, T, dtype=torch.bool).tril(-change["window"]) \
        if "window" in change else torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        out = hf(ids[None], attention_mask=None if "window" not in change else
                 torch.where(mask, 0.0, float("-inf"))[None, None], output_attentions=True)
    cfg = AttentionConfig(model=path, sentence=SENTENCE, **change)
    p = plan(cfg)
    assert p.what_if == tuple(change) and p.what_if_text().startswith("what-if: ")
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5)
        assert torch.allclose(r.layer_weights, torch.stack([a[0] for a in out.attentions]), atol=1e-5)
        assert any(n.startswith("what-if: ") for n in r.notes)
    probs = torch.softmax(out.logits[0, -1].double(), -1)
    top = dict(r.next_tokens)
    vocab = r.vocab
    for i in probs.topk(5).indices.tolist():
        assert top[vocab[i]] == pytest.approx(float(probs[i]), abs=1e-5)
    plain = compute(cfg.replace(**{k: AttentionConfig().__getattribute__(k) for k in change}))
    assert plain.next_tokens != r.next_tokens  # the what-if changed the next tokens with its maps


def test_an_option_without_effect_on_this_model_is_no_what_if(tmp_path):
    """Sink tokens without a window, a causal mask on a decoder: the forward is the model's own, and says so."""
    path, _ = tiny("llama", tmp_path / "m")
    assert plan(AttentionConfig(model=path, sink_tokens=2, causal=True)).what_if == ()


def test_a_registered_model_edited_in_place_is_run_again(tmp_path):
    import attn_gui

    path, hf = tiny("llama", tmp_path / "m")
    name = attn_gui.register(hf, word_tokenizer(), name="edited")
    cfg = AttentionConfig(model=name, sentence=SENTENCE, layer=1)
    before = compute(cfg).weights.clone()
    with torch.no_grad():
        hf.model.layers[1].self_attn.q_proj.weight.mul_(3)
        out = hf(_ids(path)[None], output_attentions=True)
    after = compute(cfg)
    assert not torch.allclose(after.weights, before, atol=1e-3)
    assert torch.allclose(after.weights, out.attentions[1][0], atol=1e-5)
    with torch.no_grad():  # a parameter replaced, not edited: read anew
        old = hf.model.layers[1].self_attn.k_proj.weight
        hf.model.layers[1].self_attn.k_proj.weight = torch.nn.Parameter(torch.randn_like(old) * 4)
        out = hf(_ids(path)[None], output_attentions=True)
    assert torch.allclose(compute(cfg).weights, out.attentions[1][0], atol=1e-5)


def test_one_compute_resolves_the_model_once(tmp_path, monkeypatch):
    import attn_gui.engine.model.plan as P
    import attn_gui.engine.model.registry as S

    path, _ = tiny("qwen3", tmp_path / "m")
    compute(AttentionConfig(model=path, sentence=SENTENCE))  # loaded, tokenized once
    calls = []
    real = S.model_spec
    for module in (S, P):
        monkeypatch.setattr(module, "model_spec", lambda name: calls.append(name) or real(name))
    compute(AttentionConfig(model=path, sentence="the dog sat on a cat", layer=1))
    assert calls == [path]

"""Decoder families beyond Llama's names, as folders: tiny random models made by transformers (random
non-zero biases and norm gains) give through ``compute`` every layer's alpha of transformers' eager
attention (1e-5), X, Q, K and V (before and after RoPE) and the block output of its forward hooks and
its own rotary functions (1e-4), its next-token top 5, and cached decoding equal to a full recompute.

GPT-NeoX (Pythia): partial rotary (rotary_pct), the parallel residual, the fused per-head query_key_value.
OLMo 2: q and k RMS-normed over all heads of a token (not per head), norms after attention and the MLP.
Phi-3 / Phi-4: the fused qkv_proj and gate_up_proj, partial_rotary_factor, a sliding window in every layer.
"""

import importlib

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, compute, model_spec
from attn_gui.engine.model.registry import source

import transformers

from transformers_peer import (SENTENCE, WORDS, cached_steps_equal_recomputing,  # (tests/)
                               residuals_equal_transformers, top5_equals_transformers, word_tokenizer)

SIZES = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
             vocab_size=len(WORDS), eos_token_id=2, bos_token_id=1, tie_word_embeddings=False,
             max_position_embeddings=128)
FAMILIES = {  # a name for the case: (model_type, its own config fields)
    "gpt_neox": ("gpt_neox", dict(rotary_pct=0.5)),  # 4 of d_k = 8 turned; use_parallel_residual true
    "gpt_neox-sequential": ("gpt_neox", dict(rotary_pct=0.25, use_parallel_residual=False, hidden_act="gelu_new")),
    # fused qkv and gate_up; 4 of d_k = 8 turned; a window shorter than the sentence
    "olmo2": ("olmo2", dict(num_key_value_heads=2, pad_token_id=0)),  # q/k norms over all heads, post-norms
    "phi3": ("phi3", dict(num_key_value_heads=2, partial_rotary_factor=0.5, sliding_window=4, pad_token_id=0)),
}


def _randomize(hf):
    """Random, not zero or one, biases and norm gains: a dropped one changes the numbers."""
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0, 0.1).add_(1.0 if name.endswith("weight") else 0.0)


def _folder(case: str, path, **changes):
    """The tiny random model of ``case`` (FAMILIES, its fields with ``changes``) saved with its tokenizer in
    ``path``, and the model."""
    kind, fields = FAMILIES[case]
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, **SIZES, **(fields | changes))
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    _randomize(hf)
    hf.save_pretrained(path)
    word_tokenizer().save(str(path / "tokenizer.json"))
    return str(path), hf


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def folder(request, tmp_path_factory):
    return _folder(request.param, tmp_path_factory.mktemp(request.param))


def _attention_modules(hf):
    """Each layer's attention module and the module whose rotary embedding it reads."""
    base = hf.base_model
    return [layer.attention if hasattr(layer, "attention") else layer.self_attn for layer in base.layers], base


def _qkv(hf, attn, x, T, heads):
    """transformers' own q, k, v (h, T, d_k) of X as the attention module computes them, and q and k after its
    norms (OLMo 2's, over all heads; the projections themselves where there are none), all before RoPE."""
    if hasattr(attn, "query_key_value"):  # GPT-NeoX: per head [q_h, k_h, v_h]
        q, k, v = attn.query_key_value(x).view(T, heads, -1).transpose(0, 1).chunk(3, dim=-1)
        return q, k, v, q, k
    d_k = attn.head_dim
    per_head = lambda t: t.view(T, -1, d_k).transpose(0, 1)  # noqa: E731  (T, n d_k) -> (n, T, d_k)
    if hasattr(attn, "qkv_proj"):  # Phi-3: [Q; K; V] rows, K and V of the g key/value heads
        g = attn.num_key_value_heads
        q, k, v = map(per_head, attn.qkv_proj(x).split([heads * d_k, g * d_k, g * d_k], dim=-1))
        return q, k, v, q, k
    q, k, v = (getattr(attn, f"{n}_proj")(x) for n in "qkv")
    if hasattr(attn, "q_norm"):  # OLMo 2: one RMSNorm over the whole projection
        return per_head(q), per_head(k), per_head(v), per_head(attn.q_norm(q)), per_head(attn.k_norm(k))
    return per_head(q), per_head(k), per_head(v), per_head(q), per_head(k)


def test_every_layer_equals_transformers(folder):
    path, hf = folder
    spec = model_spec(path)
    T, heads = len(SENTENCE.split()), spec.heads
    modules, base = _attention_modules(hf)
    rotary = importlib.import_module(type(modules[0]).__module__)  # the family's apply_rotary_pos_emb
    share = hf.config.rope_parameters.get("partial_rotary_factor", 1)
    assert spec.rope_dims == (None if share == 1 else int(spec.d_k * share))
    seen = {}
    hooks = [m.register_forward_hook(lambda m, args, kwargs, out, i=i: seen.__setitem__(
        i, (kwargs["hidden_states"][0] if "hidden_states" in kwargs else args[0][0], out[0][0])), with_kwargs=True)
        for i, m in enumerate(modules)]
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True, output_hidden_states=True)
    for h in hooks:
        h.remove()
    residual = source(path).forward(ids, "cpu", torch.float32).residual
    for ours, theirs in zip(residual, out.hidden_states, strict=True):  # every layer's, and the final norm's
        assert torch.allclose(ours, theirs[0], atol=1e-4, rtol=1e-4)
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layout="column")
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        x, block = seen[layer]
        with torch.no_grad():
            q, k, v, q_normed, k_normed = _qkv(hf, modules[layer], x, T, heads)
            cos, sin = base.rotary_emb(x[None], torch.arange(T)[None])
            q_rot, k_rot = rotary.apply_rotary_pos_emb(q_normed[None], k_normed[None], cos, sin)
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
        assert torch.allclose(r.x, x, atol=1e-4, rtol=1e-4)
        for got, want in ((r.q_unrotated, q), (r.k_unrotated, k), (r.v, v), (r.q, q_rot[0]), (r.k, k_rot[0]),
                          (r.output, block)):
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
        if spec.qk_norm:
            assert torch.allclose(r.q_normed, q_normed, atol=1e-4, rtol=1e-4)
            assert torch.allclose(r.k_normed, k_normed, atol=1e-4, rtol=1e-4)
    top5_equals_transformers(cfg, out.logits[0, -1], WORDS)


def test_cached_decoding_equals_recomputing(folder):
    path, hf = folder
    decoder = cached_steps_equal_recomputing(AttentionConfig(sentence=SENTENCE, model=path))
    with torch.no_grad():
        want = hf(torch.tensor(decoder.token_ids)[None]).logits[0, -1]
    assert torch.allclose(decoder.logits, want, atol=1e-4, rtol=1e-4)


def test_the_formulas_name_each_familys_steps(folder):
    from attn_gui.engine import formula

    path, _ = folder
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    spec, result = model_spec(path), compute(cfg)
    dims = spec.rope_dims
    if dims:  # partial rotary: how many dimensions turn, and one angle per turned pair
        assert formula("q", plan(cfg)).endswith(f", its first {dims} dimensions rotated (RoPE)")
        assert formula("rope_angles", plan(cfg)) == f"θ = t · 10000^(−2i/{dims}), r = {dims} of d_k turned"
        assert result.rope_angles.shape == (len(SENTENCE.split()), dims // 2)
    else:
        assert formula("q", plan(cfg)).endswith(", rotated (RoPE)") and result.rope_angles.shape[1] == spec.d_k // 2
    if spec.qk_norm_across:  # OLMo 2: X is the residual itself; q and k normed over all heads
        assert formula("q", plan(cfg)).endswith(", RMS-normed over all heads, rotated (RoPE)")
        assert formula("k_normed", plan(cfg)) == \
            "K = RMSNorm(X W_k) ⊙ g_k, over all heads of a token (h·d_k), before the rotation"
        assert formula("x", plan(cfg)) == "X: the residual stream entering the layer (no norm before attention)"



# what each family's config.json says that transformers reads; a field it starts reading fails the test below
FIELDS = {
    "gpt_neox": dict(
        honoured=("model_type", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
                  "vocab_size", "max_position_embeddings", "hidden_act", "layer_norm_eps", "attention_bias",
                  "use_parallel_residual", "rope_parameters", "head_dim", "tie_word_embeddings", "eos_token_id"),
        unused=("attention_dropout", "hidden_dropout", "classifier_dropout", "use_cache", "is_decoder")),
    "olmo2": dict(
        honoured=("model_type", "hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                  "intermediate_size", "vocab_size", "max_position_embeddings", "hidden_act", "rms_norm_eps",
                  "rope_parameters", "attention_bias", "head_dim", "tie_word_embeddings", "eos_token_id"),
        unused=("attention_dropout", "use_cache")),
    "phi3": dict(  # original_max_position_embeddings: read by longrope only, which rope_parameters' check refuses
        honoured=("model_type", "hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers",
                  "intermediate_size", "vocab_size", "max_position_embeddings", "hidden_act", "rms_norm_eps",
                  "rope_parameters", "sliding_window", "head_dim", "tie_word_embeddings", "eos_token_id",
                  "original_max_position_embeddings"),
        unused=("attention_dropout", "resid_pdrop", "embd_pdrop", "use_cache")),
}


@pytest.mark.parametrize("kind", sorted(FIELDS))
def test_every_field_transformers_reads_is_honoured_or_unused(kind):
    """Read from transformers' own modeling file and config (refused fields are refused by the rope checks)."""
    import inspect
    import re

    from attn_gui.engine.specs.encoder_config import UNUSED

    code = inspect.getsource(importlib.import_module(f"transformers.models.{kind}.modeling_{kind}"))
    read = set(re.findall(r"config\.(\w+)", code)) | set(re.findall(r"getattr\(config, \"(\w+)\"", code))
    read |= set(transformers.AutoConfig.for_model(kind).to_dict())
    assert read - {*FIELDS[kind]["honoured"], *FIELDS[kind]["unused"], *UNUSED} == set()


def test_older_pythia_names_and_a_scaled_rope(tmp_path):
    """Pythia's own config.json names rotary_pct and rotary_emb_base (transformers 4); without them transformers'
    defaults hold (GPTNeoXConfig: 0.25 and 10000); a scaled RoPE is refused in one line."""
    import json
    import shutil

    from attn_gui.engine import ConfigError

    path, _ = _folder("gpt_neox", tmp_path / "gpt_neox")

    def changed(name, **fields):
        odd = tmp_path / name
        shutil.copytree(path, odd)
        cfg = {k: v for k, v in json.loads((odd / "config.json").read_text()).items() if k != "rope_parameters"}
        (odd / "config.json").write_text(json.dumps(cfg | fields))
        return str(odd)

    for name, fields in (("older", dict(rotary_pct=0.5, rotary_emb_base=500)), ("bare", {})):
        spec = model_spec(changed(name, **fields))
        theirs = transformers.AutoConfig.from_pretrained(tmp_path / name).rope_parameters
        assert spec.rope_dims == int(spec.d_k * theirs["partial_rotary_factor"]) < spec.d_k
        assert spec.rope_base == theirs["rope_theta"]
    with pytest.raises(ConfigError, match="^scaled rotates 2 of each head's 8 dimensions with a scaled RoPE "
                                          r"\(linear\), which attn-gui does not apply yet$"):
        plan(AttentionConfig(model=changed("scaled", rope_scaling={"type": "linear", "factor": 2.0})))


@pytest.mark.parametrize("act", ["gelu", "gelu_pytorch_tanh"])
def test_a_gated_feed_forward_applies_its_hidden_act(tmp_path, act):
    """Phi3MLP (as LlamaMLP) applies ACT2FN[hidden_act] to the gate: every layer's residual and the logits
    equal transformers' with a GELU gate too (1e-4)."""
    path, hf = _folder("phi3", tmp_path / act, hidden_act=act)
    out = residuals_equal_transformers(path, hf, SENTENCE)
    top5_equals_transformers(AttentionConfig(sentence=SENTENCE, model=path), out.logits[0, -1], WORDS)


def test_attribution_splits_pythia_and_olmo2s_post_norms(tmp_path):
    """The split's own check (components summing to every layer's residual and to the model's logits) holds
    for GPT-NeoX's parallel residual, and for OLMo 2, whose norm after each block splits over the heads with its
    scale frozen on the block's real output (``llama.BLOCKS["post"]``)."""
    from attn_gui.engine.analysis.attribution.logit import direct_logit_attribution
    from attn_gui.engine.analysis.attribution.trace import trace

    path, hf = _folder("gpt_neox", tmp_path / "pythia")
    run = trace(AttentionConfig(sentence=SENTENCE, model=path))
    with torch.no_grad():
        want = hf(torch.tensor(run.ids)[None]).logits[0, -1]
    assert torch.allclose(run.logits, want, atol=1e-4, rtol=1e-4)
    path, hf = _folder("olmo2", tmp_path / "olmo2")
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    run = trace(cfg)
    with torch.no_grad():
        want = hf(torch.tensor(run.ids)[None]).logits[0, -1]
    assert torch.allclose(run.logits, want, atol=1e-4, rtol=1e-4)
    dla = direct_logit_attribution(cfg, traced=run)
    assert float(dla.values.sum()) == pytest.approx(dla.logit, abs=1e-4)

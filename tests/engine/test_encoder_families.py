"""DeBERTa-v2/v3 and ModernBERT folders on the one encoder path, against transformers.

Tiny random checkpoints made by transformers (random non-zero biases and norm gains), saved with
save_pretrained and opened by path, give through ``compute`` every layer's alpha of eager
``output_attentions`` (1e-5), and X, Q, K, V, DeBERTa's three score terms, the scaled scores and
the attention block's output of transformers' own modules, read with forward hooks (1e-4).
DeBERTa's c2p and p2c are transformers' ``disentangled_attention_bias`` with one term at a time.
"""

import json
import math
import shutil

import pytest
import torch

import transformers
from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.run.fields import formula
from transformers_peer import alphas_equal_transformers  # (tests/)

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"] + [f"w{i}" for i in range(40)]
SENTENCE = "the cat sat on a mat and the dog ran far w1 w2 w3"  # 16 tokens: past DeBERTa's 4 exact buckets
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
T = len(SENTENCE.split()) + 2


def _tokenizer(folder):
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    vocab = SPECIALS + WORDS
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(s, special=True) for s in SPECIALS])
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(folder / "tokenizer.json"))


def _checkpoint(tmp_path_factory, kind, **sizes):
    """A tiny random transformers model of ``kind``, its biases and norm gains random, saved as a folder."""
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, vocab_size=len(SPECIALS) + len(WORDS), hidden_size=32,
                                               num_attention_heads=4, intermediate_size=48,
                                               max_position_embeddings=64, pad_token_id=0, **sizes)
    hf = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():  # transformers starts biases at 0 and norm gains at 1, which would hide a dropped one
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name.lower():
                p.normal_(0, 0.1).add_(1.0 if name.endswith("weight") else 0.0)
    path = tmp_path_factory.mktemp(kind)
    hf.save_pretrained(path)
    _tokenizer(path)
    return str(path), hf


DEBERTA = {  # v3: shared position projections, log buckets, LayerNormed relative embeddings, no absolute positions
    "v3": dict(relative_attention=True, position_buckets=8, max_relative_positions=64, pos_att_type=["p2c", "c2p"],
               position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, type_vocab_size=0),
    # v2-style: own position projections, no buckets, absolute positions and token types too
    "v2": dict(relative_attention=True, max_relative_positions=-1, pos_att_type="c2p|p2c", position_biased_input=True,
               share_att_key=False, type_vocab_size=2),
}


@pytest.fixture(scope="module", params=sorted(DEBERTA))
def deberta(request, tmp_path_factory):
    return _checkpoint(tmp_path_factory, "deberta-v2", num_hidden_layers=2, **DEBERTA[request.param])


def test_every_deberta_layer_equals_transformers(deberta):
    path, hf = deberta
    spec = model_spec(path)
    assert (spec.layers, spec.heads, spec.d_k, spec.score_terms, spec.scale_factor) == (2, 4, 8, ("c2p", "p2c"), 3)
    seen = {}
    hooks = [layer.attention.self.register_forward_hook(
        lambda m, args, kwargs, out, i=i: seen.__setitem__(i, args[0] if args else kwargs["hidden_states"]),
        with_kwargs=True) for i, layer in enumerate(hf.encoder.layer)]
    hooks += [layer.attention.output.dense.register_forward_hook(
        lambda m, args, out, i=i: seen.__setitem__(("out", i), out[0])) for i, layer in enumerate(hf.encoder.layer)]
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE)
    for h in hooks:
        h.remove()
    scale = math.sqrt(8 * 3)  # transformers' scaled_size_sqrt: sqrt(d_k * scale_factor)
    for layer, r in enumerate(results):
        attn, x = hf.encoder.layer[layer].attention.self, seen[layer]
        with torch.no_grad():
            q, k, v = (attn.transpose_for_scores(proj(x), 4) for proj in (attn.query_proj, attn.key_proj,
                                                                            attn.value_proj))  # (h, T, d_k)
            rel = hf.encoder.get_rel_embedding()
            rel_pos = hf.encoder.get_rel_pos(x)
            terms = {}
            for term in ("c2p", "p2c"):  # one term at a time, as the model's own code computes it
                attn.pos_att_type = [term]
                terms[term] = attn.disentangled_attention_bias(q, k, rel_pos, rel, 3)
            attn.pos_att_type = ["c2p", "p2c"]
            scaled = q @ k.transpose(-1, -2) / scale + terms["c2p"] + terms["p2c"]
        r = compute(cfg.replace(layer=layer, layout="column"))
        assert torch.allclose(r.x, x[0], atol=1e-4, rtol=1e-4), layer
        for got, want in ((r.q, q), (r.k, k), (r.v, v), (r.scores, q @ k.transpose(-1, -2)),
                          (r.c2p / scale, terms["c2p"]), (r.p2c / scale, terms["p2c"]), (r.scaled, scaled),
                          (r.output, seen[("out", layer)])):
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), layer
    assert torch.allclose(source(path).layer_inputs(results[0].token_ids, "cpu", torch.float32)[0][-1],
                          out.last_hidden_state[0], atol=1e-4, rtol=1e-4)


def test_deberta_score_terms_are_maps_with_their_formulas(deberta):
    path, _ = deberta
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    r = compute(cfg)
    names = r.fields()
    assert names.index("scores") < names.index("c2p") < names.index("p2c") < names.index("scaled")
    assert r.c2p.shape == r.p2c.shape == (4, T, T)
    assert formula("scores", plan(cfg)) == "ω = Q Kᵀ: content → content"
    assert formula("c2p", plan(cfg)).startswith("c2p = Q K_rᵀ at δ(i, j): content → position")
    assert formula("scaled", plan(cfg)) == "ω′ = (ω + c2p + p2c) / √(3·d_k)"
    assert r.position_terms == ("c2p", "p2c")


def test_deberta_walk_and_why_scaling_add_the_position_terms(deberta):
    from attn_gui.present.insight import query_softmax
    from attn_gui.present.walk import walk_html

    r = compute(AttentionConfig(sentence=SENTENCE, model=deberta[0]))
    shown = query_softmax(r, 1, 5)  # alpha as the model computes it, from the summed scores over sqrt(3 d_k)
    assert shown.divisor == "√(3·8)" and torch.allclose(torch.from_numpy(shown.scaled), r.weights[1, 5], atol=1e-6)
    html = walk_html(r, 5, 1)
    assert "(ω + c2p + p2c) / √(3·8)" in html and "<th>c2p</th><th>p2c</th>" in html


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory):
    return _checkpoint(tmp_path_factory, "modernbert", num_hidden_layers=3, local_attention=4,
                       global_attn_every_n_layers=2, global_rope_theta=500.0, local_rope_theta=50.0,
                       attention_bias=True, mlp_bias=True, norm_bias=True, bos_token_id=2, eos_token_id=3,
                       cls_token_id=2, sep_token_id=3)


def test_every_modernbert_layer_equals_transformers(modernbert):
    path, hf = modernbert
    spec = model_spec(path)
    assert (spec.layers, spec.heads, spec.d_k, spec.has_bias) == (3, 4, 8, True)
    # layer 2 of 3 is local: it sees local_attention // 2 = 2 keys either side (|i - j| < 3 here)
    assert spec.layer_windows == (None, 3, None) and spec.layer_rope_bases == (500.0, 50.0, 500.0)
    seen = {}
    hooks = [layer.attn.register_forward_hook(
        lambda m, args, kwargs, out, i=i: seen.__setitem__(i, (args[0] if args else kwargs["hidden_states"],
                                                                kwargs["position_embeddings"], out[0])),
        with_kwargs=True) for i, layer in enumerate(hf.layers)]
    out, cfg, results = alphas_equal_transformers(path, hf, SENTENCE, layers=3)
    for h in hooks:
        h.remove()
    for layer, r in enumerate(results):
        x, (cos, sin), block = seen[layer]
        with torch.no_grad():
            qkv = hf.layers[layer].attn.Wqkv(x).view(1, T, 3, 4, 8)  # as ModernBertAttention splits it
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(dim=-3))  # (1, h, T, d_k)
            q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
        r = compute(cfg.replace(layer=layer, layout="column"))
        assert torch.allclose(r.x, x[0], atol=1e-4, rtol=1e-4), layer
        for got, want in ((r.q_unrotated, q[0]), (r.k_unrotated, k[0]), (r.q, q_rot[0]), (r.k, k_rot[0]),
                          (r.v, v[0]), (r.output, block[0])):
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), layer
        assert (r.weights[:, 0, 3:] == 0).all() == (layer == 1)  # the local layer's window hides far keys
        assert f"{spec.layer_rope_bases[layer]:g}^" in formula("rope_angles", r.resolved)
    assert torch.allclose(source(path).layer_inputs(results[0].token_ids, "cpu", torch.float32)[0][-1],
                          out.last_hidden_state[0], atol=1e-4, rtol=1e-4)


def _changed(path, tmp_path, **fields):
    folder = tmp_path / "odd"
    shutil.copytree(path, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(fields)
    (folder / "config.json").write_text(json.dumps(cfg))
    return str(folder)


@pytest.mark.parametrize(("fields", "message"), [
    (dict(conv_kernel_size=3), "^odd: conv_kernel_size = 3 is not supported"),
    (dict(embedding_size=16), "^odd: embedding_size = 16 is not supported"),
    (dict(pos_att_type=["c2p", "p2p"]), "^odd: pos_att_type 'p2p' is not supported; supported: c2p, p2c$"),
    (dict(norm_rel_ebd="layer_norm|other"), "^odd: norm_rel_ebd 'layer_norm|other' is not supported"),
])
def test_deberta_fields_not_computed_are_refused_in_one_line(deberta, tmp_path, fields, message):
    with pytest.raises(ConfigError, match=message):
        plan(AttentionConfig(model=_changed(deberta[0], tmp_path, **fields)))


def test_modernbert_fields_not_computed_are_refused_in_one_line(modernbert, tmp_path):
    odd = _changed(modernbert[0], tmp_path, rope_parameters={"full_attention": {"rope_type": "yarn"}})
    with pytest.raises(ConfigError, match="^odd uses RoPE scaling 'yarn', which attn-gui does not apply yet$"):
        plan(AttentionConfig(model=odd))


@pytest.mark.parametrize(("T", "buckets", "max_position"), [(40, 8, 64), (70, 256, 512), (30, -1, 16), (33, 6, 20)])
def test_relative_index_is_transformers_bucketed_relative_position(T, buckets, max_position):
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position

    from attn_gui.engine.kernel.scores import relative_index

    span = buckets if buckets > 0 else max_position  # DisentangledSelfAttention.pos_ebd_size
    x = torch.zeros(1, T, 1)
    want = torch.clamp(build_relative_position(x, x, buckets, max_position)[0] + span, 0, 2 * span - 1)
    assert torch.equal(relative_index(T, T, span, buckets, max_position), want)


@pytest.mark.parametrize(("kind", "module"), [("deberta-v2", "deberta_v2"), ("modernbert", "modernbert")])
def test_every_field_transformers_reads_is_honoured_refused_or_unused(kind, module):
    """The fields are read from transformers' own modeling file and config, so a field it starts reading fails here."""
    import importlib
    import inspect
    import re

    from attn_gui.engine.specs.encoder_config import FIELDS

    code = inspect.getsource(importlib.import_module(f"transformers.models.{module}.modeling_{module}"))
    read = set(re.findall(r"config\.(\w+)", code)) | set(re.findall(r"getattr\(config, \"(\w+)\"", code))
    read |= set(transformers.AutoConfig.for_model(kind).to_dict())
    declared = FIELDS[kind]
    assert read - {f for fields in declared.values() for f in fields} == set()
    assert not set(declared["honoured"]) & set(declared["refused"])

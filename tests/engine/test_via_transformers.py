"""A model_type outside the family table opens through transformers itself (issue 31): tiny random StableLM
and Falcon folders, made here by transformers, show transformers' own α and the values its modules hand
their hooks; without transformers the refusal says how to enable the path; remote code is refused."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.plan import plan
from transformers_peer import top5_equals_transformers  # (tests/)

WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(21)] + ["the", "cat", "sat", "on", "a", "mat", "and",
                                                                   "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"
KINDS = {  # model_types transformers has offline that are outside attn-gui's table
    "stablelm": dict(intermediate_size=48, num_key_value_heads=2, use_qkv_bias=True, qk_layernorm=True),
    "falcon": dict(num_kv_heads=4),  # multi_query: one K/V head; a fused query_key_value split by _split_heads
}


def outside_folder(kind: str, folder) -> transformers.PreTrainedModel:
    """Save a 2-layer, 4-head, d = 32 random ``kind`` causal LM (random biases and norm gains) with a WordLevel
    tokenizer in ``folder``; return transformers' model (eager attention)."""
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                               vocab_size=len(WORDS), eos_token_id=2, bos_token_id=1,
                                               tie_word_embeddings=False, max_position_embeddings=128, **KINDS[kind])
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.normal_(0, 0.3).add_(1.0 if name.endswith("weight") else 0.0)
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return hf


@pytest.fixture(scope="module", params=list(KINDS))
def outside(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    return request.param, str(folder), outside_folder(request.param, folder)


def _attention(hf, kind: str) -> torch.nn.Module:
    return hf.model.layers[0].self_attn if kind == "stablelm" else hf.transformer.h[0].self_attention


def _on_interface(hf) -> bool:
    """Whether the model's file runs transformers' attention interface (StableLM; Falcon from transformers 5.25):
    its eager function then receives q and k after RoPE, which the engine's capture reads too."""
    return hasattr(sys.modules[type(hf).__module__], "eager_attention_forward")


def _expected_uncaptured(kind: str, hf) -> tuple[str, ...]:
    """What no hook of the engine can see, by what transformers' Falcon offers: before 5.25 it splits its fused
    query_key_value with ``_split_heads`` (hooked: q, k before RoPE) and runs its own attention (q, k after RoPE
    unseen); from 5.25 it splits inline (q, k before RoPE unseen) and runs the interface (q, k after RoPE seen)."""
    if kind == "falcon":
        split = callable(getattr(_attention(hf, kind), "_split_heads", None))
        missing = ("q", "k") if split else ("q_unrotated", "k_unrotated")
        assert split != _on_interface(hf)  # one of the two paths, as in 5.24 or 5.25
        return missing + ("scores", "scaled")
    return ("scores", "scaled")


def _peer_steps(kind: str, hf, ids: torch.Tensor, monkeypatch):
    """transformers' own run with hooks written here: each layer's X, Q, K, V (before RoPE), Z and output (and
    StableLM's Q and K after RoPE, as its eager attention function receives them), with the attentions and the
    logits."""
    layers = hf.model.layers if kind == "stablelm" else hf.transformer.h
    got = [{} for _ in layers]
    handles = []
    for layer, into in zip(layers, got, strict=True):
        attn = layer.self_attn if kind == "stablelm" else layer.self_attention
        handles.append(attn.register_forward_pre_hook(
            lambda m, a, kw, into=into: into.update(x=(a or (kw["hidden_states"],))[0][0]), with_kwargs=True))
        handles.append(attn.register_forward_hook(lambda m, a, out, into=into: into.update(output=out[0][0])))
        out_proj = attn.o_proj if kind == "stablelm" else attn.dense
        handles.append(out_proj.register_forward_pre_hook(lambda m, a, into=into: into.update(concat=a[0][0])))
        if kind == "stablelm":  # (1, T, n d_k) as the module views it: (1, T, n, d_k), heads first
            for name, proj in (("q_unrotated", attn.q_proj), ("k_unrotated", attn.k_proj), ("v", attn.v_proj)):
                handles.append(proj.register_forward_hook(
                    lambda m, a, out, name=name, into=into: into.update({name: out[0].view(out.shape[1], -1, 8)
                                                                        .transpose(0, 1)})))
        else:  # Falcon's multi-query layout: h query heads, then one key head and one value head
            def fused(m, a, out, into=into):
                heads = out[0].view(out.shape[1], -1, 8)  # (T, h + 2, d_k)
                into.update(q_unrotated=heads[:, :-2].transpose(0, 1), k_unrotated=heads[:, -2:-1].transpose(0, 1),
                            v=heads[:, -1:].transpose(0, 1))
            handles.append(attn.query_key_value.register_forward_hook(fused))
    try:
        with torch.no_grad(), monkeypatch.context() as patch:
            if _on_interface(hf):  # the eager function the attention calls, recording what it is given
                module = sys.modules[type(_attention(hf, kind)).__module__]
                eager = module.eager_attention_forward

                def recording(m, query, key, *args, **kwargs):
                    got[m.layer_idx].update(q=query[0], k=key[0])
                    return eager(m, query, key, *args, **kwargs)
                patch.setattr(module, "eager_attention_forward", recording)
            out = hf(ids[None], output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return got, out


def test_every_layer_shows_transformers_alpha_and_the_hooks_values(outside, monkeypatch):
    kind, path, hf = outside
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    first = compute(cfg)
    peer, out = _peer_steps(kind, hf, first.token_ids, monkeypatch)
    assert first.tokens == tuple(SENTENCE.split())
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
        assert torch.allclose(r.layer_weights, torch.stack([a[0] for a in out.attentions]), atol=1e-5, rtol=0)
        assert ("q" in peer[layer]) == _on_interface(hf)  # the recording eager function was called
        # what no hook sees is None and named, never a None that crashes a view: the scores, and q and k on one
        # side of RoPE where transformers' Falcon gives no module to hook (which side: its version)
        assert r.not_captured == _expected_uncaptured(kind, hf)
        assert all(getattr(r, name) is None for name in r.not_captured)
        shown = {name: value for name, value in peer[layer].items() if name not in r.not_captured}
        assert {"x", "v", "concat", "output"} <= set(shown) and len(shown) >= 6
        for name, value in shown.items():
            assert torch.allclose(getattr(r, name), value, atol=1e-6, rtol=0), (layer, name)
        T = r.seq_len
        assert torch.equal(r.head_outputs, r.concat.view(T, 4, 8).transpose(0, 1))  # Z per head, as concatenated
    top5_equals_transformers(cfg, out.logits[0, -1], WORDS)


def test_the_spec_says_transformers_runs_it(outside):
    kind, path, _ = outside
    spec = model_spec(path)
    assert spec.module == "via_transformers" and spec.through == f"{kind} through transformers"
    assert (spec.layers, spec.heads, spec.d_model, spec.d_k) == (2, 4, 32, 8)
    assert "read through transformers" in compute(AttentionConfig(sentence="the cat", model=path)).notes[0]


def test_options_transformers_cannot_apply_are_refused_in_one_line(outside):
    _, path, _ = outside
    for change in (dict(temperature=2.0), dict(scale=False), dict(similarity="cosine")):  # what-ifs: refused
        with pytest.raises(ConfigError, match=f"^{next(iter(change))}: .* is read through transformers, which runs it "
                                              "as it is"):
            compute(AttentionConfig(sentence="the cat", model=path, **change))
    with pytest.raises(ConfigError, match=r"^ablate = .* cannot apply to a model read through transformers"):
        compute(AttentionConfig(sentence="the cat", model=path, ablate=((0, 0),)))


def test_remote_code_is_never_run(tmp_path):
    folder = tmp_path / "remote"
    outside_folder("stablelm", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="^remote: config.json has auto_map: .*trust_remote_code.*never executes"):
        plan(AttentionConfig(model=str(folder)))  # the plan reads the folder; the config is plain data


def test_an_encoder_decoder_is_refused_naming_the_field(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "t5"}')
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ConfigError, match="is a 't5' model; supported model_types: llama.*; others open through "
                                          "transformers, not encoder-decoders \\(is_encoder_decoder\\)$"):
        plan(AttentionConfig(model=str(tmp_path)))


def test_without_transformers_the_one_line_says_how_to_enable_the_path(outside):
    _, path, _ = outside
    code = ("import sys; sys.modules['transformers'] = None\n"
            "from attn_gui.engine import AttentionConfig, ConfigError\nfrom attn_gui.engine.model.plan import plan\n"
            f"try:\n    plan(AttentionConfig(model={path!r}))\nexcept ConfigError as exc:\n    print(exc)\n"
            "print('transformers' in sys.modules and sys.modules['transformers'] is not None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    line, imported = out.stdout.splitlines()
    assert "model; supported model_types: llama, mistral, qwen2" in line
    assert line.endswith("other model_types open through transformers once it is installed "
                         "(pip install attn-gui[transformers])")
    assert imported == "False"


def test_cli_exports_such_a_folder(outside, tmp_path):
    from attn_gui.cli import main

    kind, path, hf = outside
    out = tmp_path / "out"
    assert main(["export", "--model", path, "--layer", "2", "--sentence", SENTENCE, "--format", "npy",
                 "--out", str(out)]) == 0
    with torch.no_grad():
        ids = compute(AttentionConfig(sentence=SENTENCE, model=path)).token_ids
        attentions = hf(ids[None], output_attentions=True).attentions
    np.testing.assert_allclose(np.load(out / "weights.npy"), attentions[1][0].numpy(), atol=1e-5)
    assert not (out / "scores.npy").exists()  # not captured: no file of made-up numbers
    assert json.loads((out / "manifest.json").read_text())["not_captured"][-2:] == ["scores", "scaled"]


def test_a_decoder_through_transformers_is_a_decoder_whose_steps_are_named(outside):
    """A causal LM read through transformers predicts (its plan says decoder, its next tokens come from transformers'
    logits); generation, interventions and attribution refuse in one line naming the step they cannot reach."""
    from attn_gui.engine.analysis.attribution.trace import trace
    from attn_gui.engine.analysis import interventions
    from attn_gui.engine.run.decoding import Decoder
    from attn_gui.engine.model.plan import plan

    _, path, _ = outside
    cfg = AttentionConfig(sentence="the cat", model=path)
    assert plan(cfg).can.next_tokens and compute(cfg).next_tokens is not None
    with pytest.raises(ConfigError, match="is read through transformers: attn-gui shows its attention and next "
                                          "tokens, and generates through the key/value cache of the models it runs "
                                          "itself"):
        Decoder(cfg)
    for run in (lambda: interventions.ablate(cfg, [(0, 0)]), lambda: trace(cfg)):
        with pytest.raises(ConfigError, match=r"^interventions change a head's output Z before W_O inside attn-gui's "
                                              "own forward; .* runs in transformers, whose hooks here only read it$"):
            run()



def test_a_decoder_through_transformers_gets_one_answer_everywhere(tmp_path):
    """What a causal LM read through transformers can do is decided once (``Plan.can``): it predicts next tokens
    and nothing run by attn-gui's own forward; every place that asks (generation, interventions, the census's dla
    column, first maps first) answers the same, each refusal with the row's own line."""
    from attn_gui.engine.analysis.corpus.shards import dla_refusal
    from attn_gui.engine.analysis import interventions
    from attn_gui.engine.run.decoding import decoder_source
    from attn_gui.engine.model.plan import plan
    from attn_gui.present.runner import first_maps_first

    folder = tmp_path / "stablelm"
    outside_folder("stablelm", folder)
    cfg = AttentionConfig(sentence="the cat", model=str(folder))
    can = plan(cfg).can
    assert (can.maps, can.next_tokens, can.captured) == (True, True, True)
    assert not (can.generate or can.intervene or can.attribute or can.stream or can.first_maps or can.decoder)
    assert compute(cfg).next_tokens is not None  # next_tokens, as the row says
    with pytest.raises(ConfigError) as refused:
        decoder_source(cfg)
    assert str(refused.value) == can.why_not["generate"]
    with pytest.raises(ConfigError) as refused:
        interventions.ablate(cfg, [(0, 0)])
    assert str(refused.value) == can.why_not["intervene"]
    assert dla_refusal(str(folder)) == can.why_not["attribute"]
    assert not first_maps_first(cfg)


def test_missing_weights_are_refused_in_one_line_without_transformers_report(tmp_path):
    """A folder whose weights lack a tensor (one renamed): transformers fills it with random values and logs a
    load report of dozens of lines; attn-gui refuses it in its one line, and nothing else is printed."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "renamed"
    outside_folder("stablelm", folder)
    tensors = load_file(folder / "model.safetensors")
    save_file({k.replace("layers.0.self_attn.q_proj", "layers.0.self_attn.query"): v for k, v in tensors.items()},
              folder / "model.safetensors", metadata={"format": "pt"})
    done = subprocess.run([sys.executable, "-m", "attn_gui", "export", "--model", str(folder), "--format", "npy",
                           "--sentence", "the cat", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2 and done.stdout == "", done.stderr[-3000:]
    assert done.stderr == ("attn-gui: renamed: its weights lack 2 of the model's tensors "
                           "(model.layers.0.self_attn.q_proj.bias, ...), which transformers would fill with random "
                           "values\n")
    assert not (tmp_path / "out").exists()
    save_file({**tensors, "model.extra.weight": torch.ones(2)}, folder / "model.safetensors",
              metadata={"format": "pt"})  # every tensor, and one the model has no use for: read, in silence
    done = subprocess.run([sys.executable, "-m", "attn_gui", "export", "--model", str(folder), "--format", "npy",
                           "--sentence", "the cat", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]

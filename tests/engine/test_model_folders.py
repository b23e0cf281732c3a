"""A model is a path: tiny random Llama-family folders made by transformers (save_pretrained,
plus a WordLevel tokenizer.json from ``tokenizers``) give through ``compute`` every layer's
alpha of transformers' eager attention (1e-5), X, Q, K, V and the block output of its forward
hooks (1e-4), its next-token top 5, and cached decoding equals a full recompute.
"""

import json

import pytest
import torch

from attn_gui.engine.model.plan import plan
from attn_gui.engine import AttentionConfig, ConfigError, compute, model_spec
from attn_gui.engine.model.registry import source
from attn_gui.engine.run.decoding import Decoder

import transformers
from transformers_peer import top5_equals_transformers  # (tests/)

WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(61)] + ["the", "cat", "sat", "on", "a", "mat", "and",
                                                                   "dog", "ran"]
SENTENCE = "the cat sat on a mat and the dog ran"
FAMILIES = {
    "llama": dict(num_key_value_heads=2, rope_theta=500.0),  # saved by transformers 5 as rope_parameters
    "qwen2": dict(num_key_value_heads=2),  # Q/K/V biases
    "mistral": dict(num_key_value_heads=4, sliding_window=3),  # shorter than the sentence: the window bites
    "qwen3": dict(num_key_value_heads=2, head_dim=16),  # per-head q_norm and k_norm; h * d_k = 64 > d = 32
}


def _tokenizer(folder):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def folder(request, tmp_path_factory):
    kind = request.param
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(kind, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                               num_attention_heads=4, vocab_size=len(WORDS), eos_token_id=2,
                                               bos_token_id=1, tie_word_embeddings=False,
                                               max_position_embeddings=128, **FAMILIES[kind])
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    if kind == "qwen2":  # random, not zero, biases: they must be read
        with torch.no_grad():
            for layer in hf.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_()
    if kind == "qwen3":  # random, not one, gains of q_norm and k_norm
        with torch.no_grad():
            for layer in hf.model.layers:
                layer.self_attn.q_norm.weight.normal_()
                layer.self_attn.k_norm.weight.normal_()
    path = tmp_path_factory.mktemp(kind)
    hf.save_pretrained(path)
    _tokenizer(path)
    return str(path), hf


def test_every_layer_equals_transformers(folder):
    path, hf = folder
    cfg = AttentionConfig(sentence=SENTENCE, model=path, layout="column")
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    assert ids.tolist() == [WORDS.index(w) for w in SENTENCE.split()]
    hooks, seen = [], {}
    for i, layer in enumerate(hf.model.layers):
        hooks.append(layer.self_attn.register_forward_hook(
            lambda m, args, kwargs, out, i=i: seen.__setitem__(i, (kwargs["hidden_states"][0], out[0][0])),
            with_kwargs=True))
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True, output_hidden_states=True)
    for h in hooks:
        h.remove()
    spec = model_spec(path)
    T, d_k = len(ids), spec.d_k
    assert spec.rope_base == hf.config.rope_parameters["rope_theta"]
    residual = source(path).forward(ids, "cpu", torch.float32).residual
    for ours, theirs in zip(residual, out.hidden_states, strict=False):  # every layer's, and the final norm's
        assert torch.allclose(ours, theirs[0], atol=1e-4, rtol=1e-4)
    window = FAMILIES[hf.config.model_type].get("sliding_window")
    if window is not None:  # transformers' eager attention hid the far keys, and so did ours
        assert spec.window == window and (out.attentions[0][0][:, -1, :T - window] == 0).all()
    for layer in range(2):
        r = compute(cfg.replace(layer=layer))
        x, block = seen[layer]
        attn = hf.model.layers[layer].self_attn
        with torch.no_grad():
            k = attn.k_proj(x).view(T, -1, d_k).transpose(0, 1)
            v = attn.v_proj(x).view(T, -1, d_k).transpose(0, 1)
            q = attn.q_proj(x).view(T, -1, d_k).transpose(0, 1)
        assert torch.allclose(r.weights, out.attentions[layer][0], atol=1e-5, rtol=0), layer
        assert torch.allclose(r.x, x, atol=1e-4, rtol=1e-4)
        assert torch.allclose(r.q_unrotated, q, atol=1e-4, rtol=1e-4)
        assert torch.allclose(r.k_unrotated, k, atol=1e-4, rtol=1e-4)
        assert torch.allclose(r.v, v, atol=1e-4, rtol=1e-4)
        assert torch.allclose(r.output, block, atol=1e-4, rtol=1e-4)
        if hasattr(attn, "q_norm"):  # Qwen3: each head's q and k RMS-normed before RoPE
            with torch.no_grad():
                q_normed = attn.q_norm(attn.q_proj(x).view(T, -1, d_k)).transpose(0, 1)
                k_normed = attn.k_norm(attn.k_proj(x).view(T, -1, d_k)).transpose(0, 1)
            assert torch.allclose(r.q_normed, q_normed, atol=1e-4, rtol=1e-4)
            assert torch.allclose(r.k_normed, k_normed, atol=1e-4, rtol=1e-4)
            assert {"q_normed", "k_normed"} <= set(r.fields())
        else:
            assert r.q_normed is None and r.k_normed is None
    top5_equals_transformers(cfg, out.logits[0, -1], WORDS)


def test_the_window_shows_the_norms_and_the_sliding_window(folder):
    from attn_gui.engine import formula
    from attn_gui.present.frame import make_frame
    from attn_gui.present.maps import map_data, map_keys

    path, hf = folder
    cfg = AttentionConfig(sentence=SENTENCE, model=path)
    frame = make_frame(0, compute(cfg))
    names = list(dict.fromkeys(name for name, _ in map_keys(frame.result)))
    if hf.config.model_type == "qwen3":  # steps of their own, between the projection and the rotation
        assert names.index("q_unrotated") < names.index("q_normed") < names.index("q")
        assert names.index("k_unrotated") < names.index("k_normed") < names.index("k")
        assert map_data(frame, "k_normed", 1).matrix.shape == (len(SENTENCE.split()), model_spec(path).d_k)
        assert formula("q", plan(cfg)).endswith(", RMS-normed per head, rotated (RoPE)")
        assert formula("q_unrotated", plan(cfg)) == "Q = X W_q, before the norm and the rotation"
    else:
        assert "q_normed" not in names and "k_normed" not in names
        assert formula("q", plan(cfg)).endswith(", rotated (RoPE)") and "RMS" not in formula("q", plan(cfg))
    reason = map_data(frame, "weights", 0).masked_reason
    if hf.config.model_type == "mistral":
        assert reason == "masked: this key is after the query or outside the window of 3"
    else:
        assert reason == "masked: this key comes after the query (causal)"


def test_cached_decoding_equals_recomputing(folder):
    path, _ = folder
    decoder = Decoder(AttentionConfig(sentence=SENTENCE, model=path))
    for _ in range(2):
        step = decoder.step()
        full = decoder.recompute()
        assert torch.allclose(step.weights, full.weights[:, :, -1], atol=1e-5, rtol=0)
        assert torch.allclose(decoder.logits, full.logits, atol=1e-5, rtol=1e-5)


def test_weights_keep_their_stored_dtype(tmp_path_factory):
    cfg = transformers.AutoConfig.for_model("llama", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, vocab_size=len(WORDS))
    folder = tmp_path_factory.mktemp("bf16")
    transformers.AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16).save_pretrained(folder)
    _tokenizer(folder)
    from attn_gui.engine.model.decoder import source as decoder

    assert decoder.load_model(str(folder)).weights["model.layers.0.self_attn.q_proj.weight"].dtype == torch.bfloat16
    assert compute(AttentionConfig(sentence=SENTENCE, model=str(folder))).weights.dtype == torch.float32


def test_a_vocabulary_under_five_and_one_padded_past_the_tokenizer(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    cfg = transformers.AutoConfig.for_model("llama", hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                                            num_attention_heads=2, vocab_size=4)
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    tok = Tokenizer(models.WordLevel({"<unk>": 0, "the": 1, "cat": 2}, unk_token="<unk>"))  # 3 ids, 4 rows
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    top = compute(AttentionConfig(sentence="the cat", model=str(tmp_path))).next_tokens  # the top 5 of 4
    assert sorted(t for t, _ in top) == ["<unk>", "<unused 3>", "cat", "the"]
    assert sum(p for _, p in top) == pytest.approx(1.0)


def _bad(tmp_path, kind):
    folder = tmp_path / kind
    folder.mkdir()
    cfg = dict(model_type="llama", hidden_size=32, num_attention_heads=4, num_hidden_layers=2)
    if kind == "unsupported":
        cfg["model_type"] = "no-such-model"
    (folder / "config.json").write_text(json.dumps(cfg))
    if kind != "no tokenizer":
        _tokenizer(folder)
    return str(folder)


@pytest.mark.parametrize("kind, message", [
    ("no tokenizer", "has no tokenizer.json"),
    ("unsupported", "is a 'no-such-model' model; supported model_types: llama, mistral, qwen2.*, not this one: "
                    "transformers here lacks it"),
])
def test_bad_folders_say_what_is_wrong(tmp_path, kind, message):
    with pytest.raises(ConfigError, match=message):
        plan(AttentionConfig(model=_bad(tmp_path, kind)))


def _config(tmp_path, name, **changes):
    """A folder with a config.json (a small Llama's, with ``changes``) and a tokenizer, no weights."""
    folder = tmp_path / name
    folder.mkdir()
    cfg = {**dict(model_type="llama", hidden_size=32, num_attention_heads=4, num_hidden_layers=2), **changes}
    (folder / "config.json").write_text(json.dumps(cfg))
    _tokenizer(folder)
    return str(folder)


@pytest.mark.parametrize("changes, window", [
    (dict(model_type="mistral", sliding_window=None), None),
    (dict(model_type="mistral", sliding_window=4), 4),
    (dict(model_type="llama", sliding_window=4), None),
    (dict(model_type="qwen2", sliding_window=4, use_sliding_window=False, max_window_layers=0), None),
    (dict(model_type="qwen2", sliding_window=4, use_sliding_window=True, max_window_layers=0), 4),
    (dict(model_type="qwen2", sliding_window=4, use_sliding_window=True, max_window_layers=2), None),
    (dict(model_type="qwen2", sliding_window=4, use_sliding_window=True,
          layer_types=["sliding_attention"] * 2), 4),
])
def test_sliding_window_as_transformers_reads_it(tmp_path, changes, window):
    path = _config(tmp_path, "m", **changes)
    assert model_spec(path).window == window
    assert plan(AttentionConfig(model=path)).shown.window == window
    assert plan(AttentionConfig(model=path, window=2)).shown.window == 2  # the narrower of the option and the model's


@pytest.mark.parametrize("changes", [
    dict(model_type="qwen2", layer_types=["full_attention", "sliding_attention"]),
    dict(model_type="qwen3", max_window_layers=1),  # no layer_types: from layer max_window_layers + 1 on
])
def test_a_window_in_some_layers_only_is_refused(tmp_path, changes):
    path = _config(tmp_path, "half", sliding_window=4, use_sliding_window=True, **changes)
    with pytest.raises(ConfigError, match=r"^half slides a window of 4 keys in 1 of its 2 layers \(from layer 2\); "
                                          r"attn-gui applies one window to every layer, per-layer windows not yet$"):
        plan(AttentionConfig(model=path))


@pytest.mark.parametrize("changes, base", [
    (dict(), 1e4),
    (dict(rope_theta=300.0), 300.0),
    (dict(rope_parameters={"rope_theta": 500.0, "rope_type": "default"}), 500.0),
    (dict(rope_theta=None, rope_scaling=None, rope_parameters=None), 1e4),
])
def test_rope_base_from_either_key(tmp_path, changes, base):
    assert model_spec(_config(tmp_path, "rope", **changes)).rope_base == base


@pytest.mark.parametrize("changes, kind, base", [
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}),
     "llama3", 1e4),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "linear", 1e4),  # the key before rope_type
    (dict(rope_parameters={"rope_theta": 1e6, "rope_type": "yarn", "factor": 4.0}), "yarn", 1e6),
    (dict(model_type="qwen2", rope_parameters={"rope_theta": 1e4, "rope_type": "dynamic", "factor": 2.0}), "dynamic",
     1e4),
])
def test_rope_scaling_is_read_from_either_key(tmp_path, changes, kind, base):
    # its angles against transformers: tests/engine/test_model_fields.py
    spec = model_spec(_config(tmp_path, "scaled", **changes))
    assert dict(spec.rope_scaling)["rope_type"] == kind and spec.rope_base == base


def test_missing_weights_and_truncated_file(tmp_path):
    path = _bad(tmp_path, "no weights")
    with pytest.raises(ConfigError, match="has no weights: model.safetensors is missing"):
        compute(AttentionConfig(sentence=SENTENCE, model=path))
    (tmp_path / "no weights" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\"")
    from attn_gui.engine.model.decoder import source as decoder

    with pytest.raises(ConfigError, match="the weights cannot be read"):
        decoder.load_model(path)


def test_not_a_folder(tmp_path):
    with pytest.raises(ConfigError, match="neither a bundled model, a model folder nor a .gguf file"):
        plan(AttentionConfig(model=str(tmp_path / "nowhere")))


def test_cli_takes_a_folder(folder, tmp_path, capsys):
    from attn_gui.cli import main

    path, _ = folder
    assert main(["export", "--model", path, "--sentence", "the cat sat", "--layer", "2", "--out",
                 str(tmp_path / "out")]) in (0, None)
    assert (tmp_path / "out" / "weights.npy").is_file()
    for args, message in ([path, "--layer", "3"], "has layers 1 to 2; got --layer 3"), \
                         ([str(tmp_path / "nowhere")], "is neither a bundled model, a model folder nor a .gguf file"):
        assert main(["export", "--model", *args, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


def test_fifo_and_shape_mismatch_in_one_line(tmp_path, folder):
    import os
    import shutil

    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "config.json")  # never opened: reading a FIFO would wait for a writer forever
    _tokenizer(fifo)
    with pytest.raises(ConfigError, match="has no config.json"):
        plan(AttentionConfig(model=str(fifo)))
    path, _ = folder
    wrong = tmp_path / "wrong"
    shutil.copytree(path, wrong)
    cfg = json.loads((wrong / "config.json").read_text())
    cfg["num_attention_heads"], cfg["head_dim"] = 2, 8
    cfg["num_key_value_heads"] = 2  # at most the heads (more is refused first)
    (wrong / "config.json").write_text(json.dumps(cfg))
    rows = model_spec(path).heads * model_spec(path).d_k
    with pytest.raises(ConfigError, match=rf"config.json says W_q is \(16, 32\), the weights hold \({rows}, 32\)"):
        compute(AttentionConfig(sentence=SENTENCE, model=str(wrong)))

"""A checkpoint's weights stay as stored: a bfloat16 Qwen2 folder is memory-mapped (the kernel's
map of this process names its file), runs in float32 layer by layer, and gives transformers'
alpha and logits on the same weights upcast; the memory a folder needs is read from its headers
(its size on disk, transformers' largest layer in float32) and a folder needing more than is
free is refused in one line before loading.
"""

import pytest
import torch

from attn_gui.engine import AttentionConfig, ConfigError, compute
from attn_gui.engine.model.registry import source
from attn_gui.engine.readers.catalog import model_spec
from attn_gui.engine.readers import stored
from transformers_peer import alphas_equal_transformers  # tests/

import transformers

WORDS = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(40)] + ["the", "cat", "sat", "on", "a", "mat"]
SENTENCE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def bf16(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(1)
    config = transformers.AutoConfig.for_model("qwen2", hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2, vocab_size=len(WORDS),
                                               eos_token_id=2, bos_token_id=1, tie_word_embeddings=True,
                                               max_position_embeddings=64)
    hf = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for layer in hf.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_()
    path = tmp_path_factory.mktemp("qwen2-bf16")
    hf.to(torch.bfloat16).save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path / "tokenizer.json"))
    # transformers on the same files, upcast to float32 as it loads them
    return str(path), transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                                        attn_implementation="eager").eval()


def test_a_bf16_folder_is_mapped_and_runs_in_float32_as_transformers(bf16, monkeypatch):
    from attn_gui.engine.model.decoder import source as decoder

    path, hf = bf16
    monkeypatch.setattr(stored, "ROWS", 7)  # the tied output matrix read in slices of 7 rows
    model = decoder.load_model(path)
    assert model.weights["model.layers.0.self_attn.q_proj.weight"].dtype == torch.bfloat16
    with open("/proc/self/maps") as f:
        assert f"{path}/model.safetensors" in f.read()  # mapped, not read into memory
    out, _, results = alphas_equal_transformers(path, hf, SENTENCE)
    assert all(r.weights.dtype == torch.float32 for r in results)
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    run = source(path).forward(ids, "cpu", torch.float32)
    assert torch.allclose(run.logits, out.logits[0, -1], atol=1e-4, rtol=1e-4)


def test_the_memory_needed_is_the_size_on_disk_and_the_largest_layer(bf16, tmp_path):
    from attn_gui.engine.readers.hf import weights as folders

    path, hf = bf16
    files = folders.weight_files(__import__("pathlib").Path(path))
    disk, layer = stored.need_bytes(files)
    assert disk == sum(f.stat().st_size for f in files)
    assert layer == 4 * sum(p.numel() for p in hf.model.layers[0].parameters())
    with pytest.raises(ConfigError) as refused:
        stored.check_memory("qwen2-bf16", files, free=disk + layer - 1)
    message = str(refused.value)
    assert "needs about" in message and "nothing was loaded" in message and "\n" not in message
    stored.check_memory("qwen2-bf16", files, free=disk + layer)


def test_a_folder_too_large_for_the_free_memory_is_refused_before_loading(bf16, tmp_path, monkeypatch, capsys):
    import shutil

    from attn_gui.cli import main

    path, _ = bf16
    copy = shutil.copytree(path, tmp_path / "big")
    monkeypatch.setattr(stored, "free_bytes", lambda: 1000)
    assert main(["export", "--model", str(copy), "--sentence", "the cat", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "1000" not in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_an_empty_weights_file_is_one_line(bf16, tmp_path):
    import shutil

    from attn_gui.engine.model.decoder import source as decoder

    path, _ = bf16
    copy = shutil.copytree(path, tmp_path / "empty")
    (copy / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match="the weights cannot be read"):
        decoder.load_model(str(copy))


def _three_folders(tmp_path, model_type: str, auto) -> list[str]:
    """Three tiny random checkpoints of ``model_type`` with a word-level tokenizer of WORDS."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    paths = []
    for i in range(3):
        torch.manual_seed(i)
        config = transformers.AutoConfig.for_model(model_type, hidden_size=16, intermediate_size=16,
                                                   num_hidden_layers=1, num_attention_heads=2, vocab_size=len(WORDS))
        path = tmp_path / f"{model_type}{i}"
        auto.from_config(config).save_pretrained(path)
        tok = Tokenizer(models.WordLevel({w: j for j, w in enumerate(WORDS)}, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.save(str(path / "tokenizer.json"))
        paths.append(str(path))
    return paths


def test_only_the_last_two_models_used_stay_loaded(tmp_path):
    # a third model opened unloads the least recently used: its mapped file leaves the process
    import gc


    paths = _three_folders(tmp_path, "llama", transformers.AutoModelForCausalLM)
    first = compute(AttentionConfig(sentence=SENTENCE, model=paths[0])).weights
    for path in paths[1:]:
        compute(AttentionConfig(sentence=SENTENCE, model=path))
    assert [source(p).loaded() for p in paths] == [False, True, True]
    gc.collect()
    with open("/proc/self/maps") as f:
        maps = f.read()
    assert f"{paths[0]}/model.safetensors" not in maps and f"{paths[2]}/model.safetensors" in maps
    assert torch.equal(compute(AttentionConfig(sentence=SENTENCE, model=paths[0])).weights, first)  # read again
    assert [source(p).loaded() for p in paths] == [True, False, True]


def test_an_encoder_pushed_out_of_memory_is_read_again_for_its_weights(tmp_path):
    # another thread may load two more encoders between a forward's model() and its weights:
    # the weights then come from the folder again, equal to the first read (no KeyError)

    from attn_gui.engine.model.encoder import source as encoder

    paths = _three_folders(tmp_path, "bert", transformers.AutoModel)
    first = source(paths[0])
    before = first.layer_weights(0, torch.device("cpu"), torch.float32).w_q.clone()
    for path in paths[1:]:
        compute(AttentionConfig(sentence=SENTENCE, model=path))
    assert not first.loaded()
    encoder.weights_on(first, "cpu", torch.float32)  # it read _loaded[name]: a KeyError here
    assert first.loaded()
    assert torch.equal(first.layer_weights(0, torch.device("cpu"), torch.float32).w_q, before)


def _forward_equals_transformers(path: str, hf) -> None:
    """Every layer's α and the last logits of a forward on ``path`` equal transformers' on the same files."""
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    with torch.no_grad():
        out = hf(ids[None], output_attentions=True)
    for _ in range(2):  # the first forward converts (and keeps what fits), the second reads what was kept
        run = source(path).forward(ids, "cpu", torch.float32)
        for layer, attention in enumerate(out.attentions):
            assert torch.allclose(run.weights[layer], attention[0], atol=1e-5, rtol=0), layer
        assert torch.allclose(run.logits, out.logits[0, -1], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("free", ["all", "half", "none"])
def test_converted_weights_are_kept_as_memory_allows_and_equal_transformers(bf16, monkeypatch, free):
    # "all": every bfloat16 weight kept in float32 after the first forward; "none" (a small free-memory
    # figure): each converted as its layer reads it and dropped; "half": kept until the budget ends
    from attn_gui.engine.model.decoder import source as decoder

    path, hf = bf16
    model = decoder.load_model(path)  # loaded before the free memory shrinks (a folder needing more is refused)
    f32 = sum(4 * t.numel() for t in model.weights.values())
    figure = {"all": 2 * f32 + 2**20, "half": f32, "none": 100}[free]  # the budget is half of what is free
    monkeypatch.setattr(stored, "free_bytes", lambda: figure)
    decoder._weights_on.cache_clear()
    _forward_equals_transformers(path, hf)
    w = decoder.weights_on(model.spec, "cpu", torch.float32)  # the forward's own, kept while the weights hold
    assert isinstance(w, stored.Upcast)
    kept = sum(t.nbytes for t in w.kept.values())
    assert all(t.dtype == torch.float32 for t in w.kept.values()) and kept <= figure // 2
    assert {"all": len(w.kept) == len(model.weights), "half": 0 < len(w.kept) < len(model.weights),
            "none": not w.kept}[free]
    decoder._weights_on.cache_clear()


def test_a_bf16_folder_multiplies_as_stored_in_bfloat16_within_1e_3_of_transformers(bf16):
    """dtype bfloat16: the matmuls read the mapped bfloat16 weights as they are (x rounded to bfloat16, the sums
    float32, each product rounded to bfloat16), nothing converted to float32 is kept, and every layer's α stays within
    1e-3 of transformers' float32 forward on the same weights (measured 2.6e-4), the logits within 1 % (0.3 %)."""
    from attn_gui.engine.model.decoder import source as decoder

    path, hf = bf16
    out, _, _ = alphas_equal_transformers(path, hf, SENTENCE, atol=1e-3, dtype="bfloat16")
    ids = torch.tensor(source(path).tokenize(SENTENCE).token_ids)
    run = source(path).forward(ids, "cpu", torch.bfloat16)
    assert (run.logits - out.logits[0, -1]).abs().max() <= 0.01 * out.logits[0, -1].abs().max()
    w = decoder.weights_on(model_spec(path), "cpu", torch.bfloat16)
    assert isinstance(w, stored.Upcast) and w.matmul == torch.bfloat16 and not w.kept

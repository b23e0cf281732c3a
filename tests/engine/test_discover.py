"""The models already on disk (``engine.readers.discover``): fake Hugging Face cache, Ollama and LM Studio
layouts made here, with tiny checkpoints saved by transformers and GGUF files written as llama.cpp writes
them. Sizes are checked against ``os.stat`` of the blobs, families against the model_type transformers
saved and the architecture the GGUF declares, reasons against the refusal opening the path gives."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir  # the peer of the Hugging Face cache's layout (with transformers)

from attn_gui.engine.base.errors import ConfigError
from attn_gui.engine.readers.catalog import model_spec
from attn_gui.engine.readers.discover import MAX_ENTRIES, discover

pytest.importorskip("gguf")  # installed with attn-gui[models], which the test extra includes

from disk_models import MAIN, OLD, blobs_size, empty_home, hf_snapshot, model_layer, ollama_blob, ollama_manifest  # noqa: E402
from gguf_writing import byte_level_vocab, tiny, write_gguf  # noqa: E402
from tiny_decoders import SENTENCE, tiny_decoder  # noqa: E402
from transformers_peer import alphas_equal_transformers  # noqa: E402

def refusal_whole(path: str) -> str:
    """What opening ``path`` in the window says (``model_whole``: the weights read too)."""
    from attn_gui.engine.model.whole import model_whole

    with pytest.raises(ConfigError) as caught:
        model_whole(path)
    return str(caught.value)


def refusal(path: str) -> str:
    with pytest.raises(ConfigError) as caught:
        model_spec(path)
    return str(caught.value)


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    """A tiny Qwen2 and a tiny Llama as .gguf files, and a file that is not a GGUF."""
    folder = tmp_path_factory.mktemp("ggufs")
    vocab = len(byte_level_vocab()[0])
    qwen2 = Path(write_gguf(folder / "qwen2-tiny.gguf", tiny("qwen2", vocab, seed=3), "qwen2", "qwen2", "Tiny Qwen2"))
    llama = Path(write_gguf(folder / "llama-tiny.gguf", tiny("llama", vocab, seed=4), "llama", "llama", "Tiny Llama"))
    falcon = Path(write_gguf(folder / "falcon-tiny.gguf", tiny("llama", vocab, seed=5), "falcon", "llama",
                             "Tiny Falcon"))  # an architecture not read here
    (folder / "junk.gguf").write_bytes(b"not a model at all")
    return {"qwen2": qwen2, "llama": llama, "falcon": falcon, "junk": folder / "junk.gguf"}


@pytest.fixture
def home(tmp_path, monkeypatch):
    return empty_home(tmp_path, monkeypatch)


def test_the_hugging_face_cache(home, tmp_path, monkeypatch, ggufs):
    hub = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    saved = tmp_path / "saved"
    saved.mkdir()
    hf = tiny_decoder("llama", saved)
    (saved / "model.safetensors").unlink()
    hf.save_pretrained(saved, max_shard_size="40KB")  # shards and their index, each a blob in the cache
    assert len(list(saved.glob("model-*-of-*.safetensors"))) > 1
    current = hf_snapshot(hub, "org/tiny-llama", saved)
    (tmp_path / "old").mkdir()
    tiny_decoder("qwen2", tmp_path / "old")
    older = hf_snapshot(hub, "org/tiny-llama", tmp_path / "old", revision=OLD, main=False)
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text('{"model_type": "t5", "d_model": 32}')
    (tmp_path / "t5" / "tokenizer.json").write_text("{}")
    t5 = hf_snapshot(hub, "google/tiny-t5", tmp_path / "t5")
    (tmp_path / "quants").mkdir()
    shutil.copy(ggufs["qwen2"], tmp_path / "quants" / "qwen2-tiny-f32.gguf")
    quants = hf_snapshot(hub, "someone/qwen2-tiny-GGUF", tmp_path / "quants")
    (hub / "datasets--org--words" / "snapshots" / MAIN).mkdir(parents=True)  # not a model: never listed

    found = {f.name: f for f in discover().found}
    assert set(found) == {"org/tiny-llama", f"org/tiny-llama@{OLD[:8]}", "google/tiny-t5",
                          "someone/qwen2-tiny-GGUF/qwen2-tiny-f32.gguf"}
    llama = found["org/tiny-llama"]
    assert (llama.where, llama.path, llama.opens, llama.reason) == ("Hugging Face", str(current), str(current), "")
    assert llama.size == blobs_size(current)
    assert hf.config.model_type == "llama" and llama.family == "Llama"
    spec = model_spec(llama.opens)
    assert spec.layers == hf.config.num_hidden_layers and spec.label.startswith("org/tiny-llama (Llama")
    alphas_equal_transformers(llama.opens, hf, SENTENCE)  # the listed path opens the model, shards and all
    qwen2 = found[f"org/tiny-llama@{OLD[:8]}"]
    assert (qwen2.path, qwen2.family, qwen2.size) == (str(older), "Qwen2", blobs_size(older))
    t5_entry = found["google/tiny-t5"]
    assert t5_entry.family == "t5" and not t5_entry.supported
    assert t5_entry.reason == refusal(str(t5)).replace(MAIN, "google/tiny-t5")
    assert t5_entry.reason.startswith("google/tiny-t5 is a 't5' model; supported model_types: llama")
    peer = {}  # huggingface_hub's own scan of its cache: each revision's size on disk, blobs counted once
    for repo in scan_cache_dir(hub).repos:
        for revision in repo.revisions if repo.repo_type == "model" else ():
            shown = repo.repo_id if "main" in revision.refs else f"{repo.repo_id}@{revision.commit_hash[:8]}"
            peer[shown] = revision.size_on_disk
    mine = {}
    for f in found.values():  # a repository of GGUF files is listed file by file
        shown = f.name.rsplit("/", 1)[0] if f.name.endswith(".gguf") else f.name
        mine[shown] = mine.get(shown, 0) + f.size
    assert mine == peer
    gguf_entry = found["someone/qwen2-tiny-GGUF/qwen2-tiny-f32.gguf"]
    assert gguf_entry.family == "Qwen2" and gguf_entry.supported
    assert gguf_entry.size == os.stat(ggufs["qwen2"]).st_size == os.stat(quants / "qwen2-tiny-f32.gguf").st_size


@pytest.mark.parametrize("variables", [{}, {"XDG_CACHE_HOME": "xdg"}, {"HF_HOME": "home", "XDG_CACHE_HOME": "xdg"},
                                       {"HUGGINGFACE_HUB_CACHE": "old", "HF_HOME": "home"},
                                       {"HF_HUB_CACHE": "hub", "HUGGINGFACE_HUB_CACHE": "old", "HF_HOME": "home"}])
def test_the_hugging_face_cache_is_where_huggingface_hub_looks(home, tmp_path, variables):
    env = {key: v for key, v in os.environ.items() if key not in ("XDG_CACHE_HOME", "HUGGINGFACE_HUB_CACHE")}
    env.update({key: str(tmp_path / v) for key, v in variables.items()})
    peer = subprocess.run([sys.executable, "-c", "import huggingface_hub.constants as c; print(c.HF_HUB_CACHE)"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert discover(env).looked[0] == peer


def test_ollama_models_by_manifest_name(home, tmp_path, monkeypatch, ggufs):
    models = home / ".ollama" / "models"
    digest, blob = ollama_blob(models, ggufs["qwen2"])
    ollama_manifest(models, "qwen2-tiny", "latest", [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64, "size": 1},
        model_layer(digest)])
    junk_digest, junk = ollama_blob(models, ggufs["junk"])
    ollama_manifest(models, "junk", "7b", [model_layer(junk_digest)], namespace="someone")
    links = tmp_path / "links"

    found = {f.name: f for f in discover(links=links).found}
    assert set(found) == {"qwen2-tiny:latest", "someone/junk:7b"}
    qwen2 = found["qwen2-tiny:latest"]
    assert (qwen2.where, qwen2.path, qwen2.family, qwen2.reason) == ("Ollama", str(blob), "Qwen2", "")
    assert qwen2.size == os.stat(blob).st_size
    assert qwen2.opens == str(links / "qwen2-tiny-latest.gguf") and os.path.realpath(qwen2.opens) == str(blob)
    spec = model_spec(qwen2.opens)
    assert spec.layers == 2 and spec.label == "qwen2-tiny-latest.gguf (Qwen2 decoder, GGUF)"
    bad = found["someone/junk:7b"]
    assert bad.size == os.stat(junk).st_size and bad.family == ""
    assert bad.reason == refusal(bad.opens) == "someone-junk-7b.gguf is not a readable GGUF file: it does not " \
                                               "start with GGUF"
    assert discover(links=links).found == tuple(sorted(found.values(), key=lambda f: f.name.lower()))  # links kept

    ollama_manifest(models, "qwen2-tiny", "latest", [model_layer(junk_digest)])  # the tag pulled again
    moved = {f.name: f for f in discover(links=links).found}["qwen2-tiny:latest"]
    assert os.path.realpath(moved.opens) == str(junk) and moved.size == os.stat(junk).st_size


def test_ollama_models_folder_from_its_variable(home, tmp_path, monkeypatch, ggufs):
    models = tmp_path / "ollama"
    monkeypatch.setenv("OLLAMA_MODELS", str(models))
    digest, blob = ollama_blob(models, ggufs["llama"])
    ollama_manifest(models, "llama-tiny", "q8", [model_layer(digest)])
    (found,) = discover(links=tmp_path / "links").found
    assert (found.name, found.family, found.size, found.reason) == ("llama-tiny:q8", "Llama", os.stat(blob).st_size, "")


def test_the_ollama_service_folder_too(home, tmp_path, monkeypatch, ggufs):
    service = tmp_path / "usr-share-ollama" / "models"
    monkeypatch.setattr("attn_gui.engine.readers.discover.SYSTEM_OLLAMA", service)
    digest, blob = ollama_blob(service, ggufs["llama"])
    ollama_manifest(service, "llama-tiny", "latest", [model_layer(digest)])
    result = discover(links=tmp_path / "links")
    assert result.places[1:3] == ("Ollama", "Ollama (its Linux service)") and result.looked[2] == str(service)
    assert [(f.name, f.path, f.family, f.reason) for f in result.found] == [
        ("llama-tiny:latest", str(blob), "Llama", "")]
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "mine"))  # Ollama reads that folder alone, and so here
    assert discover(links=tmp_path / "links").looked[1:3] == (str(tmp_path / "mine"), str(home / ".lmstudio/models"))


def test_lm_studio_folders(home, ggufs):
    new = home / ".lmstudio" / "models" / "publisher" / "repo-GGUF"
    old = home / ".cache" / "lm-studio" / "models" / "other" / "llama-GGUF"
    new.mkdir(parents=True)
    old.mkdir(parents=True)
    shutil.copy(ggufs["qwen2"], new / "qwen2-tiny-Q8_0.gguf")
    shutil.copy(ggufs["llama"], old / "llama-tiny.gguf")
    shutil.copy(ggufs["falcon"], new / "falcon-tiny.gguf")
    (new / "README.md").write_text("not a model")

    found = discover().found
    falcon = refusal(str(new / "falcon-tiny.gguf"))
    assert falcon.startswith("falcon-tiny.gguf is a 'falcon' GGUF; supported architectures: llama (Llama, Mistral")
    assert [(f.where, f.name, f.family, f.reason) for f in found] == [
        ("LM Studio", "publisher/repo-GGUF/falcon-tiny.gguf", "falcon", falcon),
        ("LM Studio", "publisher/repo-GGUF/qwen2-tiny-Q8_0.gguf", "Qwen2", ""),
        ("LM Studio", "other/llama-GGUF/llama-tiny.gguf", "Llama", "")]
    assert [f.size for f in found] == [os.stat(ggufs[k]).st_size for k in ("falcon", "qwen2", "llama")]


def test_a_hostile_layout_is_listed_with_its_reasons(home, tmp_path, ggufs):
    models = home / ".ollama" / "models"
    ollama_manifest(models, "notjson", "latest", "{this is not json")
    ollama_manifest(models, "escape", "latest", [{"mediaType": "application/vnd.ollama.image.model",
                                                  "digest": "sha256:../../../../etc/passwd"}])
    ollama_manifest(models, "gone", "latest", [model_layer("a" * 64)])
    (models / "blobs" / f"sha256-{'b' * 64}").parent.mkdir(parents=True, exist_ok=True)
    os.symlink(f"sha256-{'b' * 64}", models / "blobs" / f"sha256-{'b' * 64}")  # a link to itself
    ollama_manifest(models, "loop", "latest", [model_layer("b" * 64)])
    ollama_manifest(models, "nolayer", "latest", [])
    ollama_manifest(models, "huge", "latest", " " * (2**20 + 1))
    os.symlink(models / "manifests", models / "manifests" / "registry.ollama.ai" / "library" / "around")
    hub = home / ".cache" / "huggingface" / "hub"
    (tmp_path / "dangling").mkdir()
    tiny_decoder("llama", tmp_path / "dangling")
    snapshot = hf_snapshot(hub, "org/half", tmp_path / "dangling")
    (hub / "models--org--half" / "blobs" / os.readlink(snapshot / "model.safetensors").split("/")[-1]).unlink()
    os.symlink("..", snapshot / "up")  # a loop: never walked
    studio = home / ".lmstudio" / "models" / "pub" / "repo"
    studio.mkdir(parents=True)
    os.symlink("missing.gguf", studio / "dangling.gguf")
    os.mkfifo(studio / "fifo.gguf")

    found = {f.name: f for f in discover(links=tmp_path / "links").found}
    reasons = {name: f.reason for name, f in found.items()}
    assert reasons["notjson:latest"].startswith("its manifest is not JSON: Expecting property name")
    assert reasons["escape:latest"] == "its manifest names the model's blob 'sha256:../../../../etc/passwd', " \
                                       "not sha256:HEX"
    assert reasons["gone:latest"] == f"its blob sha256-{'a' * 12}… is missing"
    assert reasons["loop:latest"].startswith(f"its blob sha256-{'b' * 12}… is not a regular file")
    assert reasons["huge:latest"] == "its manifest is 1,048,577 bytes, more than a manifest's 1,048,576"
    assert reasons["nolayer:latest"] == "its manifest has no model layer (application/vnd.ollama.image.model)"
    assert reasons["org/half"] == refusal_whole(str(snapshot)).replace(MAIN, "org/half") == \
        "org/half has no weights: model.safetensors is missing"
    assert found["org/half"].family == "Llama"
    assert reasons["pub/repo/dangling.gguf"].startswith("dangling.gguf cannot be read:")
    assert reasons["pub/repo/fifo.gguf"] == refusal(str(studio / "fifo.gguf"))
    assert len(found) == 9 and all(f.reason for f in found.values())


def test_nothing_found_says_where_it_looked(home):
    result = discover()
    assert result.found == ()
    assert result.looked == (str(home / ".cache/huggingface/hub"), str(home / ".ollama/models"),
                             str(home / ".lmstudio/models"), str(home / ".cache/lm-studio/models"))


def test_a_place_with_more_than_the_bound_lists_the_bound(home, monkeypatch):
    monkeypatch.setattr("attn_gui.engine.readers.discover.MAX_ENTRIES", 3)
    for i in range(5):
        (home / ".lmstudio" / "models" / "pub" / f"repo{i}").mkdir(parents=True)
        (home / ".lmstudio" / "models" / "pub" / f"repo{i}" / "x.gguf").write_bytes(b"GGUF")
    assert len(discover().found) == 3 < 5 and MAX_ENTRIES > 3

"""Models laid out on disk as the Hugging Face cache, Ollama and LM Studio lay them out
(``tests/engine/test_discover.py``, ``tests/test_cli_models.py``, ``tests/ui/test_models_dialog.py``)."""

import hashlib
import json
import os
import shutil
from pathlib import Path

MAIN = "1" * 40  # the commit refs/main names
OLD = "2" * 40


def hf_snapshot(hub: Path, repo: str, files: Path, revision: str = MAIN, main: bool = True) -> Path:
    """``files`` moved into Hugging Face's cache as huggingface_hub lays it out: each file a blob named by
    its sha256, linked from ``snapshots/REV/NAME`` as ``../../blobs/HASH``; refs/main names ``revision``."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir(exist_ok=True)
    for file in sorted(files.iterdir()):
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.move(file, folder / "blobs" / digest)
        os.symlink(f"../../blobs/{digest}", snapshot / file.name)
    if main:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text(revision)
    return snapshot


def blobs_size(snapshot: Path) -> int:
    return sum(os.stat(f).st_size for f in snapshot.iterdir())


def ollama_manifest(models: Path, name: str, tag: str, layers: list | str, namespace: str = "library") -> Path:
    manifest = models / "manifests" / "registry.ollama.ai" / namespace / name / tag
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(layers if isinstance(layers, str) else json.dumps({"schemaVersion": 2, "layers": layers}))
    return manifest


def ollama_blob(models: Path, gguf: Path) -> tuple[str, Path]:
    data = gguf.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    (models / "blobs").mkdir(parents=True, exist_ok=True)
    blob = models / "blobs" / f"sha256-{digest}"
    blob.write_bytes(data)
    return digest, blob


def model_layer(digest: str) -> dict:
    return {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": 1}


def empty_home(tmp_path: Path, monkeypatch) -> Path:
    """An empty home folder; the variables of every place point into it or are unset."""
    for key in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "OLLAMA_MODELS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr("attn_gui.engine.readers.discover.SYSTEM_OLLAMA", tmp_path / "no-ollama-service")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home

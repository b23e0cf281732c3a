"""`attn-gui models` prints the models found on disk (``engine.readers.discover``): one row each, the same
list as JSON with --json, the folders looked in when there is none; bad flags are one line and exit 2."""

import json
import os
import shutil

import pytest

from attn_gui.cli import main
from attn_gui.engine.readers.catalog import model_spec

pytest.importorskip("gguf")  # installed with attn-gui[models], which the test extra includes

from disk_models import empty_home, ollama_manifest  # noqa: E402


@pytest.fixture
def home(tmp_path, monkeypatch):
    return empty_home(tmp_path, monkeypatch)


def test_models_prints_one_row_a_model(home, capsys, qwen2_gguf):
    path, hf = qwen2_gguf
    studio = home / ".lmstudio" / "models" / "someone" / "qwen2-tiny-GGUF"
    studio.mkdir(parents=True)
    shutil.copy(path, studio / "qwen2-tiny.gguf")
    ollama_manifest(home / ".ollama" / "models", "broken", "latest", "not json")

    assert main(["models"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "" and out[3] == "2 models, 1 can be opened (--model PATH)"
    assert out[5] == "Bundled with attn-gui (--model NAME):"  # then the bundled (tests/test_cli_first_hour.py)
    assert out[0].split(maxsplit=1)[0] == "Ollama" and "broken:latest" in out[0]
    assert out[0].endswith("cannot open: its manifest is not JSON: Expecting value: line 1 column 1 (char 0)")
    kib = os.stat(path).st_size / 1024
    assert out[1].split() == ["LM", "Studio", "someone/qwen2-tiny-GGUF/qwen2-tiny.gguf", f"{kib:.1f}", "KiB",
                              "Qwen2", str(studio / "qwen2-tiny.gguf")]
    assert hf.config.model_type == "qwen2" and model_spec(str(studio / "qwen2-tiny.gguf")).layers == 2

    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["looked"][1] == str(home / ".ollama" / "models")
    assert [(m["name"], m["size"], m["family"], m["supported"]) for m in listed["models"]] == [
        ("broken:latest", None, "", False),
        ("someone/qwen2-tiny-GGUF/qwen2-tiny.gguf", os.stat(path).st_size, "Qwen2", True)]


def test_nothing_found_says_where_it_looked(home, capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"No other models found; looked in {home}/.cache/huggingface/hub, {home}/.ollama/models, "
                          f"{home}/.lmstudio/models, {home}/.cache/lm-studio/models\n")


def test_a_wrong_flag_is_one_line_and_exit_2(home, capsys):
    assert main(["models", "--jso"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized arguments: --jso" in err

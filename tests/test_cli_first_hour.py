"""The CLI as docs/cli.md shows it (issue 62): a command that ran on the default sentence says which sentence it
was; ``attn-gui models`` lists the bundled models beside the files it found."""

import json

import pytest

from attn_gui.cli import main
from attn_gui.engine import MODELS, AttentionConfig
from attn_gui.engine.model.registry import is_available
from disk_models import empty_home  # tests/
from tiny_decoders import SENTENCE, tiny_decoder  # tests/

DEFAULT = AttentionConfig().sentence  # what a command without --sentence runs on


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path)


def test_generate_and_attribute_name_the_default_sentence_they_ran_on(llama, tmp_path, capsys):
    assert main(["generate", "--model", llama, "--steps", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"sentence: {DEFAULT!r} (no --sentence given)" and lines[-1].startswith(DEFAULT)
    assert main(["attribute", "--model", llama, "--token", "mat", "--out", str(tmp_path / "why")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"sentence: {DEFAULT!r} (no --sentence given)"
    assert main(["generate", "--model", llama, "--sentence", SENTENCE, "--steps", "1"]) == 0
    assert "sentence:" not in capsys.readouterr().out  # the person's own sentence: nothing to say


def test_models_lists_the_bundled_models_installed_or_not(tmp_path, monkeypatch, capsys):
    home = empty_home(tmp_path, monkeypatch)
    assert main(["models"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"No other models found; looked in {home}/.cache/huggingface/hub")
    assert out[2] == "Bundled with attn-gui (--model NAME):"
    rows = {line.split()[0]: line for line in out[3:]}
    assert set(rows) == set(MODELS)
    for name, spec in MODELS.items():  # the registry's own answer, not the CLI's
        assert spec.label in rows[name]
        assert rows[name].endswith("  installed") == is_available(name), rows[name]
    assert main(["models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["bundled"]
    assert {m["name"]: m["installed"] for m in listed} == {name: is_available(name) for name in MODELS}

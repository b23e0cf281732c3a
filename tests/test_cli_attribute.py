"""``attn-gui attribute``: the files it writes (their numbers are the engine's, checked against transformers in
tests/engine/test_attribution.py), all or nothing, and bad input as one line with exit 2."""

import csv

import pytest

from attn_gui.cli import main
from tiny_decoders import SENTENCE, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path)


def test_attribute_writes_the_components_the_grid_and_its_picture(llama, tmp_path, capsys):
    out = tmp_path / "why"
    assert main(["attribute", "--model", llama, "--sentence", SENTENCE, "--token", "mat", "--against", "cat",
                 "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["components.csv", "dla.png", "heads.csv"]
    lines = (out / "components.csv").read_text(encoding="utf-8").splitlines()
    assert 'logit("mat") - logit("cat")' in lines[0]
    rows = list(csv.DictReader(lines[1:]))
    total = float(rows[-1]["term"])
    assert sum(float(r["term"]) for r in rows[:-1]) == pytest.approx(total, abs=1e-5)
    grid = list(csv.reader((out / "heads.csv").read_text(encoding="utf-8").splitlines()[1:]))
    assert len(grid) == 3 and len(grid[1]) == 5  # header, 2 layers; layer, 4 heads
    heads = {r["component"]: float(r["term"]) for r in rows}
    assert float(grid[2][3]) == pytest.approx(heads["L2H3"], abs=1e-6)
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--token", "cat mat"], "not one token"),
    (["--token", "mat", "--against", "mat"], "the same token"),
    (["--token", "mat", "--ablate", "9.1"], "9.1"),
])
def test_bad_attribute_input_is_one_line_exit_2_and_writes_nothing(llama, tmp_path, capsys, extra, message):
    out = tmp_path / "why"
    assert main(["attribute", "--model", llama, "--sentence", SENTENCE, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_attribute_refuses_an_encoder(tmp_path, capsys):
    assert main(["attribute", "--model", "minilm-l6", "--token", "x", "--out", str(tmp_path / "o")]) == 2
    assert "decoder model" in capsys.readouterr().err

"""``attn-gui circuit --gradient-at clean|corrupted`` (issue 57): where EAP takes its gradient, said in the help, the
printed line and the manifest; the scores at the corrupted point are checked against autograd and TransformerLens in
tests/engine/test_eap_gradient_at.py. Here: the flag reaches the engine and the files say which."""

import csv
import json

import pytest

from attn_gui.cli import build_parser, main
from attn_gui.engine.analysis.circuits import circuit
from tiny_decoders import circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path), circuit_pairs(path)


@pytest.mark.parametrize("at", ["clean", "corrupted"])
def test_the_gradient_point_is_used_and_said(llama, tmp_path, capsys, at):
    model, pairs = llama
    out = tmp_path / at
    args = ["circuit", "--model", model, "--task", pairs, "--no-faithfulness", "--out", str(out)]
    assert main([*args, *(["--gradient-at", at] if at == "corrupted" else [])]) == 0  # clean: the default
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["circuit"]["gradient_at"] == at
    assert f"(gradient at the {at} prompt)" in capsys.readouterr().out
    engine = circuit(model, pairs, "eap", faithful=False, gradient_at=at)
    rows = list(csv.DictReader((out / "edges.csv").read_text(encoding="utf-8").splitlines()))
    top = rows[0]
    assert float(top["score"]) == pytest.approx(engine.top(1)[0][2], rel=1e-6)


def test_the_help_names_both_points():
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    text = sub.choices["circuit"].format_help()
    assert "--gradient-at {clean,corrupted}" in text and "TransformerLens" in " ".join(text.split())


@pytest.mark.parametrize("extra, message", [
    (["--gradient-at", "middle"], "invalid choice"),
    (["--gradient-at", "corrupted", "--method", "eap-ig"], "the gradient point is EAP's"),
])
def test_a_bad_gradient_point_is_one_line_exit_2(llama, tmp_path, capsys, extra, message):
    model, pairs = llama
    out = tmp_path / "c"
    assert main(["circuit", "--model", model, "--task", pairs, "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in err and "Traceback" not in err
    assert not out.exists()


"""``attn-gui circuit`` says the faithfulness curve's cost once its first point is measured, and its progress counts
the curve's points (issue 63); the curve itself is checked against the dense patched runs in
tests/engine/test_circuits_curve.py."""

import re

import pytest

from attn_gui.cli import main
from attn_gui.engine.analysis.circuits import circuit
from tiny_decoders import circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path), circuit_pairs(path)


def test_the_curve_says_its_cost_and_counts_its_points(llama, tmp_path, capsys):
    model, pairs = llama  # routes: on this model EAP's first edge alone (into the logits) recovers 80 %
    assert main(["circuit", "--model", model, "--task", pairs, "--method", "routes", "--out", str(tmp_path / "c")]) == 0
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if "the faithfulness curve: about" in line]
    assert len(said) == 1 and said[0].endswith("--no-faithfulness skips it")
    points = [tuple(map(int, m.groups())) for line in err
              if (m := re.search(r"faithfulness points (\d+) of (\d+)", line))]
    found = circuit(model, pairs, "routes")
    assert found.faithfulness is not None and points[-1][0] == points[-1][1] >= len(found.faithfulness.ks)
    later = re.search(r"\(about (\d+) more points\)", said[0])  # the search for the smallest circuit at its longest
    assert later is not None and int(later.group(1)) >= 1


def test_a_curve_that_runs_no_layer_says_no_cost(llama, tmp_path, capsys):
    model, pairs = llama
    found = circuit(model, pairs, "eap")
    f = found.faithfulness  # k = 0, every edge and the first edge (into the logits) run the metric alone
    assert f is not None and f.smallest == 1 and f.ks == (0, 1, found.graph.n_edges)
    assert main(["circuit", "--model", model, "--task", pairs, "--out", str(tmp_path / "c")]) == 0
    assert "the faithfulness curve: about" not in capsys.readouterr().err

"""``attn-gui circuit``: the files it writes (the scores are the engine's, checked against transformers and a
decomposed forward in tests/engine/test_circuits.py), all or nothing, progress on stderr, and bad input as one line
with exit 2."""

import csv
import json

import pytest

from attn_gui.cli import main
from tiny_decoders import circuit_pairs, tiny_decoder  # tests/


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path), circuit_pairs(path)


def _rows(path):
    return list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))


def test_circuit_writes_the_edges_nodes_graph_and_curve(llama, tmp_path, capsys):
    model, pairs = llama
    out = tmp_path / "c"
    assert main(["circuit", "--model", model, "--task", pairs, "--method", "eap", "--out", str(out)]) == 0
    names = ["edges.csv", "faithfulness.csv", "faithfulness.png", "faithfulness.svg", "graph.png", "graph.svg",
             "manifest.json", "nodes.csv"]
    assert sorted(p.name for p in out.iterdir()) == names
    edges = _rows(out / "edges.csv")
    manifest = json.loads((out / "manifest.json").read_text())
    # 2 layers of 4 query heads, 2 key/value heads: layer 1's 8 head inputs read the embedding (8), its MLP also
    # its 4 heads (5), layer 2's head inputs the 6 writers below (48), its MLP 10, the logits all 11 writers
    assert len(edges) == manifest["circuit"]["edges"] == 8 + 5 + 48 + 10 + 11
    scores = [abs(float(e["score"])) for e in edges]
    assert scores == sorted(scores, reverse=True) and [int(e["rank"]) for e in edges] == list(range(1, len(edges) + 1))
    # a writer's node score is the sum of its edges' (attribution patching of the node)
    nodes = {r["writer"]: float(r["score"]) for r in _rows(out / "nodes.csv")}
    for writer, value in nodes.items():
        assert sum(float(e["score"]) for e in edges if e["writer"] == writer) == pytest.approx(value, abs=1e-6)
    curve = _rows(out / "faithfulness.csv")
    assert float(curve[0]["recovered"]) == pytest.approx(0.0, abs=1e-5)  # no edge kept: the corrupted metric
    assert int(curve[-1]["k"]) == len(edges) and float(curve[-1]["recovered"]) == pytest.approx(1.0, abs=1e-5)
    assert (out / "graph.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (out / "graph.svg").read_text()
    captured = capsys.readouterr()
    assert "wrote" in captured.out and "attn-gui circuit: EAP" in captured.err
    # run again into its own export: replaced whole
    assert main(["circuit", "--model", model, "--task", pairs, "--method", "routes", "--no-faithfulness",
                 "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["edges.csv", "graph.png", "graph.svg", "manifest.json",
                                                     "nodes.csv"]


def test_parquet_edges_equal_the_csv(llama, tmp_path):
    pyarrow = pytest.importorskip("pyarrow.parquet")
    model, pairs = llama
    args = ["circuit", "--model", model, "--task", pairs, "--no-faithfulness"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--format", "parquet", "--out", str(tmp_path / "b")]) == 0
    table = pyarrow.read_table(tmp_path / "b" / "edges.parquet").to_pylist()
    rows = _rows(tmp_path / "a" / "edges.csv")
    assert [(r["writer"], r["reader"]) for r in table] == [(r["writer"], r["reader"]) for r in rows]
    assert [r["score"] for r in table] == pytest.approx([float(r["score"]) for r in rows], rel=1e-8, abs=1e-12)


@pytest.mark.parametrize("extra, message", [
    (["--task", "nope"], "--task must be one of"),
    (["--pairs", "0"], "--pairs must be 1 to 10000"),
    (["--steps", "0", "--method", "eap-ig"], "--steps must be 1 to 100"),
    (["--model", "minilm-l6"], "decoder"),
    (["--metric", "logit-diff", "--task", "NOWRONG"], "needs a wrong answer in every pair"),
    (["--task", "SHORT"], "line 1: the clean prompt has 2 tokens"),
])
def test_bad_circuit_input_is_one_line_exit_2_and_writes_nothing(llama, tmp_path, capsys, extra, message):
    model, pairs = llama
    out = tmp_path / "c"
    files = {"NOWRONG": '{"clean": "the cat", "corrupt": "the dog", "answer": "sat"}\n',
             "SHORT": '{"clean": "the cat", "corrupt": "the cat sat", "answer": "ran"}\n'}
    for name, text in files.items():
        if name in extra:
            (tmp_path / f"{name}.jsonl").write_text(text)
            extra = [str(tmp_path / f"{name}.jsonl") if e == name else e for e in extra]
    args = ["circuit", "--model", model, "--task", pairs, "--out", str(out), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_a_folder_of_other_files_is_refused_before_the_compute(llama, tmp_path, capsys):
    model, pairs = llama
    (tmp_path / "mine.txt").write_text("keep")
    assert main(["circuit", "--model", model, "--task", pairs, "--out", str(tmp_path)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_a_failed_write_leaves_nothing(llama, tmp_path, monkeypatch, capsys):
    from attn_gui.export import circuits

    model, pairs = llama

    def broken(svg, path):
        raise OSError("disk full")
    monkeypatch.setattr(circuits, "svg_png", broken)
    assert main(["circuit", "--model", model, "--task", pairs, "--no-faithfulness", "--out", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.strip().endswith("disk full; nothing was changed there")  # one line (issue 61)
    assert list(tmp_path.iterdir()) == []

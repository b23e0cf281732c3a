"""``attn-gui lens fit`` and ``lens read`` (issue 60): a fit writes lens.pt (TransformerLens' artifact, read with
``weights_only=True``) and its manifest, a second run over the same folder resumes every shard, and the read prints
both lenses' grids whose top token and p are ``read_lens``'s; bad input (a folder holding other files, layers the
model has not, no position left, a lens of another model, a missing lens, an empty sentence) prints one line and
exits 2."""

from __future__ import annotations

import json

import pytest
import torch

from attn_gui.cli import main
from attn_gui.engine import AttentionConfig
from attn_gui.engine.analysis.lens.artifact import load
from attn_gui.engine.analysis.lens.readout import read_lens
from lens_bridges import tiny_folder  # tests/

PASSAGES = ["the cat sat on a mat and the dog ran w1 w2 w3", "a dog ran on the mat w4 w5 w6 and the cat sat",
            "w1 w2", "the mat the cat the dog sat ran on w12 w13 w14"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lens")
    tiny_folder("llama", root / "model", layers=3)
    tiny_folder("gpt2", root / "other", layers=3)
    (root / "corpus.txt").write_text("\n".join(PASSAGES) + "\n")
    return root


def _fit(inputs, out, *more) -> int:
    return main(["lens", "fit", "--model", str(inputs / "model"), "--corpus", str(inputs / "corpus.txt"), "--out",
                 str(out), "--skip-first", "3", "--shard-size", "2", *map(str, more)])


def test_fit_then_read(inputs, tmp_path, capsys):
    assert _fit(inputs, tmp_path / "jl") == 0
    said = capsys.readouterr().out
    assert "layers 0 to 1, 3 prompts (1 too short skipped), 2 shards, 0 resumed" in said
    payload = torch.load(str(tmp_path / "jl" / "lens.pt"), weights_only=True)
    assert payload["source_layers"] == [0, 1] and payload["n_prompts"] == 3 and payload["d_model"] == 32
    manifest = json.loads((tmp_path / "jl" / "manifest.json").read_text())
    assert manifest["passages"] == 4 and manifest["skipped_short"] == 1
    assert _fit(inputs, tmp_path / "jl") == 0  # the same folder again: every shard read back
    assert "2 shards, 2 resumed" in capsys.readouterr().out
    sentence = "the cat sat on a mat"
    assert main(["lens", "read", "--model", str(inputs / "model"), "--lens", str(tmp_path / "jl"), "--sentence",
                 sentence]) == 0
    printed = capsys.readouterr().out.splitlines()
    read = read_lens(AttentionConfig(model=str(inputs / "model"), sentence=sentence), load(tmp_path / "jl"), 1)
    jacobian = printed[printed.index(next(line for line in printed if line.startswith("Jacobian lens"))) + 2]
    first = f"{read.jacobian_tokens[0][0][0]!r} {float(read.jacobian_probs[0, 0, 0]):.3f}"
    assert jacobian.startswith("L0") and jacobian.split(None, 1)[1].startswith(first)


def _refused(capsys, *args) -> str:
    assert main(["lens", *map(str, args)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_bad_inputs_print_one_line_and_exit_2(inputs, tmp_path, capsys):
    model, corpus = inputs / "model", inputs / "corpus.txt"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    fit = ("fit", "--model", model, "--corpus", corpus, "--out")
    assert "holds files that are not a Jacobian lens fit (notes.txt)" in _refused(capsys, *fit, tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine" and len(list((tmp_path / "mine").iterdir())) == 1
    assert "--layers must be 0 to 1" in _refused(capsys, *fit, tmp_path / "a", "--layers", "2")
    assert "--layers takes layer numbers" in _refused(capsys, *fit, tmp_path / "a", "--layers", "x")
    assert "no position would be left" in _refused(capsys, *fit, tmp_path / "a", "--max-seq-len", "8",
                                                   "--skip-first", "7")
    assert "no passage of the corpus has more than 21 tokens" in _refused(capsys, *fit, tmp_path / "b",
                                                                          "--skip-first", "20")
    assert "--dim-batch must be 1 to 65536" in _refused(capsys, *fit, tmp_path / "a", "--dim-batch", "0")
    assert "--ray takes local or a cluster's HOST:PORT" in _refused(capsys, *fit, tmp_path / "a", "--ray", "x:y")
    assert "device must be cpu, cuda, cuda:N or mps" in _refused(capsys, *fit, tmp_path / "a", "--device", "tpu")
    assert not (tmp_path / "a").exists()  # nothing refused made the folder
    assert _fit(inputs, tmp_path / "jl") == 0
    capsys.readouterr()
    read = ("read", "--sentence", "the cat")
    assert "whose weights are not those of" in _refused(capsys, *read, "--model", inputs / "other", "--lens",
                                                        tmp_path / "jl")
    assert "no lens at" in _refused(capsys, *read, "--model", model, "--lens", tmp_path / "absent")
    assert "--sentence is empty" in _refused(capsys, "read", "--sentence", " ", "--model", model, "--lens",
                                             tmp_path / "jl")
    assert "--top-k must be 1 to 10" in _refused(capsys, *read, "--model", model, "--lens", tmp_path / "jl",
                                                 "--top-k", "11")


@pytest.fixture
def two_nodes():
    """A Ray cluster of two nodes on this machine (a head and a second node joined to it, one CPU each), listening
    on 127.0.0.1 only; stopped after the test."""
    import os
    import shutil
    import socket
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("ray", reason="the corpus extra (pip install attn-gui[corpus]) is not installed")
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    common = ["--num-cpus", "1", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    try:
        subprocess.run([ray, "start", "--head", "--port", str(port), "--include-dashboard=false", *common],
                       check=True, capture_output=True, env=env, timeout=120)
        subprocess.run([ray, "start", "--address", f"127.0.0.1:{port}", *common], check=True,
                       capture_output=True, env=env, timeout=120)
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run([ray, "stop"], capture_output=True, env=env, timeout=120)


def test_a_two_node_cluster_gives_the_in_process_matrices(inputs, tmp_path, two_nodes):
    """``--ray HOST:PORT`` on two nodes: each worker's sums reduced in shard order, the same matrices as in process
    (1e-6, the issue's; they are equal here)."""
    import subprocess
    import sys

    address, env = two_nodes
    assert _fit(inputs, tmp_path / "plain") == 0
    done = subprocess.run([sys.executable, "-m", "attn_gui", "lens", "fit", "--model", str(inputs / "model"),
                           "--corpus", str(inputs / "corpus.txt"), "--out", str(tmp_path / "ray"), "--skip-first",
                           "3", "--shard-size", "2", "--ray", address], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    plain, on_ray = load(tmp_path / "plain"), load(tmp_path / "ray")
    assert on_ray.source_layers == plain.source_layers == [0, 1] and on_ray.n_prompts == plain.n_prompts == 3
    for layer in plain.source_layers:
        assert torch.allclose(on_ray.jacobians[layer], plain.jacobians[layer], atol=1e-6, rtol=0), layer

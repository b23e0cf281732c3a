"""``attn-gui corpus`` on Ray: an in-process run, ``--ray local`` with a worker killed by the test
mid-run, and a cluster started here with ``ray start --head`` and joined by address give the same
numbers (1e-6); bad inputs (an empty corpus, an unreadable file, a dead address, no Ray) print one
line and exit 2.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attn_gui.cli import main
from attn_gui.engine import corpus as C
from corpus_data import llama_folder, sentences  # tests/

# The cluster here listens on 127.0.0.1 only; Ray's token authentication is for clusters on a network.
RAY_ENV = {**os.environ, "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("census")
    llama_folder(folder / "model")
    (folder / "corpus.txt").write_text("\n".join(sentences()))
    return folder


@pytest.fixture(scope="module")
def plain(inputs):
    out = inputs / "plain"
    assert main(["corpus", "--model", str(inputs / "model"), "--corpus", str(inputs / "corpus.txt"), "--out",
                 str(out), "--workers", "1"]) == 0
    return C.read_heads(out)


def _run(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_gui", "corpus", *map(str, args)], capture_output=True,
                          text=True, env=env or RAY_ENV, timeout=300)


def _agree(out: Path, plain: dict) -> None:
    heads = C.read_heads(out)
    assert set(heads) == set(plain)
    for name in plain:
        np.testing.assert_allclose(heads[name], plain[name], atol=1e-6, rtol=0, err_msg=name)


def _our_actors() -> list[int]:
    """The process ids of the RayWorker actors started under this process (its local Ray's)."""
    rows = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout.splitlines()
    parent = {int(r.split()[0]): int(r.split()[1]) for r in rows}

    def ours(pid: int) -> bool:
        while pid > 1:
            if pid == os.getpid():
                return True
            pid = parent.get(pid, 0)
        return False

    return [int(r.split()[0]) for r in rows if "ray::RayWorker" in r and ours(int(r.split()[0]))]


def test_ray_local_with_a_worker_killed_mid_run_gives_the_same_numbers(inputs, plain, tmp_path, monkeypatch):
    from attn_gui.engine import corpus_ray

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    killed = []

    def kill_a_worker(progress):  # after the first shard: SIGKILL one of this run's actors, whatever it does
        if not killed:
            pids = _our_actors()
            assert pids
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    corpus = C.read_corpus(inputs / "corpus.txt")
    result = C.census(corpus, tmp_path, C.Settings(model=str(inputs / "model"), shard_size=16),
                      runner=corpus_ray.runner("local", 2), progress=kill_a_worker)
    assert killed and result.totals.passages == 200 and result.resumed == 0
    _agree(tmp_path, plain)


@pytest.fixture
def cluster():
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        subprocess.run([ray, "start", "--head", "--port", str(port), "--num-cpus", "2", "--node-ip-address",
                        "127.0.0.1", "--include-dashboard=false", "--disable-usage-stats"], check=True,
                       capture_output=True, env=RAY_ENV, timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray, "stop"], capture_output=True, env=RAY_ENV, timeout=120)


def test_a_cluster_joined_by_address_gives_the_same_numbers(inputs, plain, cluster, tmp_path):
    done = _run("--model", inputs / "model", "--corpus", inputs / "corpus.txt", "--out", tmp_path, "--ray", cluster)
    assert done.returncode == 0, done.stderr
    assert "200 passages" in done.stdout and done.stderr == ""
    _agree(tmp_path, plain)


def _refused(capsys, *args) -> str:
    assert main(["corpus", *map(str, args)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_bad_inputs_print_one_line_and_exit_2(inputs, tmp_path, capsys, monkeypatch):
    model = inputs / "model"
    (tmp_path / "empty.txt").write_text("\n\n")
    assert "has no passages" in _refused(capsys, "--model", model, "--corpus", tmp_path / "empty.txt",
                                         "--out", tmp_path / "o")
    assert "cannot read" in _refused(capsys, "--model", model, "--corpus", tmp_path / "absent.txt",
                                     "--out", tmp_path / "o")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in _refused(
        capsys, "--model", model, "--corpus", inputs / "corpus.txt", "--out", tmp_path / "o", "--ray",
        f"127.0.0.1:{port}")
    assert "--pattern" not in _refused(capsys, "--model", model, "--corpus", inputs / "corpus.txt", "--out",
                                       tmp_path / "o", "--pattern", "from ( to a > 0.5")
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    assert "pip install 'attn-gui[corpus]'" in _refused(capsys, "--model", model, "--corpus",
                                                         inputs / "corpus.txt", "--out", tmp_path / "o",
                                                         "--ray", "local")


def test_the_progress_line_says_passages_per_second_and_the_time_left(capsys):
    from attn_gui.cli import _census_progress

    _census_progress(C.Progress(done=96, total=200, done_now=64, elapsed=2.0))
    assert capsys.readouterr().err == "\rattn-gui corpus: 96 of 200 passages, 32.0 passages/s, 0 min 03 s left\033[K"

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
from attn_gui.engine.analysis.corpus.census import Progress, census
from attn_gui.engine.analysis.corpus.shards import Settings
from attn_gui.engine.analysis.corpus.read import read_corpus
from attn_gui.engine.analysis.corpus.outputs import read_heads
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
    return read_heads(out)


def _run(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attn_gui", "corpus", *map(str, args)], capture_output=True,
                          text=True, env=env or RAY_ENV, timeout=300)


def _agree(out: Path, plain: dict) -> None:
    heads = read_heads(out)
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
    from attn_gui.engine.analysis.corpus import ray as corpus_ray

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    killed = []

    def kill_a_worker(progress):  # after the first shard: SIGKILL one of this run's actors, whatever it does
        if not killed:
            pids = _our_actors()
            assert pids
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    corpus = read_corpus(inputs / "corpus.txt")
    result = census(corpus, tmp_path, Settings(model=str(inputs / "model"), shard_size=16),
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


def test_the_progress_line_says_passages_per_second_and_the_time_left(capsys, monkeypatch):
    from attn_gui.cli.terminal import passages_progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)  # the line is drawn on a terminal only
    progress = passages_progress("corpus", rate=True)
    assert progress is not None
    progress(Progress(done=96, total=200, done_now=64, elapsed=2.0))
    assert capsys.readouterr().err == "\rattn-gui corpus: 96 of 200 passages, 32.0 passages/s, 0 min 03 s left\033[K"


def test_a_damaged_shard_is_said_in_one_line_and_computed_again(inputs, plain, tmp_path, capsys):
    shutil.copytree(inputs / "plain", tmp_path / "out")
    (tmp_path / "out" / "shards" / "shard-000001.npz").write_bytes(b"PK\x03\x04 cut short")
    capsys.readouterr()
    assert main(["corpus", "--model", str(inputs / "model"), "--corpus", str(inputs / "corpus.txt"), "--out",
                 str(tmp_path / "out"), "--workers", "1"]) == 0
    out = capsys.readouterr()
    assert out.err.startswith("attn-gui corpus: 1 stored shard could not be read and is computed again: "
                              "shard-000001.npz (") and out.err.count("\n") == 1, out.err
    assert "6 resumed" in out.out
    _agree(tmp_path / "out", plain)


@pytest.mark.parametrize("address, said", [
    ("127.0.0.1:²", "--ray takes local or a cluster's HOST:PORT"),  # "²".isdigit(), but no int
    ("127.0.0.1:99999", "--ray takes local or a cluster's HOST:PORT"),
    ("h" * 300 + ":6379", "--ray takes local or a cluster's HOST:PORT"),  # the codec's label limit
    ("a." + "h" * 64 + ":6379", "--ray takes local or a cluster's HOST:PORT"),
    ("ünï.invalid:6379", "no Ray cluster answers at ünï.invalid:6379"),
])
def test_odd_ray_addresses_are_one_line(inputs, tmp_path, capsys, address, said):
    assert said in _refused(capsys, "--model", inputs / "model", "--corpus", inputs / "corpus.txt", "--out",
                            tmp_path / "o", "--ray", address)


def _serving(handler) -> tuple[str, object]:
    """A TCP server on 127.0.0.1 answering each connection with ``handler`` in a thread; (address, server)."""
    import socketserver
    import threading

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"127.0.0.1:{server.server_address[1]}", server


def test_a_server_that_is_not_ray_is_refused_within_the_bound(inputs, tmp_path):
    """An HTTP server is refused at once (it does not answer HTTP/2); a server that answers HTTP/2's SETTINGS
    but is not Ray is refused once the join's bound passes (5 s here, JOIN_SECONDS in use)."""
    import http.server
    import socketserver

    class Settings(socketserver.BaseRequestHandler):
        def handle(self):  # an empty SETTINGS frame, then nothing: a gRPC server that never answers a call
            self.request.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            while self.request.recv(65536):
                pass

    http_address, web = _serving(http.server.BaseHTTPRequestHandler)
    grpc_address, grpc = _serving(Settings)
    code = ("import sys\nfrom attn_gui.engine.analysis.corpus import ray as corpus_ray\ncorpus_ray.JOIN_SECONDS = 5\n"
            "from attn_gui.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    try:
        for address, said in ((http_address, "but not a Ray cluster (it does not speak gRPC)"),
                              (grpc_address, "did not let a driver join within 5 s")):
            args = ["corpus", "--model", inputs / "model", "--corpus", inputs / "corpus.txt", "--out",
                    tmp_path / "o", "--ray", address]
            done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                                  env=RAY_ENV, timeout=120)
            assert done.returncode == 2 and said in done.stderr, done.stderr[-2000:]
            assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    finally:
        for server in (web, grpc):
            server.shutdown()
            server.server_close()


def _ours(root: int, mark: str) -> list[int]:
    """The processes of a run: ``root``'s descendants (Ray's agents set their titles over their environment),
    and those whose environment holds ATTN_GUI_TEST_RUN=mark (orphans of a run already ended)."""
    children: dict[int, list[int]] = {}
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            children.setdefault(int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1]), []
                                ).append(int(pid))
            if f"\0ATTN_GUI_TEST_RUN={mark}\0".encode() in b"\0" + Path(f"/proc/{pid}/environ").read_bytes():
                found.add(int(pid))
        except (OSError, IndexError, ValueError):
            pass
    stack = [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            found.add(pid)
            stack.append(pid)
    return sorted(found)


def _ended(pids: list[int], seconds: float) -> list[int]:
    """Those of ``pids`` still running after waiting at most ``seconds`` for all (Linux's pidfd)."""
    import select
    import time

    deadline = time.monotonic() + seconds
    left = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # ended already
            continue
        with os.fdopen(fd) as f:
            if not select.select([f], [], [], max(0.0, deadline - time.monotonic()))[0]:
                left.append(pid)
    return left


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on processes with Linux's pidfd")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_during_ray_local_is_one_line_and_leaves_no_ray_process(inputs, tmp_path, sig):
    import uuid

    (tmp_path / "corpus.txt").write_text("\n".join(sentences(2000)))
    mark = uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "-m", "attn_gui", "corpus", "--model", str(inputs / "model"), "--corpus",
                             str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "out"), "--ray", "local",
                             "--workers", "2", "--shard-size", "8"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**RAY_ENV, "ATTN_GUI_TEST_RUN": mark})
    try:
        for _ in range(1200):  # the first shard written (at most 240 s): the actors are computing
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if any((tmp_path / "out" / "shards").glob("shard-*.npz")):
                    break
        assert proc.poll() is None, proc.stderr.read()
        run = _ours(proc.pid, mark)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert len(run) >= 6  # Ray's processes (its GCS, raylet, agents) and its two workers
    if sig != signal.SIGKILL:
        assert (proc.returncode, err) == (130, "attn-gui: interrupted\n")
    left = _ended(sorted(set(run) | set(_ours(proc.pid, mark))), 10)
    assert left == [], [Path(f"/proc/{pid}/cmdline").read_bytes()[:40] for pid in left]

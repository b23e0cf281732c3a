"""The corpus census on Ray: one actor per worker holds the model once and takes shards.

``runner(address, workers)`` gives a ``corpus.census`` runner. Each actor is a
``corpus.ShardWorker`` on one core and returns only sums, counts and heaps; the driver
writes each shard as it arrives and reduces them in shard order, so the numbers equal an
in-process run's. An actor that dies is restarted and its shard computed again (its result
was never written), so nothing is counted twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque

from .read import INSTALL_HINT, CorpusError
from .shards import ShardWorker, from_plain

CONNECT_SECONDS = 10  # a cluster address that does not answer within this is refused
JOIN_SECONDS = 60  # a cluster that answers but does not let the driver join within this is refused
WAIT_SECONDS = 0.5  # between two looks at the shards in flight, a signal's handler runs
IN_FLIGHT = 2  # shards queued per actor, so none waits between two
# HTTP/2's client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, Ray Client) answers SETTINGS
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS = 4  # the frame type of HTTP/2's SETTINGS (RFC 9113, 6.5)


def _ray():
    try:
        import ray
    except ImportError:
        raise CorpusError(f"--ray needs Ray: {INSTALL_HINT}") from None
    return ray


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``, ``[IPv6]:PORT``) as (host, port); ``CorpusError`` for anything else."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    number = port.isascii() and port.isdigit() and len(port) <= 5  # "²" is a digit, and no int
    if (not host or not number or not 0 < int(port) < 65536 or len(host) > 253
            or any(len(label) > 63 for label in host.split("."))):  # a DNS name's limits (RFC 1035, 2.3.4)
        raise CorpusError(f"--ray takes local or a cluster's HOST:PORT (e.g. 127.0.0.1:6379, a port 1 to 65535); "
                          f"got {address!r:.80}")
    return host, int(port)


def check_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``) of a cluster that answers as Ray does, with gRPC (HTTP/2);
    ``CorpusError`` otherwise, within ``CONNECT_SECONDS``."""
    host, port = parse_address(address)
    fix = "start one with `ray start --head` or use --ray local"
    deadline = time.monotonic() + CONNECT_SECONDS  # the whole check's: a server that drips a byte at a time too
    try:
        with socket.create_connection((host, port), timeout=CONNECT_SECONDS) as s:
            s.sendall(PREFACE)
            answer = b""
            while len(answer) < 9:  # a frame's header: length (3), type (1), flags (1), stream (4)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                s.settimeout(left)
                chunk = s.recv(9 - len(answer))
                if not chunk:
                    break
                answer += chunk
    except (OSError, UnicodeError, ValueError, OverflowError) as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else \
            (exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a host name")
        raise CorpusError(f"no Ray cluster answers at {address:.80} ({reason}); {fix}") from None
    if len(answer) < 9 or answer[3] != SETTINGS:
        raise CorpusError(f"something answers at {address:.80}, but not a Ray cluster (it does not speak gRPC); {fix}")
    return host, port


def _start(ray, address: str, workers: int | None) -> int:
    """Start (``local``) or join Ray; the number of actors to run."""
    quiet = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    # the workers import attn_gui as the driver does: a local Ray's inherit its environment, a
    # cluster's nodes need attn-gui installed (and the model at the same path)
    if address == "local":
        count = workers or os.cpu_count() or 1
        os.environ[MARK] = _reaper()  # the local Ray's processes carry it: the reaper ends them with this one
        try:
            ray.init(address="local", num_cpus=count, **quiet)  # a new Ray, even beside a running cluster
        finally:
            os.environ.pop(MARK, None)  # processes this one starts later (a tokenizer) are not Ray's
        _tell_reaper(ray)
        return count
    check_address(address)
    _probe(address)
    _join(ray, address, quiet)
    return workers or max(1, int(ray.cluster_resources().get("CPU", 1)))


PROBE = """
import logging, sys, ray
ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
ray.shutdown()
"""


def _probe(address: str) -> None:
    """Join the cluster from a child process first, given ``JOIN_SECONDS`` and then killed: a server that
    answers gRPC but is not Ray's keeps ``ray.init`` waiting (and printing Ray's retries) for minutes."""
    try:
        done = subprocess.run([sys.executable, "-c", PROBE, address], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=JOIN_SECONDS)
    except subprocess.TimeoutExpired:
        raise CorpusError(f"the Ray cluster at {address:.80} did not let a driver join within {JOIN_SECONDS} s; "
                          f"check it with `ray status`") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.decode(errors="replace").splitlines() if line.strip()]
        raise CorpusError(f"cannot join the Ray cluster at {address:.80}: {said[-1] if said else 'no answer'}"[:300])


def _join(ray, address: str, quiet: dict) -> None:
    """``ray.init(address)``, given at most ``JOIN_SECONDS``: it runs in a thread of its own, left behind
    where it does not return (the cluster gone since ``_probe``)."""
    outcome: list[BaseException | None] = []

    def join() -> None:
        try:
            ray.init(address=address, **quiet)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001  handed to the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=join, name="attn-gui: join Ray", daemon=True)
    thread.start()
    thread.join(JOIN_SECONDS)
    if not outcome:
        raise CorpusError(f"the Ray cluster at {address:.80} did not let a driver join within {JOIN_SECONDS} s; "
                          f"check it with `ray status`")
    exc = outcome[0]
    if isinstance(exc, (ConnectionError, RuntimeError, ValueError)):
        raise CorpusError(f"cannot join the Ray cluster at {address:.80}: {str(exc).splitlines()[0]}") from None
    if exc is not None:
        raise exc


MARK = "ATTN_GUI_RAY_RUN"  # in the environment of every process of a local Ray this program started
# Ends what is left of a local Ray once its driver (this process, the reaper's parent) has ended: closed its
# standard input, or was killed. Ray's own processes of this run are those Ray reports once it has started
# (its GCS, raylet, monitors: "PID START" lines on the standard input) and their descendants (its agents and
# workers), noted every 2 s with their start times, and the processes whose environment holds argv[1]=argv[2]
# (the driver's while Ray started: a worker the driver's end caught starting), less those already running
# outside Ray's processes when Ray reported them (another thread's child) and their descendants. At the end it
# stops (SIGSTOP) what it noted, again while a look finds more (a stopped process starts none), then kills them.
# Nothing else is ever signalled: not the driver's other children, started before or after.
REAPER = """
import os, select, signal, sys

def stat(pid):
    with open("/proc/%s/stat" % pid, "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[1]), fields[19], fields[0]  # the parent, the start time, the state (Z: ended)

me = os.getpid()
mark = ("\\0%s=%s\\0" % tuple(sys.argv[1:3])).encode()
ray, foreign, told = {}, {}, False

def look():
    procs = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            parent, start, state = stat(pid)
            with open("/proc/%s/environ" % pid, "rb") as f:
                marked = mark in b"\\0" + f.read()
        except (OSError, IndexError, ValueError):
            continue
        if state != b"Z" and int(pid) != me:
            procs[int(pid)] = (parent, start, marked)
    return procs

def note():
    procs = look()

    def under(group, pid):  # a child of a process noted in group (its start time the same: not a reused id)
        parent = procs[pid][0]
        return parent in group and parent in procs and procs[parent][1] == group[parent]

    for phase in ("trees", "marks"):  # Ray's trees first, then what is marked outside them
        grown = True
        while grown:
            grown = False
            for pid, (_, start, marked) in procs.items():
                if pid in ray or pid in foreign:
                    continue
                if under(ray, pid) or phase == "marks" and marked and told and not under(foreign, pid):
                    ray[pid] = start
                elif under(foreign, pid):
                    foreign[pid] = start
                else:
                    continue
                grown = True
    return procs

def signal_all(sig):
    sent = 0
    for pid, (_, start, _) in look().items():
        if ray.get(pid) == start:
            try:
                os.kill(pid, sig)
                sent += 1
            except OSError:
                pass
    return sent

buffer = b""
while True:
    if select.select([0], [], [], 2.0)[0]:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        buffer += chunk
        while b"\\n" in buffer:
            line, buffer = buffer.split(b"\\n", 1)
            if line == b"told":  # Ray has reported all: what is marked and not Ray's is another's
                for pid, (_, start, marked) in note().items():
                    if marked and pid not in ray:
                        foreign[pid] = start
                told = True
            elif line:
                pid, start = line.split()
                ray[int(pid)] = start
    note()
known = -1
for _ in range(100):  # stop them all, and again while a look finds one more: none starts another then
    note()
    if len(ray) == known:
        break
    known = len(ray)
    signal_all(signal.SIGSTOP)
for _ in range(20):
    if not signal_all(signal.SIGKILL):
        break
    select.select([], [], [], 0.5)
"""
_reapers: list = []  # the reaper of each local Ray started here, its standard input held open


def _reaper() -> str:
    """Start a reaper (Linux: it reads /proc) for the local Ray about to start; the mark its processes carry."""
    import uuid

    mark = uuid.uuid4().hex
    if sys.platform.startswith("linux"):
        env = {k: v for k, v in os.environ.items() if k != MARK}
        _reapers.append(subprocess.Popen([sys.executable, "-c", REAPER, MARK, mark], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
    return mark


def _tell_reaper(ray) -> None:
    """Hand the newest reaper the processes the local Ray just started reports (its GCS, raylet, monitors)."""
    if not _reapers:
        return
    lines = []
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    for infos in (getattr(node, "all_processes", None) or {}).values():
        for info in infos:
            pid = getattr(getattr(info, "process", None), "pid", None)
            with contextlib.suppress(OSError, IndexError, TypeError), open(f"/proc/{pid}/stat", "rb") as f:
                lines.append(f"{pid} {f.read().rsplit(b')', 1)[1].split()[19].decode()}\n")
    with contextlib.suppress(OSError):
        _reapers[-1].stdin.write(("".join(lines) + "told\n").encode())
        _reapers[-1].stdin.flush()


def _reap() -> None:
    """After Ray's shutdown: the reapers end what is left of the local Rays (nothing, mostly) and are waited for."""
    while _reapers:
        proc = _reapers.pop()
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=CONNECT_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class RayWorker(ShardWorker):
    """A ``ShardWorker`` as a Ray actor: it ends at once with the Ray node that started it (its parent), so a
    driver killed with its local Ray leaves no worker behind."""

    def __init__(self, settings, threads=None):
        _end_with_parent()
        super().__init__(settings, threads)


def _end_with_parent() -> None:
    """Exit this process as soon as its parent does (Linux's pidfd; elsewhere nothing is watched)."""
    try:
        parent = os.pidfd_open(os.getppid())  # Linux only
    except (AttributeError, OSError):
        return

    def watch() -> None:
        select.select([parent], [], [])  # readable when the parent has ended
        os._exit(1)

    threading.Thread(target=watch, name="attn-gui: end with the Ray node", daemon=True).start()


def runner(address: str, workers: int | None = None, worker: type | None = None, decode=None):
    """A ``corpus.census`` runner on Ray: ``address`` is ``local`` (a Ray of ``workers`` cores, default
    every core here) or a running cluster's HOST:PORT (``workers`` actors, default one per CPU). ``worker``: the
    actor's class (default ``RayWorker``; the Jacobian lens's ``lens.fit.RayLensWorker``), ``decode`` turning its
    ``run``'s plain data into the shard's result (default ``shards.from_plain``).

    Ray's own SIGTERM handler (a stack dump, exit 15) is taken back after the start: the caller's
    handlers stay in force, and a ``KeyboardInterrupt`` they raise while the shards are computed
    shuts Ray down (its local processes and actors with it) before it goes on."""
    ray = _ray()

    def run(settings, shards, on_shard) -> None:
        handlers = _handlers()
        try:
            count = _start(ray, address, workers)
            _restore(handlers)
            actor = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)(worker or RayWorker)
            actors = [actor.remote(settings, 1) for _ in range(min(count, len(shards)))]
            queue = deque(shards)
            pending = {}

            def give(a) -> None:
                if queue:
                    index, start, passages = queue.popleft()
                    pending[a.run.remote(start, passages)] = (index, a)

            for a in actors:
                for _ in range(IN_FLIGHT):
                    give(a)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_SECONDS)
                if not ready:
                    continue
                index, a = pending.pop(ready[0])
                try:
                    data = ray.get(ready[0])
                except ray.exceptions.RayActorError as exc:
                    raise CorpusError(f"a Ray worker was lost more than 3 times ({type(exc).__name__}); the shards "
                                      f"done are kept: run the same command again to resume") from None
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(getattr(exc, "cause", None), Exception) else None
                    if isinstance(cause, CorpusError) or cause is not None and isinstance(cause, ValueError):
                        raise CorpusError(str(cause)) from None
                    raise
                on_shard(index, (decode or from_plain)(data))
                give(a)
        finally:
            _quietly(ray.shutdown, handlers)
            _reap()

    return run


SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _handlers() -> dict | None:
    """The handlers of SIGINT and SIGTERM now (None off the main thread, where none can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return {sig: signal.getsignal(sig) for sig in SIGNALS}


def _restore(handlers: dict | None) -> None:
    for sig, handler in (handlers or {}).items():
        if handler is not None:
            signal.signal(sig, handler)


def _quietly(stop, handlers: dict | None) -> None:
    """``stop()`` with SIGINT and SIGTERM ignored (a second Ctrl-C never cuts Ray's shutdown short) and the
    standard error muted (Ray's C++ threads write there of the tasks an interrupt cut short), then the
    ``handlers`` back."""
    for sig in (handlers or {}):
        signal.signal(sig, signal.SIG_IGN)
    try:
        with _stderr_muted():
            stop()
    finally:
        _restore(handlers)


@contextlib.contextmanager
def _stderr_muted():
    """File descriptor 2 on the null device for the block (what Python has buffered is written first)."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)

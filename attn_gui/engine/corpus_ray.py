"""The corpus census on Ray: one actor per worker holds the model once and takes shards.

``runner(address, workers)`` gives a ``corpus.census`` runner. Each actor is a
``corpus.ShardWorker`` on one core and returns only sums, counts and heaps; the driver
writes each shard as it arrives and reduces them in shard order, so the numbers equal an
in-process run's. An actor that dies is restarted and its shard computed again (its result
was never written), so nothing is counted twice.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque

from .corpus import INSTALL_HINT, CorpusError, ShardWorker, from_plain

CONNECT_SECONDS = 10  # a cluster address that does not answer within this is refused
IN_FLIGHT = 2  # shards queued per actor, so none waits between two


def _ray():
    try:
        import ray
    except ImportError:
        raise CorpusError(f"--ray needs Ray: {INSTALL_HINT}") from None
    return ray


def check_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``) of a cluster that answers; ``CorpusError`` otherwise, within
    ``CONNECT_SECONDS``."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise CorpusError(f"--ray takes local or a cluster's HOST:PORT (e.g. 127.0.0.1:6379); got {address!r}")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise CorpusError(f"no Ray cluster answers at {address} ({reason}); start one with `ray start --head` "
                          f"or use --ray local") from None
    return host, int(port)


def _start(ray, address: str, workers: int | None) -> int:
    """Start (``local``) or join Ray; the number of actors to run."""
    quiet = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    # the workers import attn_gui as the driver does: a local Ray's inherit its environment, a
    # cluster's nodes need attn-gui installed (and the model at the same path)
    if address == "local":
        count = workers or os.cpu_count() or 1
        ray.init(address="local", num_cpus=count, **quiet)  # a new Ray, even beside a running cluster
        return count
    check_address(address)
    try:
        ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise CorpusError(f"cannot join the Ray cluster at {address}: {str(exc).splitlines()[0]}") from None
    return workers or max(1, int(ray.cluster_resources().get("CPU", 1)))


def runner(address: str, workers: int | None = None):
    """A ``corpus.census`` runner on Ray: ``address`` is ``local`` (a Ray of ``workers`` cores, default
    every core here) or a running cluster's HOST:PORT (``workers`` actors, default one per CPU)."""
    ray = _ray()

    def run(settings, shards, on_shard) -> None:
        count = _start(ray, address, workers)
        try:
            actor = ray.remote(num_cpus=1, max_restarts=3, max_task_retries=3)(ShardWorker)
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
                ready, _ = ray.wait(list(pending), num_returns=1)
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
                on_shard(index, from_plain(data))
                give(a)
        finally:
            ray.shutdown()

    return run

"""The harness: repeated timings in alternating turns, report rows, and fresh Python subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np
import torch

from ..engine.base.devices import resolve_device, synchronize

PROJECT_ROOT = Path(__file__).resolve().parents[2]

Log = Callable[[str], None]


@dataclass
class Timing:
    """Repeated wall-clock times of one operation, in milliseconds."""

    samples_ms: list[float]

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ms))

    @property
    def p95_ms(self) -> float:
        return float(np.percentile(self.samples_ms, 95))

    @property
    def runs(self) -> int:
        return len(self.samples_ms)


@dataclass
class Row:
    """One line of the printed table and one entry of the JSON report.

    ``median`` and ``p95`` are in ``unit`` ("ms" or "MiB"); ``ratio`` is this row's
    median over the median of the row named ``ratio_to``; ``met`` is None where
    there is no target.
    """

    section: str
    name: str
    size: str
    unit: str
    median: float
    p95: float | None = None
    runs: int = 1
    ratio: float | None = None
    ratio_to: str | None = None
    target: float | None = None
    met: bool | None = None
    samples: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def timed(cls, section: str, name: str, size: str, timing: Timing, **kw: Any) -> Row:
        return cls(section, name, size, "ms", timing.median_ms, timing.p95_ms, timing.runs,
                   samples=[round(s, 4) for s in timing.samples_ms], **kw)


def _timed_call(fn: Callable[[], Any], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    out = fn()  # held until the clock stops, so freeing a large result is not timed
    synchronize(device)
    elapsed = (time.perf_counter() - start) * 1e3
    del out
    return elapsed


def time_interleaved(fns: dict[str, Callable[[], Any]], device: str = "cpu", min_repeats: int = 10,
                     max_repeats: int = 200, budget_s: float = 5.0) -> dict[str, Timing]:
    """Time several functions in alternating turns, so a slow spell of the machine hits all alike.

    Each function runs once untimed first. Then rounds run, each calling every
    function once (the order reversed every other round), until ``min_repeats``
    rounds are done and ``budget_s`` seconds have passed, or ``max_repeats`` rounds.

    Parameters
    ----------
    fns : dict of str to callable
        Functions without arguments; what they return is dropped after timing.
    device : str
        Device to synchronize before and after each call.

    Returns
    -------
    dict of str to Timing
    """
    dev = resolve_device(device)
    for fn in fns.values():
        _timed_call(fn, dev)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    start = time.perf_counter()
    rounds = 0
    while rounds < max_repeats and (rounds < min_repeats or time.perf_counter() - start < budget_s):
        for name, fn in order if rounds % 2 == 0 else reversed(order):
            samples[name].append(_timed_call(fn, dev))
        rounds += 1
    return {name: Timing(s) for name, s in samples.items()}


def paired_ratio(a: Timing, b: Timing) -> float:
    """Median over rounds of a's time divided by b's time in the same round (less hurt by slow spells)."""
    return float(np.median(np.asarray(a.samples_ms) / np.asarray(b.samples_ms)))


def child_env() -> dict[str, str]:
    """This environment, with the project first on PYTHONPATH and Qt offscreen unless set."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


def run_python(code: str, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python -c code *argv`` in a fresh interpreter from the project root, output captured as text."""
    return subprocess.run([sys.executable, "-c", code, *argv], env=child_env() if env is None else env,
                          cwd=PROJECT_ROOT, timeout=600, capture_output=True, text=True)


def last_error_line(proc: subprocess.CompletedProcess) -> str:
    """The last line a failed subprocess wrote to stderr."""
    return (proc.stderr.strip().splitlines() or ["no output"])[-1]

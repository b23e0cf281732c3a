"""Peak memory: resident set size of fresh subprocesses that compute one size and keep the display arrays."""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from ..engine import compute
from .settings import DISPLAY_MAX, BenchSettings, engine_config
from .timing import Log, Row, last_error_line, run_python

BASELINE_NAME = "peak RSS, import engine"


def peak_rss_kib() -> int:
    """Peak resident set size of this process in KiB (VmHWM, else ru_maxrss)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, KiB on Linux


def memory_child(T: int, device: str = "cpu") -> dict[str, int]:
    """Body of a memory subprocess: compute T (T = 0: only import) and keep the display arrays.

    Returns
    -------
    dict
        ``peak_rss_kib``, ``kept_bytes`` (the display arrays) and, on CUDA,
        ``device_peak_bytes``.
    """
    kept = 0
    if T > 0:
        result = compute(engine_config(T, device))
        arrays = [result.display(name, DISPLAY_MAX, DISPLAY_MAX) for name in result.fields()]
        kept = sum(a.nbytes for a in arrays)
    out = {"peak_rss_kib": peak_rss_kib(), "kept_bytes": kept}
    if device.startswith("cuda"):
        out["device_peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


def measure_peak_memory(T: int, device: str = "cpu") -> dict[str, Any]:
    """Peak RSS of a fresh subprocess that computes T and keeps only display-reduced arrays.

    T = 0 only imports the engine (the baseline).
    """
    code = ("import json; from attn_gui.bench.memory import memory_child; "
            f"print(json.dumps(memory_child({int(T)}, {device!r})))")
    proc = run_python(code)
    if proc.returncode != 0:
        raise RuntimeError(f"memory subprocess for T={T} failed: {last_error_line(proc)}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_memory(settings: BenchSettings, log: Log) -> list[Row]:
    """Peak RSS after importing the engine, and after computing each of ``settings.memory_sizes``."""
    log("peak memory import only ...")
    figures = measure_peak_memory(0, settings.device)
    baseline = figures["peak_rss_kib"] / 1024
    rows = [Row("memory", BASELINE_NAME, "-", "MiB", baseline, extra=figures)]
    for T in settings.memory_sizes:
        log(f"peak memory T={T} ...")
        figures = measure_peak_memory(T, settings.device)
        mib = figures["peak_rss_kib"] / 1024
        rows.append(Row("memory", "peak RSS, compute + display arrays", f"T={T}", "MiB", mib,
                        ratio=mib / baseline, ratio_to=BASELINE_NAME, extra=figures))
    return rows

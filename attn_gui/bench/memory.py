"""Peak memory: resident set size of fresh subprocesses that compute one size and keep the display arrays.

Each computes as the window does (``present.runner.run_request``: streamed past DISPLAY_MAX
tokens); one more computes T = 2048 in full first, as before streaming (and as a data export does).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from ..engine import compute
from ..present.frame import make_frame
from ..present.frame import DISPLAY_MAX
from .settings import BenchSettings, engine_config
from .timing import Log, Row, last_error_line, run_python

BASELINE_NAME = "peak RSS, import engine"
SHOWN_NAME = "peak RSS, compute + display arrays"
RSS_TARGETS = {2048: 1.5, 4096: 2.0}  # peak RSS at T over the peak at T = 64


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


def memory_child(T: int, device: str = "cpu", full: bool = False) -> dict[str, int]:
    """Body of a memory subprocess: compute T (T = 0: only import) and keep the display arrays.

    As the window computes (streamed past DISPLAY_MAX), or with ``full`` every tensor in full first.

    Returns
    -------
    dict
        ``peak_rss_kib``, ``kept_bytes`` (the display arrays) and, on CUDA,
        ``device_peak_bytes``.
    """
    kept = 0
    if T > 0:
        result = compute(engine_config(T, device), display_max=None if full else DISPLAY_MAX)
        arrays = make_frame(0, result, DISPLAY_MAX).arrays
        kept = sum(a.nbytes for a in arrays.values())
    out = {"peak_rss_kib": peak_rss_kib(), "kept_bytes": kept}
    if device.startswith("cuda"):
        out["device_peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


def measure_peak_memory(T: int, device: str = "cpu", full: bool = False) -> dict[str, Any]:
    """Peak RSS of a fresh subprocess that computes T and keeps only display-reduced arrays.

    T = 0 only imports the engine (the baseline).
    """
    code = ("import json; from attn_gui.bench.memory import memory_child; "
            f"print(json.dumps(memory_child({int(T)}, {device!r}, {bool(full)})))")
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
    first = None  # the smallest size's peak: the others' targets are ratios to it
    for T in settings.memory_sizes:
        log(f"peak memory T={T} ...")
        figures = measure_peak_memory(T, settings.device)
        mib = figures["peak_rss_kib"] / 1024
        if first is None:
            first = (T, mib)
            rows.append(Row("memory", SHOWN_NAME, f"T={T}", "MiB", mib, ratio=mib / baseline,
                            ratio_to=BASELINE_NAME, extra=figures))
            continue
        target = RSS_TARGETS.get(T) if first[0] == 64 else None
        rows.append(Row("memory", SHOWN_NAME, f"T={T}", "MiB", mib, ratio=mib / first[1],
                        ratio_to=f"{SHOWN_NAME} T={first[0]}", target=target,
                        met=None if target is None else mib / first[1] <= target, extra=figures))
    if settings.memory_full_T:
        T = settings.memory_full_T
        log(f"peak memory T={T}, full tensors ...")
        figures = measure_peak_memory(T, settings.device, full=True)
        mib = figures["peak_rss_kib"] / 1024
        rows.append(Row("memory", "peak RSS, full compute + display arrays", f"T={T}", "MiB", mib,
                        ratio=mib / first[1] if first else None,
                        ratio_to=f"{SHOWN_NAME} T={first[0]}" if first else None, extra=figures))
    return rows

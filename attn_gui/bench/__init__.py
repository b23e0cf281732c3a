"""``attn-gui bench``: engine overhead, display reduction, memory, the window and start-up time.

Each part is one module, repeated after a warm-up and summarised by median and p95:

- :mod:`.engine`: ``compute()`` against a plain torch reference of the same attention
  (8 heads of size 64, d_model = 512) on the same device, timed in alternating turns
  within one run; the ratio of the medians, and a profile where the target is missed.
- :mod:`.display`: ``result.display("weights", 384, 384)`` against the full
  ``result.numpy("weights")``.
- :mod:`.memory`: peak resident set size of fresh subprocesses that compute one size
  and keep only the display-reduced arrays.
- :mod:`.model`: model mode, MiniLM-L6 loaded and computed (needs the pretrained extra).
- :mod:`.folder`: a random Qwen2-0.5B-shaped bfloat16 folder: the app's peak RSS, load and a
  forward at T = 64, against transformers on the same files.
- :mod:`.long`: long inputs for real models (issue 32): a streamed run's time and peak memory at
  thousands of tokens, against transformers' eager attentions
- :mod:`.decoder`: decoder mode, SmolLM2-135M: load from the cache, a full forward at T = 16
  and 64, switching the shown layer, a cached decode step against recomputing the sequence.
- :mod:`.quantized`: SmolLM2-135M's Q4_1 file opened with an empty cache in a fresh process: the
  cache's size, the peak RSS, the first open and a forward (each layer dequantized as it runs).
- :mod:`.interventions`: SmolLM2-135M's 30 x 9 grid of head effects at T = 8, batched, against
  270 forwards with one head ablated each, and the patching grid.
- :mod:`.heavy` (``--heavy`` only): Llama-3-8B-shaped files (Q4_0 and Q4_K_M GGUF, a bfloat16 folder): the first
  maps of layer 16 from a fresh process, a second sentence, the peak RSS against the file's size.
- :mod:`.circuits`: SmolLM2-135M on 50 IOI pairs: EAP (target 60 s) and EAP-IG with 10 steps (10 x EAP).
- :mod:`.window`: the real window's update latency and GUI-thread stalls (its actions in
  :mod:`.window_actions`); with ``--compare REV`` timed against another tree or commit in
  turns (:mod:`.compare`), each row with the ratio.
- :mod:`.startup`: wall time of fresh ``python`` subprocesses, up to the window's first frame.

:mod:`.timing` is the harness and :mod:`.report` formats the result. Only
:mod:`.window_actions` imports Qt, and only when the Qt parts run: ``import attn_gui.bench``
and ``--engine-only`` need torch and numpy alone. Nothing here prints; progress goes
to the ``log`` callable and the report is returned.

Setting the environment variable ``ATTN_GUI_BENCH_TINY=1`` shrinks every size and
repeat count so the whole command runs in seconds; the test suite uses it.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from ..engine.base.devices import resolve_device
from .decoder import bench_decoder
from .display import bench_display, display_notes
from .engine import ENGINE_TARGET, bench_engine, profile_missed
from .folder import bench_folder
from .heavy import bench_heavy
from .interventions import bench_interventions
from .circuits import bench_circuits
from .lens import bench_lens
from .training import bench_training
from .window import slower_notes
from .memory import bench_memory
from .long import bench_long
from .model import bench_model
from .quantized import bench_quantized
from .report import check_writable, format_report, metadata_dict, write_json
from .settings import HEADS, TINY_ENV, BenchSettings, qt_skip_reason
from .startup import bench_startup
from .timing import Log, Row, Timing, time_interleaved

__all__ = [
    "ENGINE_TARGET", "HEADS", "SECTION_NAMES", "TINY_ENV", "BenchSettings", "Log", "Row", "Timing",
    "check_writable", "format_report", "run_bench", "time_interleaved", "write_json",
]


def _bench_window(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    reason = qt_skip_reason(settings)
    if reason:
        return [], [{"name": "window latency and stalls", "reason": reason}]
    from .window import bench_window, bench_window_against

    if settings.compare:
        return bench_window_against(settings, log, settings.compare), []
    return bench_window(settings, log), []


# The sections after the engine, display and memory ones, in the order they run (``--only`` names them).
SECTIONS = {
    "model": bench_model, "folder": bench_folder, "decoder": bench_decoder, "quantized": bench_quantized,
    "long": bench_long, "interventions": bench_interventions, "circuits": bench_circuits, "training": bench_training,
    "lens": bench_lens, "window": _bench_window, "startup": bench_startup, "heavy": bench_heavy,
}
SECTION_NAMES = ("engine", "display", "memory", *SECTIONS)


def run_bench(settings: BenchSettings, log: Log) -> dict[str, Any]:
    """Run every measurement of ``settings`` and return the JSON-ready report.

    Parameters
    ----------
    settings : BenchSettings
        What to measure and how often.
    log : callable
        Called with one line of progress per step.

    Returns
    -------
    dict
        ``meta`` (date, machine, versions), ``settings``, ``rows`` (one dict per
        :class:`Row`), ``profiles`` (where compute() spends its time, for sizes
        that miss the target), ``notes`` (how to read the figures) and
        ``skipped`` (name and reason).
    """
    resolve_device(settings.device)  # a missing device fails here, before anything runs
    started = time.perf_counter()
    meta = metadata_dict(settings)
    rows: list[Row] = []
    skipped: list[dict[str, str]] = []
    profiles: list[dict[str, Any]] = []
    if settings.wants("engine"):
        rows, skipped = bench_engine(settings, log)
        profiles = profile_missed(rows, settings.device, log)
    if settings.wants("display"):
        rows += bench_display(settings, log)
    if settings.wants("memory"):
        rows += bench_memory(settings, log)
    for name, part in SECTIONS.items():
        if settings.wants(name):
            part_rows, part_skipped = part(settings, log)
            rows += part_rows
            skipped += part_skipped
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    return {
        "meta": meta,
        "settings": asdict(settings),
        "rows": [asdict(r) for r in rows],
        "profiles": profiles,
        "notes": display_notes(settings.device) + slower_notes(rows),
        "skipped": skipped,
    }

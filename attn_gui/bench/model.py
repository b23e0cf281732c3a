"""Model mode: loading MiniLM-L6 and one compute of all its layers, run by the engine."""

from __future__ import annotations

import functools
import time

from ..engine import AttentionConfig, compute
from .settings import BenchSettings
from .timing import Log, Row, Timing, time_interleaved


def bench_model(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """Load time of MiniLM-L6 and one compute (all 6 layers, steps of one) at T=16 and 256."""
    from ..engine.model.registry import is_available
    from ..engine.model.loaded import LOADED
    from ..engine.model.encoder.minilm import load_model

    if not is_available("minilm-l6"):
        return [], [{"name": "model mode", "reason": "the pretrained extra is not installed"}]
    start = time.perf_counter()
    LOADED.forget("minilm-l6")
    load_model("minilm-l6")
    rows = [Row.timed("model", "load MiniLM-L6 (safetensors + tokenizer)", "-",
                      Timing([(time.perf_counter() - start) * 1e3]))]
    for T in (16,) if settings.mode == "tiny" else (16, 256):
        cfg = AttentionConfig(sentence=" ".join(["word"] * (T - 2)), model="minilm-l6", layer=3,
                              device=settings.device)
        log(f"model mode T={T} ...")
        t = time_interleaved({"model": functools.partial(compute, cfg)}, settings.device, settings.min_repeats,
                             settings.max_repeats, settings.budget_s)["model"]
        rows.append(Row.timed("model", "compute: 6 layers + every step of one", f"T={T}", t,
                              extra={"per_layer_ms": t.median_ms / 6}))
    return rows, []

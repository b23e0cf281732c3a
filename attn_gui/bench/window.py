"""The window: update latency after a control change, keystrokes, GUI-thread stalls, SmolLM2 and the Train dock.

The actions themselves are ``bench/window_actions.py`` (the one module of the benchmark that
imports Qt, only when the window part runs). Here is what is run and how its samples become
rows: ``plan`` lists the actions, ``window_rows`` turns their samples into the report's rows.
``bench_window`` runs them in this process; with ``--compare REV`` (``bench_window_against``)
this tree and REV each run them in fresh interpreters, in turns, and every row carries the
ratio of this tree's median to REV's (``bench/compare.py``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .settings import BenchSettings, engine_config, sentence
from .timing import Log, Row, Timing

DEFAULT_SIZE, T64_SIZE = "default (T=5, d=5, h=1)", "T=64, d_model 256, 8 heads"
# p95, control change -> every map repainted (issue 48: a seed at most a frame at 60 Hz at the default, d_k too
# where shapes change and every axis is laid out again)
UPDATE_TARGETS_MS = {"seed": {DEFAULT_SIZE: 10.0, T64_SIZE: 16.0}, "d_k": {DEFAULT_SIZE: 16.0, T64_SIZE: 25.0}}
CONTROLS = ("seed", "d_k")  # the spinners turned (``window_actions.CONTROLS``)
STALL_TARGET_MS = 25.0
TYPING_TARGET_MS = 33.0  # p95: two frames at 60 Hz, a character's maps appear with it
DECODER_STALL_MS = 50.0  # issue 13: the GUI never stalls over 50 ms in decoder mode
REPAINT_SIZES = [[1366, 768], [1920, 1080]]  # the floor of a frame: the window repainted, nothing changed
RATIO_CALLED_OUT = 1.1  # a row this much slower than the tree compared with is named in the notes

DECODER_ROWS = (
    ("first_open_ms", "SmolLM2 first open (empty cache) to its first frame", None),
    ("first_open_stall_ms", "longest GUI stall while SmolLM2 first opens (empty cache) and computes",
     DECODER_STALL_MS),
    ("first_open_draw_stall_ms", "longest GUI stall drawing its first frame, after a first open", DECODER_STALL_MS),
    ("choose_ms", "SmolLM2 chosen (from the cache) to its first frame", None),
    ("load_stall_ms", "longest GUI stall while SmolLM2 loads and computes", DECODER_STALL_MS),
    ("first_draw_stall_ms", "longest GUI stall drawing SmolLM2's first frame", DECODER_STALL_MS),
    ("layer_ms", "SmolLM2 layer switch to its frame", None),
    ("layer_stall_ms", "longest GUI stall in a SmolLM2 layer switch", DECODER_STALL_MS),
    ("generate_ms", "Generate step to its frame", None),
    ("generate_stall_ms", "longest GUI stall in a Generate step", DECODER_STALL_MS))


def _config_keywords(config) -> dict[str, Any]:
    """The fields of an AttentionConfig that differ from the default (what a JSON action carries)."""
    from ..engine import AttentionConfig

    default = AttentionConfig()
    return {name: getattr(config, name) for name in config.__dataclass_fields__
            if getattr(config, name) != getattr(default, name)}


def plan(settings: BenchSettings, rounds: int = 1) -> list[dict[str, Any]]:
    """The window part's actions (``window_actions.run_action``), each with its share of the repeats when they
    are run in ``rounds`` rounds (``--compare``)."""
    tiny = settings.mode == "tiny"
    t64 = engine_config(8 if tiny else 64).replace(d_model=256, d_k=32, d_v=32)
    sizes = {DEFAULT_SIZE: {}, T64_SIZE: _config_keywords(t64)}
    repeats = 3 if tiny else (15 if settings.mode == "quick" else 40)
    actions: list[dict[str, Any]] = [{"kind": "update", "control": control, "configs": sizes,
                                      "repeats": max(2, -(-repeats // rounds))} for control in CONTROLS]
    typed = " very" if tiny else " and very carefully type another word"
    typing = {DEFAULT_SIZE: {}, "T=28, d_model 64, 4 heads": {"sentence": sentence(4 if tiny else 22), "d_model": 64,
                                                              "d_k": 16, "d_v": 16, "heads": 4}}
    actions += [{"kind": "typing", "size": name, "config": kw, "typed": typed} for name, kw in typing.items()]
    T = 32 if tiny else 2048
    actions.append({"kind": "stalls", "size": f"T={T}", "config": _config_keywords(engine_config(T, "cpu")),
                    "rounds": 1 if tiny or rounds > 1 else 3})
    from ..engine.model.registry import is_available

    if not tiny and is_available("smollm2-135m"):
        actions.append({"kind": "decoder", "rounds": max(1, 3 // rounds)})
    actions.append({"kind": "repaint", "sizes": REPAINT_SIZES, "repeats": 3 if tiny else max(5, 20 // rounds)})
    actions.append({"kind": "training", "seconds": 2.5 if tiny else 8.0})
    return actions


CPU = " (GUI thread CPU)"  # a size's CPU samples, beside its wall-clock ones (``window_actions.CPU``)


def _timed(name: str, size: str, samples: list[float], target: float | None, worst: bool = False,
           cpu: list[float] | None = None) -> Row:
    """A row of ``samples``; ``met`` by the p95 against ``target``, or the worst sample (``worst``: a stall);
    the GUI thread's ``cpu`` time (ms) of each sample, where measured, as its median and p95 in ``extra``."""
    t = Timing(samples)
    met = None if target is None else (max(samples) if worst else t.p95_ms) <= target
    row = Row.timed("window", name, size, t, target=target, met=met)
    if cpu:
        row.extra.update(cpu_median=Timing(cpu).median_ms, cpu_p95=Timing(cpu).p95_ms)
    return row


def window_rows(actions: list[dict[str, Any]], results: list[dict[str, Any]]) -> list[Row]:
    """The report's rows of ``actions`` from their ``results`` (samples in ms by key, or an ``error``)."""
    rows: list[Row] = []
    for action, result in zip(actions, results, strict=True):
        kind = action["kind"]
        if "error" in result:
            continue
        if kind == "update":
            control = action["control"]
            for size in action["configs"]:
                rows.append(_timed(f"update latency, {control} changed", size, result[size],
                                   UPDATE_TARGETS_MS[control][size], cpu=result.get(size + CPU)))
        elif kind == "typing":
            rows.append(_timed("keystroke to frame", action["size"], result["samples"], TYPING_TARGET_MS,
                               cpu=result.get("cpu")))
        elif kind == "stalls":
            for key, label in (("compute_stall_ms", "longest GUI stall while computing"),
                               ("draw_stall_ms", "longest GUI stall while drawing")):
                rows.append(_timed(label, action["size"], result[key], STALL_TARGET_MS, worst=True))
            rows.append(_timed("request to drawn frame", action["size"], result["compute_and_draw_ms"], None))
        elif kind == "decoder":
            for key, label, target in DECODER_ROWS:
                rows.append(_timed(label, "T=5", result[key], target, worst=True))
        elif kind == "repaint":
            for w, h in action["sizes"]:
                for suffix, what in (("", "nothing changed"), (", every item", "every item drawn again")):
                    size = f"{w} x {h}{suffix}"
                    rows.append(_timed(f"one repaint of the window, {what} (the floor)", f"{w} x {h}",
                                       result[size], None, cpu=result.get(size + CPU)))
        elif kind == "training":
            steps = int(np.median(result["steps"]))
            size = f"{action['seconds']:g} s, {steps} steps, the dock's defaults"
            for key, label in (("first_ms", "longest GUI stall in the Train dock's first 2 s (Start)"),
                               ("steady_ms", "longest GUI stall while the Train dock trains, after its first 2 s")):
                rows.append(_timed(label, size, result[key], DECODER_STALL_MS, worst=True))
    return rows


def _log_line(action: dict[str, Any]) -> str:
    what = {"update": f"update latency, {action.get('control')} changed", "typing": f"typing ({action.get('size')})",
            "stalls": f"GUI stalls while {action.get('size')} computes", "decoder": "decoder mode (SmolLM2-135M)",
            "training": "the Train dock training", "repaint": "one repaint, nothing changed"}
    return f"window: {what[action['kind']]} ..."


def bench_window(settings: BenchSettings, log: Log) -> list[Row]:
    """Update latency (control change -> every map repainted) and GUI-thread stalls of the real window,
    each row with the load average (1 min) before and after its action."""
    from .window_actions import run_action  # imports Qt

    actions = plan(settings)
    results, loads = [], []
    for action in actions:
        log(_log_line(action))
        before = os.getloadavg()[0]
        results.append(run_action(action))
        loads.append([round(before, 2), round(os.getloadavg()[0], 2)])
    rows = window_rows(actions, results)
    for row in rows:
        row.extra["load"] = loads[_action_of(actions, row)]
    return rows


def bench_window_against(settings: BenchSettings, log: Log, rev: str) -> list[Row]:
    """The window part run by this tree and by ``rev`` (a commit or a folder holding ``attn_gui``) in fresh
    interpreters, in turns (``bench/compare.py``): this tree's rows, each with the ratio of its median to
    ``rev``'s (``ratio``, ``ratio_to``) and ``rev``'s median, p95 and load averages in ``extra``."""
    from .compare import compare_trees

    rounds = 1 if settings.mode == "tiny" else (3 if settings.mode == "quick" else 4)
    actions = plan(settings, rounds)
    ours, theirs, label = compare_trees(actions, rev, rounds, log, _log_line)
    rows = window_rows(actions, [r["samples"] for r in ours])
    compared = {(r.name, r.size): r for r in window_rows(actions, [r["samples"] for r in theirs])}
    for row in rows:
        action = _action_of(actions, row)
        row.extra["load"] = ours[action]["load"]
        other = compared.get((row.name, row.size))
        error = theirs[action]["samples"].get("error")
        if other is None:
            row.extra["compared_error"] = error or "not measured"
            continue
        row.ratio, row.ratio_to = row.median / other.median if other.median and row.median is not None else None, label
        row.extra.update(compared_median=other.median, compared_p95=other.p95, compared_load=theirs[action]["load"],
                         p95_ratio=row.p95 / other.p95 if other.p95 else None)
        if "cpu_median" in row.extra and "cpu_median" in other.extra:
            row.extra.update(compared_cpu_median=other.extra["cpu_median"],
                             cpu_ratio=row.extra["cpu_median"] / other.extra["cpu_median"])
    return rows


def slower_notes(rows: list[Row]) -> list[str]:
    """A note for each window row slower than the tree it was compared with by more than ``RATIO_CALLED_OUT``."""
    return [f"slower than {r.ratio_to}: {r.name} ({r.size}), median {r.ratio:.2f} x" for r in rows
            if r.section == "window" and r.ratio is not None and r.ratio > RATIO_CALLED_OUT]


def _action_of(actions: list[dict[str, Any]], row: Row) -> int:
    """The index of the action whose samples made ``row``."""
    for i, action in enumerate(actions):
        kind = action["kind"]
        if (kind == "update" and row.name == f"update latency, {action['control']} changed"
                or kind == "typing" and row.name == "keystroke to frame" and row.size == action["size"]
                or kind == "stalls" and row.size == action["size"]
                or kind == "decoder" and row.size == "T=5"
                or kind == "training" and "Train dock" in row.name
                or kind == "repaint" and "repaint" in row.name):
            return i
    raise ValueError(f"no action made {row.name!r}")

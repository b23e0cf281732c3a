"""The window's timed actions: a control changed, a keystroke, a large compute, SmolLM2, the Train dock.

The real MainWindow (offscreen when there is no display) with settings in a temporary folder,
so the user's own settings are never touched. ``bench/window.py`` runs these actions in this
process; ``attn-gui bench --compare REV`` runs this same file in a fresh interpreter whose
``attn_gui`` is another tree (``bench/compare.py``), so both trees are timed by the same code.
That is why it imports ``attn_gui`` by absolute names, and only what an older tree has too: the
window, its settings, its panel's spinners and sentence box, ``frameShown`` and, where the canvas
draws a frame in steps, ``busy`` and ``settled``.

Run as a script (``python -c`` loads it by path, see ``bench/compare.py``) it reads a JSON list
of actions from its argument and prints one JSON line: each action's samples, or its error.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from PySide6 import QtCore, QtWidgets

from attn_gui.engine import AttentionConfig
from attn_gui.ui.main_window import MainWindow
from attn_gui.ui.settings import Settings


def _app() -> QtWidgets.QApplication:
    app = QtWidgets.QApplication.instance()
    if app is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QtWidgets.QApplication([])
    return cast(QtWidgets.QApplication, app)  # made here, or the window's: widgets need a QApplication


class _Harness:
    def __init__(self):
        self.app = _app()
        self._tmp = tempfile.TemporaryDirectory()
        self.win = MainWindow(settings=Settings(Path(self._tmp.name) / "settings.ini"))
        self.win.resize(1600, 1000)
        self.win.set_state(self.win.state.replace(focus=None))  # every map, as on a large screen
        self.win.show()
        self.shown: list[float] = []
        self.cpu: list[float] = []  # the GUI thread's CPU seconds in each ``wait_frame``
        self.win.frameShown.connect(lambda _f: self.shown.append(time.perf_counter()))
        if self.win.frame is None:  # a large saved config is still computing
            self.wait_frame(lambda: None)

    def wait_frame(self, action, timeout_s: float = 120.0) -> float:
        """Run ``action``, wait for the next drawn frame, repaint every map; seconds taken.

        Waits in a real event loop, as the app does: a busy loop here would hold the GIL
        and make the worker thread wait for it, which the app never does.
        """
        n = len(self.shown)
        loop = QtCore.QEventLoop()
        self.win.frameShown.connect(loop.quit)
        QtCore.QTimer.singleShot(int(timeout_s * 1000), loop.quit)
        start, cpu = time.perf_counter(), time.thread_time()
        action()
        if len(self.shown) == n:
            loop.exec()
        self.win.frameShown.disconnect(loop.quit)
        if len(self.shown) == n:
            raise TimeoutError("no frame was drawn")
        canvas = self.win.canvas
        if getattr(canvas, "busy", False):  # a large frame is drawn in steps, a turn of the event loop each
            canvas.settled.connect(loop.quit)
            while canvas.busy:
                loop.exec()
            canvas.settled.disconnect(loop.quit)
        # The frame's repaints are queued as update requests; one pass of the event loop runs
        # them, as the app's own loop would (a forced repaint() would paint them twice).
        self.app.processEvents()
        self.cpu.append(time.thread_time() - cpu)
        return time.perf_counter() - start

    def show(self, config: AttentionConfig) -> None:
        """Put ``config`` in the controls and request it, even if it is already shown."""
        self.win.set_state(self.win.state.replace(config=config))
        self.win.recompute()

    def close(self) -> None:
        self.win.close()
        self._tmp.cleanup()


CPU = " (GUI thread CPU)"  # after a size's name: the GUI thread's CPU time of each sample (ms), less hurt by a
# busy machine than the wall clock; it leaves out what the compute thread does for sizes it computes


CONTROLS = {
    # the spinner turned, and its value on round i: a seed changes every number, d_k every shape too
    "seed": ("seedSpin", lambda cfg, i: cfg.seed + 1 + i),
    "d_k": ("dKSpin", lambda cfg, i: cfg.d_k + 1 + i % 2),
}


def measure_update_latency(configs: dict[str, AttentionConfig], repeats: int = 30,
                           control: str = "seed") -> dict[str, list[float]]:
    """Milliseconds from a control's change to every visible map repainted.

    ``control`` is "seed" (the seed spinner: new numbers) or "d_k" (the d_k spinner,
    between d_k + 1 and d_k + 2: new shapes, so axes and labels are laid out again).
    The time runs until the queued paint events of every map have run, in an offscreen
    window of 1600 x 1000 with software rendering, showing all maps (not the focus view).
    """
    name_of_spin, value = CONTROLS[control]
    h = _Harness()
    out: dict[str, list[float]] = {}
    try:
        for name, cfg in configs.items():
            h.wait_frame(lambda cfg=cfg: h.show(cfg))
            spin = getattr(h.win.panel, name_of_spin)
            samples, cpu = [], []
            for i in range(repeats + 2):
                seconds = h.wait_frame(lambda i=i, spin=spin, cfg=cfg: spin.setValue(value(cfg, i)))
                if i >= 2:  # the first rounds fill caches and Qt's glyph atlas
                    samples.append(seconds * 1e3)
                    cpu.append(h.cpu[-1] * 1e3)
            out[name], out[name + CPU] = samples, cpu
    finally:
        h.close()
    return out


def measure_typing(config: AttentionConfig, typed: str) -> dict[str, list[float]]:
    """Milliseconds from each keystroke in the sentence box to its frame drawn and painted (``samples``),
    and the GUI thread's CPU time of each (``cpu``).

    Starts from ``config`` and types ``typed`` one character at a time at the end of its
    sentence (as the cursor does), each keystroke after the previous frame, so every
    sample is one keystroke's own latency (13 characters a second leave 77 ms between them).
    """
    h = _Harness()
    try:
        h.wait_frame(lambda: h.show(config))
        box = h.win.panel.sentenceInput
        box.moveCursor(box.textCursor().MoveOperation.End)
        samples = [h.wait_frame(lambda ch=ch: box.insertPlainText(ch)) * 1e3 for ch in typed]
        return {"samples": samples, "cpu": [s * 1e3 for s in h.cpu[-len(typed):]]}
    finally:
        h.close()


def measure_gui_stalls(config: AttentionConfig, rounds: int = 3) -> dict[str, float]:
    """Longest gap between 5 ms timer ticks on the GUI thread while ``config`` computes and draws.

    Returns the worst gap during the compute (worker busy) and during the drawing of the result.
    """
    h = _Harness()
    ticks: list[float] = []
    timer = QtCore.QTimer()
    timer.setInterval(5)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    worst_compute = worst_draw = compute_ms = 0.0
    try:
        timer.start()
        for r in range(rounds + 1):  # round 0 builds the head thumbnails once; it is not counted
            ticks.clear()
            t0 = time.perf_counter()
            h.wait_frame(lambda r=r: h.show(config.replace(seed=config.seed + r)))
            t_shown = h.shown[-1]
            end = time.perf_counter() + 0.2  # let the paint events of the new frame run, in the loop
            while time.perf_counter() < end:
                h.app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
            if r == 0:
                continue
            compute_ms = max(compute_ms, (t_shown - t0) * 1e3)
            gaps = [(b - a, b) for a, b in zip(ticks, ticks[1:], strict=False)]
            before = [g for g, t in gaps if t <= t_shown]  # ticks while the worker computed
            after = [g for g, t in gaps if t > t_shown]  # the gap holding show_frame, then paints
            worst_compute = max([worst_compute, *before]) if before else worst_compute
            worst_draw = max([worst_draw, *after]) if after else worst_draw
    finally:
        timer.stop()
        h.close()
    return {"compute_stall_ms": worst_compute * 1e3, "draw_stall_ms": worst_draw * 1e3,
            "compute_and_draw_ms": compute_ms}


class _Ticks:
    """A 5 ms timer on the GUI thread: the longest gap between its ticks is the longest stall."""

    def __init__(self):
        self.ticks: list[float] = []
        self.timer = QtCore.QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(lambda: self.ticks.append(time.perf_counter()))

    def __enter__(self) -> _Ticks:
        self.ticks.clear()
        self.ticks.append(time.perf_counter())
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.stop()
        self.ticks.append(time.perf_counter())

    def worst_ms(self, until: float | None = None, after: float | None = None) -> float:
        """The longest gap (ms) ending by ``until`` or after ``after`` (both None: any)."""
        gaps = [(b - a, b) for a, b in zip(self.ticks, self.ticks[1:], strict=False)]
        return max((g for g, end in gaps if (until is None or end <= until) and (after is None or end > after)),
                   default=0.0) * 1e3


def _first_found(modules: tuple[str, ...], name: str) -> Any:
    """``name`` from the first of ``modules`` that imports: this tree's rooms, then an older tree's path."""
    import importlib

    for module in modules:
        try:
            return getattr(importlib.import_module(module), name)
        except ImportError:
            continue
    raise ImportError(f"{name} is in none of {', '.join(modules)}")


def _generate(win: Any) -> None:
    """One Generate step: ``win.generation`` in this tree, ``win.generate`` before it (cc555a8)."""
    generation = getattr(win, "generation", None)
    (generation.generate if generation is not None else win.generate)(1)


def _model_memory():
    """``load(name)`` and ``forget(name)`` of the tree's loaded models: this tree's rooms, a tree before them (such as
    cc555a8, with ``sources.decoder``), or one before the model table (such as 3c80476, ``sources.smollm2``)."""
    import importlib

    for decoder_module, loaded_module in (("attn_gui.engine.model.decoder.source", "attn_gui.engine.model.loaded"),
                                          ("attn_gui.engine.sources.decoder", "attn_gui.engine.sources.loaded")):
        try:
            decoder, loaded = importlib.import_module(decoder_module), importlib.import_module(loaded_module)
        except ImportError:
            continue
        return decoder.load_model, loaded.LOADED.forget
    smollm2 = importlib.import_module("attn_gui.engine.sources.smollm2")
    return smollm2.load_model, smollm2.forget


def measure_decoder_window(rounds: int = 3) -> dict[str, list[float]]:
    """Decoder mode in the real window: SmolLM2-135M chosen (loaded from its cache) to the first
    frame, a layer switch, a Generate step; each with the GUI thread's longest stall (5 ms ticks).
    The choice's stalls are split: while the worker loads and computes (until the frame is shown),
    and while the window lays out and paints the first 9-head frame after random weights' one head.
    Before them, once: SmolLM2's first open, from an empty cache (its tokenizer built from the file).

    The model is dropped from memory before each choice, so each load reads the cache (one
    load first makes sure the cache exists). Returns lists of milliseconds, one per round.
    """
    cache_env = _first_found(("attn_gui.engine.readers.cache", "attn_gui.engine.sources.cache"), "CACHE_ENV")
    load, forget = _model_memory()
    name = "smollm2-135m"
    load(name)  # the cache exists from here on
    h = _Harness()
    out: dict[str, list[float]] = {k: [] for k in ("first_open_ms", "first_open_stall_ms", "first_open_draw_stall_ms",
                                                   "choose_ms", "load_stall_ms", "first_draw_stall_ms", "layer_ms",
                                                   "layer_stall_ms", "generate_ms", "generate_stall_ms")}
    prompt = "The capital of France is"

    def choose(took: str, stall: str, draw_stall: str) -> None:  # random weights, then SmolLM2: load to first frame
        h.wait_frame(lambda: h.win.edit_config({"model": None, "layer": 0, "sentence": prompt}))
        forget(name)
        with _Ticks() as ticks:
            seconds = h.wait_frame(lambda: h.win.edit_config({"model": name, "layer": 4}))
        out[took].append(seconds * 1e3)
        out[stall].append(ticks.worst_ms(until=h.shown[-1]))  # the worker loads and computes
        out[draw_stall].append(ticks.worst_ms(after=h.shown[-1]))  # 9 heads laid out, painted

    try:
        with tempfile.TemporaryDirectory() as empty:
            kept = os.environ.get(cache_env)
            os.environ[cache_env] = empty
            try:
                choose("first_open_ms", "first_open_stall_ms", "first_open_draw_stall_ms")
            finally:
                if kept is None:
                    del os.environ[cache_env]
                else:
                    os.environ[cache_env] = kept
        for r in range(rounds):
            choose("choose_ms", "load_stall_ms", "first_draw_stall_ms")
            with _Ticks() as ticks:
                seconds = h.wait_frame(lambda r=r: h.win.edit_config({"layer": 5 + r}))
            out["layer_ms"].append(seconds * 1e3)
            out["layer_stall_ms"].append(ticks.worst_ms())
            with _Ticks() as ticks:
                seconds = h.wait_frame(lambda: _generate(h.win))
            out["generate_ms"].append(seconds * 1e3)
            out["generate_stall_ms"].append(ticks.worst_ms())
    finally:
        h.close()
    return out


def measure_training_stall(seconds: float) -> tuple[float, float, int]:
    """The GUI thread's longest stalls (5 ms ticks) while the Train dock trains for ``seconds``
    (Start, then Pause): in the first 2 s (the worker's first steps and probe), after them, and
    the steps made."""
    TrainPanel = _first_found(("attn_gui.ui.docks.train", "attn_gui.ui.train_panel"), "TrainPanel")  # noqa: N806
    app = _app()
    panel = TrainPanel()
    panel.resize(900, 600)
    panel.show()
    try:
        with _Ticks() as ticks:
            started = time.perf_counter()
            panel.start.click()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                app.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 20)
            loop = QtCore.QEventLoop()
            panel.stopped.connect(loop.quit)
            panel.pauseButton.click()
            QtCore.QTimer.singleShot(30_000, loop.quit)
            loop.exec()
        return ticks.worst_ms(until=started + 2.0), ticks.worst_ms(after=started + 2.0), panel.step_count
    finally:
        panel.shutdown()
        panel.close()


def measure_repaint(sizes: list[list[int]], repeats: int = 20) -> dict[str, list[float]]:
    """The floor of a frame, at each window size (width, height), default config and every map shown: the window
    and its canvas repainted now (``QWidget.repaint``) with nothing changed (the items' cached pictures reused),
    and with every item of the scene to draw again (``update()``: its text and images drawn anew, as a frame whose
    every map changed needs, without any layout). Keyed "W x H" and "W x H, every item"; the GUI thread's CPU
    time of each beside it (``CPU``)."""
    h = _Harness()
    out: dict[str, list[float]] = {}

    def repaint(every: bool) -> None:
        if every:
            for item in h.win.canvas.scene().items():
                item.update()
        h.win.repaint()
        h.win.canvas.viewport().repaint()

    try:
        for w, ht in sizes:
            h.win.resize(w, ht)
            h.wait_frame(lambda: h.show(AttentionConfig()))
            for every in (False, True):
                for _ in range(3):  # caches and the glyph atlas filled
                    repaint(every)
                wall, cpu = [], []
                for _ in range(repeats):
                    start, c = time.perf_counter(), time.thread_time()
                    repaint(every)
                    wall.append((time.perf_counter() - start) * 1e3)
                    cpu.append((time.thread_time() - c) * 1e3)
                key = f"{w} x {ht}" + (", every item" if every else "")
                out[key], out[key + CPU] = wall, cpu
    finally:
        h.close()
    return out


def run_action(action: dict[str, Any]) -> dict[str, Any]:
    """Run one action of ``bench/window.py``'s plan; its samples (ms) by what they measure.

    ``action["kind"]`` is "update" (``control``, ``configs``: name -> AttentionConfig keywords,
    ``repeats``), "typing" (``config``, ``typed``), "stalls" (``config``, ``rounds``), "decoder"
    (``rounds``), "repaint" (``sizes``, ``repeats``) or "training" (``seconds``).
    """
    kind = action["kind"]
    if kind == "update":
        configs = {name: AttentionConfig(**kw) for name, kw in action["configs"].items()}
        return measure_update_latency(configs, action["repeats"], action["control"])
    if kind == "typing":
        return measure_typing(AttentionConfig(**action["config"]), action["typed"])
    if kind == "stalls":
        stalls = measure_gui_stalls(AttentionConfig(**action["config"]), action["rounds"])
        return {key: [value] for key, value in stalls.items()}
    if kind == "decoder":
        return measure_decoder_window(action["rounds"])
    if kind == "repaint":
        return measure_repaint(action["sizes"], action["repeats"])
    if kind == "training":
        first, steady, steps = measure_training_stall(action["seconds"])
        return {"first_ms": [first], "steady_ms": [steady], "steps": [float(steps)]}
    raise ValueError(f"unknown window action {kind!r}")


def main(argv: list[str]) -> None:
    """Run the JSON list of actions in ``argv[0]``; print one JSON line: the load average before and after,
    and for each action its samples or ``{"error": ...}`` (a tree that lacks what an action needs)."""
    actions = json.loads(argv[0])
    load = os.getloadavg()[0]
    results = []
    for action in actions:
        try:
            results.append(run_action(action))
        except Exception as exc:  # noqa: BLE001 - another tree's failure is reported, not raised
            results.append({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"})
    print(json.dumps({"results": results, "load": [load, os.getloadavg()[0]]}))
    sys.stdout.flush()

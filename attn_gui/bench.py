"""``attn-gui bench``: engine overhead, display reduction, memory and start-up time.

Four measurements, each repeated after a warm-up and summarised by median and p95:

1. Engine overhead: ``compute()`` against a plain torch reference of the same
   attention (8 heads of size 64, d_model = 512) on the same device; the two are
   timed in alternating turns within one run and their medians divided.
2. Display reduction: ``result.display("weights", 384, 384)`` against the full
   ``result.numpy("weights")``.
3. Memory: peak resident set size of fresh subprocesses that compute one size and
   keep only the display-reduced arrays.
4. Start-up: wall time of ``python -c "import ..."`` subprocesses, and a hook for
   the window's start-up, :func:`measure_window_startup`.

Only torch, numpy and the standard library are imported here, so the engine part
runs on a machine without PySide6; what needs Qt is imported inside the function
that needs it and skipped, with a printed line, under ``--engine-only``.

Setting the environment variable ``ATTN_GUI_BENCH_TINY=1`` shrinks every size and
repeat count so the whole command runs in seconds; the test suite uses it.
"""

from __future__ import annotations

import cProfile
import datetime
import importlib
import importlib.util
import json
import math
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from . import __version__
from .engine import AttentionConfig, TooLargeError, compute
from .engine.devices import resolve_device, synchronize

TINY_ENV = "ATTN_GUI_BENCH_TINY"

HEADS = 8
HEAD_SIZE = 64
D_MODEL = HEADS * HEAD_SIZE
DISPLAY_CELLS = 384  # as attn_gui.ui.maps.DISPLAY_MAX (not imported: that module needs Qt)

ENGINE_TARGET = 1.25
PROFILE_BUDGET_MS = 3000.0
FULL_SIZES = (5, 64, 256, 512, 1024, 2048)
QUICK_SIZES = (5, 64, 512)
CUDA_EXTRA_SIZES = (4096, 8192)

PROJECT_ROOT = Path(__file__).resolve().parent.parent

Log = Callable[[str], None]


@dataclass(frozen=True)
class BenchSettings:
    """What to measure and how often.

    Attributes
    ----------
    device : str
        Device of the engine measurements ("cpu", "cuda", "cuda:N", "mps").
    sizes : tuple of int
        Sequence lengths T of the engine-overhead measurement.
    min_repeats, max_repeats : int
        Timed rounds per measurement, after one warm-up round.
    budget_s : float
        Past ``min_repeats``, keep timing rounds until this many seconds have gone.
    display_T : int
        Sequence length of the display-reduction measurement.
    memory_sizes : tuple of int
        Sequence lengths of the peak-memory subprocesses.
    startup_repeats, startup_warmup : int
        Timed and untimed runs of each start-up subprocess.
    engine_only : bool
        Skip everything that needs Qt.
    profile : bool
        Profile ``compute()`` where the engine target is missed.
    mode : str
        "full", "quick" or "tiny", recorded in the report.
    """

    device: str = "cpu"
    sizes: tuple[int, ...] = FULL_SIZES
    min_repeats: int = 15
    max_repeats: int = 300
    budget_s: float = 12.0
    display_T: int = 2048
    memory_sizes: tuple[int, ...] = (64, 2048)
    startup_repeats: int = 3
    startup_warmup: int = 1
    engine_only: bool = False
    profile: bool = True
    mode: str = "full"

    @classmethod
    def for_mode(cls, quick: bool = False, device: str = "cpu", engine_only: bool = False,
                 tiny: bool = False) -> "BenchSettings":
        """The settings of ``attn-gui bench`` (full), ``--quick``, or the tests' tiny run.

        On CUDA the engine sizes also include 4096 and 8192.
        """
        if tiny:
            return cls(device=device, sizes=(5, 16), min_repeats=2, max_repeats=2, budget_s=0.0,
                       display_T=32, memory_sizes=(8, 32), startup_repeats=1, startup_warmup=0,
                       engine_only=engine_only, mode="tiny")
        extra = CUDA_EXTRA_SIZES if device.startswith("cuda") else ()
        if quick:
            return cls(device=device, sizes=QUICK_SIZES + extra, min_repeats=5, max_repeats=50,
                       budget_s=1.0, engine_only=engine_only, mode="quick")
        return cls(device=device, sizes=FULL_SIZES + extra, engine_only=engine_only, mode="full")


@dataclass
class Timing:
    """Repeated wall-clock times of one operation, in milliseconds."""

    samples_ms: list[float]

    @property
    def median_ms(self) -> float:
        return float(np.median(self.samples_ms))

    @property
    def p95_ms(self) -> float:
        return float(np.percentile(self.samples_ms, 95))

    @property
    def runs(self) -> int:
        return len(self.samples_ms)


@dataclass
class Row:
    """One line of the printed table and one entry of the JSON report.

    ``median`` and ``p95`` are in ``unit`` ("ms" or "MiB"); ``ratio`` is this row's
    median over the median of the row named ``ratio_to``; ``met`` is None where
    there is no target.
    """

    section: str
    name: str
    size: str
    unit: str
    median: float
    p95: float | None = None
    runs: int = 1
    ratio: float | None = None
    ratio_to: str | None = None
    target: float | None = None
    met: bool | None = None
    samples: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def timed(cls, section: str, name: str, size: str, timing: Timing, **kw: Any) -> "Row":
        return cls(section, name, size, "ms", timing.median_ms, timing.p95_ms, timing.runs,
                   samples=[round(s, 4) for s in timing.samples_ms], **kw)


def sentence(T: int) -> str:
    """A sentence of T distinct words: "w0 w1 ... w{T-1}"."""
    return " ".join(f"w{i}" for i in range(T))


def engine_config(T: int, device: str = "cpu") -> AttentionConfig:
    """The benchmark's config: T distinct words, 8 heads of size 64, d_model = 512."""
    return AttentionConfig(sentence=sentence(T), d_model=D_MODEL, d_k=HEAD_SIZE, d_v=HEAD_SIZE,
                           heads=HEADS, init="scaled_normal", device=device)


def make_reference(T: int, device: str = "cpu", seed: int = 0) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """Plain torch multi-head attention with its inputs and weights already on ``device``.

    Returns a function computing q, k, v = x W (each (8, T, 64)), the softmax of
    q k^T / sqrt(64) and the weighted values; it returns the weights and the values.
    """
    dev = resolve_device(device)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(T, D_MODEL, generator=gen).to(dev)
    w_q, w_k, w_v = (
        (torch.randn(HEADS, D_MODEL, HEAD_SIZE, generator=gen) / math.sqrt(D_MODEL)).to(dev) for _ in range(3)
    )
    scale = math.sqrt(HEAD_SIZE)

    def reference() -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = x @ w_q, x @ w_k, x @ w_v
        weights = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1)
        return weights, weights @ v

    return reference


def _timed_call(fn: Callable[[], Any], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    elapsed = (time.perf_counter() - start) * 1e3
    del out
    return elapsed


def time_interleaved(fns: dict[str, Callable[[], Any]], device: str = "cpu", min_repeats: int = 10,
                     max_repeats: int = 200, budget_s: float = 5.0) -> dict[str, Timing]:
    """Time several functions in alternating turns, so a slow spell of the machine hits all alike.

    Each function runs once untimed first. Then rounds run, each calling every
    function once (the order reversed every other round), until ``min_repeats``
    rounds are done and ``budget_s`` seconds have passed, or ``max_repeats`` rounds.

    Parameters
    ----------
    fns : dict of str to callable
        Functions without arguments; what they return is dropped after timing.
    device : str
        Device to synchronize before and after each call.

    Returns
    -------
    dict of str to Timing
    """
    dev = resolve_device(device)
    for fn in fns.values():
        _timed_call(fn, dev)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns.items())
    start = time.perf_counter()
    rounds = 0
    while rounds < max_repeats and (rounds < min_repeats or time.perf_counter() - start < budget_s):
        for name, fn in order if rounds % 2 == 0 else reversed(order):
            samples[name].append(_timed_call(fn, dev))
        rounds += 1
    return {name: Timing(s) for name, s in samples.items()}


def paired_ratio(a: Timing, b: Timing) -> float:
    """Median over rounds of a's time divided by b's time in the same round (less hurt by slow spells)."""
    return float(np.median(np.asarray(a.samples_ms) / np.asarray(b.samples_ms)))


def bench_engine(settings: BenchSettings, log: Log = print) -> tuple[list[Row], list[dict[str, str]]]:
    """compute() against the torch reference for every size of ``settings``.

    Returns
    -------
    rows : list of Row
        Two rows per size: the reference, then compute() with the ratio of the medians.
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
                {"reference": make_reference(T, settings.device), "compute": lambda: compute(config)},
                settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s,
            )
        except (TooLargeError, RuntimeError) as exc:
            reason = str(exc).splitlines()[0]
            log(f"skipped: engine overhead {size}: {reason}")
            skipped.append({"name": f"engine overhead {size}", "reason": reason})
            continue
        ref, comp = timings["reference"], timings["compute"]
        ratio = comp.median_ms / ref.median_ms
        rows.append(Row.timed("engine", "torch reference", size, ref))
        rows.append(Row.timed("engine", "compute()", size, comp, ratio=ratio, ratio_to="torch reference",
                              target=ENGINE_TARGET, met=ratio <= ENGINE_TARGET,
                              extra={"ratio_p95": comp.p95_ms / ref.p95_ms,
                                     "ratio_paired_median": paired_ratio(comp, ref)}))
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


def bench_display(settings: BenchSettings, log: Log = print) -> list[Row]:
    """``display("weights", 384, 384)`` against ``numpy("weights")`` at ``settings.display_T``.

    A third row times ``numpy("weights").copy()``: on the CPU ``numpy()`` shares the
    tensor's memory, so only the copy shows what a full host copy costs there.
    """
    T = settings.display_T
    log(f"display reduction T={T} on {settings.device} ...")
    result = compute(engine_config(T, settings.device))
    timings = time_interleaved(
        {
            "display": lambda: result.display("weights", DISPLAY_CELLS, DISPLAY_CELLS),
            "numpy": lambda: result.numpy("weights"),
            "copy": lambda: result.numpy("weights").copy(),
        },
        settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s,
    )
    shown = result.display("weights", DISPLAY_CELLS, DISPLAY_CELLS)
    full_bytes = result.weights.numel() * result.weights.element_size()
    size = f"T={T}"
    numpy_name = 'numpy("weights")'
    rows = [
        Row.timed("display", numpy_name, size, timings["numpy"], extra={"bytes": full_bytes}),
        Row.timed("display", 'numpy("weights").copy()', size, timings["copy"], extra={"bytes": full_bytes}),
        Row.timed("display", f'display("weights", {DISPLAY_CELLS}, {DISPLAY_CELLS})', size, timings["display"],
                  ratio=timings["display"].median_ms / timings["numpy"].median_ms, ratio_to=numpy_name,
                  extra={"bytes": int(shown.nbytes), "shape": list(shown.shape)}),
    ]
    del result
    return rows


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


def memory_child(T: int, device: str = "cpu") -> None:
    """Body of a memory subprocess: compute T (T = 0: only import), keep the display arrays, print JSON."""
    kept = 0
    if T > 0:
        result = compute(engine_config(T, device))
        arrays = [result.display(name, DISPLAY_CELLS, DISPLAY_CELLS) for name in result.fields()]
        del result
        kept = sum(a.nbytes for a in arrays)
    out = {"peak_rss_kib": peak_rss_kib(), "kept_bytes": kept}
    if device.startswith("cuda"):
        out["device_peak_bytes"] = torch.cuda.max_memory_allocated()
    print(json.dumps(out))


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


def measure_peak_memory(T: int, device: str = "cpu") -> dict[str, Any]:
    """Peak RSS of a fresh subprocess that computes T and keeps only display-reduced arrays.

    T = 0 only imports the engine (the baseline).
    """
    code = f"from attn_gui.bench import memory_child; memory_child({int(T)}, {device!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_child_env(),
                          cwd=PROJECT_ROOT, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"memory subprocess for T={T} failed: {tail}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_memory(settings: BenchSettings, log: Log = print) -> list[Row]:
    """Peak RSS after importing the engine, and after computing each of ``settings.memory_sizes``."""
    rows = []
    baseline = None
    for T in (0, *settings.memory_sizes):
        log(f"peak memory {'import only' if T == 0 else f'T={T}'} ...")
        figures = measure_peak_memory(T, settings.device)
        mib = figures["peak_rss_kib"] / 1024
        if T == 0:
            baseline = mib
            rows.append(Row("memory", "peak RSS, import engine", "-", "MiB", mib, extra=figures))
        else:
            rows.append(Row("memory", "peak RSS, compute + display arrays", f"T={T}", "MiB", mib,
                            ratio=mib / baseline, ratio_to="peak RSS, import engine", extra=figures))
    return rows


def time_command(code: str, repeats: int = 3, warmup: int = 1) -> Timing:
    """Wall time of ``python -c code`` in fresh subprocesses (``warmup`` untimed runs first)."""
    env = _child_env()
    samples = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=PROJECT_ROOT, timeout=600,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i >= warmup:
            samples.append((time.perf_counter() - start) * 1e3)
    return Timing(samples)


def measure_window_startup(repeats: int = 3) -> tuple[Timing | None, str | None]:
    """Wall time from launching a fresh ``python`` to the main window's first painted frame.

    Returns
    -------
    timing : Timing or None
        None when not measured.
    reason : str or None
        Why it was not measured.
    """
    try:
        module = importlib.import_module("attn_gui.ui.bench_window")
    except Exception as exc:  # missing PySide6, or a broken import
        return None, f"the window cannot be imported ({type(exc).__name__}: {exc})"
    env = _child_env()
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        env["ATTN_GUI_CONFIG_DIR"] = tmp
        for _ in range(repeats):
            start = time.time()
            proc = subprocess.run([sys.executable, "-c", module.STARTUP_CODE, repr(start)], env=env,
                                  cwd=PROJECT_ROOT, timeout=600, capture_output=True, text=True)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("painted ")), None)
            if proc.returncode != 0 or line is None:
                return None, f"the window did not start: {proc.stderr.strip().splitlines()[-1:]}"
            samples.append(float(line.split()[1]))
    return Timing(samples), None


def bench_model(settings: BenchSettings, log: Log = print) -> tuple[list[Row], list[dict[str, str]]]:
    """Model mode: load time of MiniLM-L6 and one compute (all 6 layers, steps of one) at T=16 and 256."""
    from .engine.sources import is_available
    from .engine.sources.minilm import load_model

    if not is_available("minilm-l6"):
        return [], [{"name": "model mode", "reason": "the pretrained extra is not installed"}]
    start = time.perf_counter()
    load_model.cache_clear()
    load_model("minilm-l6")
    rows = [Row.timed("model", "load MiniLM-L6 (safetensors + tokenizer)", "-",
                      Timing([(time.perf_counter() - start) * 1e3]))]
    for T in (16,) if settings.mode == "tiny" else (16, 256):
        cfg = AttentionConfig(sentence=" ".join(["word"] * (T - 2)), model="minilm-l6", layer=3,
                              device=settings.device)
        log(f"model mode T={T} ...")
        t = time_interleaved({"model": lambda cfg=cfg: compute(cfg)}, settings.device, settings.min_repeats,
                             settings.max_repeats, settings.budget_s)["model"]
        rows.append(Row.timed("model", "compute: 6 layers + every step of one", f"T={T}", t,
                              extra={"per_layer_ms": t.median_ms / 6}))
    return rows, []


UPDATE_TARGET_MS = 16.0
STALL_TARGET_MS = 50.0


def bench_window(settings: BenchSettings, log: Log = print) -> tuple[list[Row], list[dict[str, str]]]:
    """Update latency (control change -> every map repainted) and GUI-thread stalls of the real window."""
    if settings.engine_only:
        return [], [{"name": "window latency and stalls", "reason": "--engine-only"}]
    if importlib.util.find_spec("PySide6") is None:
        return [], [{"name": "window latency and stalls", "reason": "PySide6 is not installed"}]
    from .ui import bench_window as bw

    tiny = settings.mode == "tiny"
    sizes = {
        "default (T=5, d=5, h=1)": AttentionConfig(),
        "T=64, d_model 256, 8 heads": AttentionConfig(sentence=sentence(8 if tiny else 64), d_model=256,
                                                      d_k=32, d_v=32, heads=8, init="scaled_normal"),
    }
    repeats = 3 if tiny else (15 if settings.mode == "quick" else 40)
    log("window: update latency ...")
    latency = bw.measure_update_latency(sizes, repeats)
    rows = []
    for name, samples in latency.items():
        t = Timing(samples)
        rows.append(Row.timed("window", "update latency", name, t, target=UPDATE_TARGET_MS,
                              met=t.p95_ms <= UPDATE_TARGET_MS))
    T = 32 if tiny else 2048
    log(f"window: GUI stalls while T={T} computes ...")
    stalls = bw.measure_gui_stalls(engine_config(T, "cpu"), rounds=1 if tiny else 3)
    for key, label in (("compute_stall_ms", "longest GUI stall while computing"),
                       ("draw_stall_ms", "longest GUI stall while drawing")):
        rows.append(Row("window", label, f"T={T}", "ms", stalls[key], target=STALL_TARGET_MS,
                        met=stalls[key] <= STALL_TARGET_MS))
    rows.append(Row("window", "request to drawn frame", f"T={T}", "ms", stalls["compute_and_draw_ms"]))
    return rows, []


def bench_startup(settings: BenchSettings, log: Log = print) -> tuple[list[Row], list[dict[str, str]]]:
    """Import times of the interpreter alone, torch + PySide6.QtWidgets, and attn_gui.engine."""
    rows: list[Row] = []
    skipped: list[dict[str, str]] = []
    reps, warm = settings.startup_repeats, settings.startup_warmup
    qt_name = "import torch, PySide6.QtWidgets"

    def skip(name: str, reason: str) -> None:
        log(f"skipped: {name}: {reason}")
        skipped.append({"name": name, "reason": reason})

    log("start-up: python -c pass ...")
    rows.append(Row.timed("startup", "python -c pass", "-", time_command("pass", reps, warm)))
    qt = None
    if settings.engine_only:
        skip(qt_name, "--engine-only")
    elif importlib.util.find_spec("PySide6") is None:
        skip(qt_name, "PySide6 is not installed")
    else:
        log(f"start-up: {qt_name} ...")
        qt = time_command("import torch, PySide6.QtWidgets", reps, warm)
        rows.append(Row.timed("startup", qt_name, "-", qt))
    log("start-up: import attn_gui.engine ...")
    engine = time_command("import attn_gui.engine", reps, warm)
    ratio = {"ratio": engine.median_ms / qt.median_ms, "ratio_to": qt_name} if qt else {}
    rows.append(Row.timed("startup", "import attn_gui.engine", "-", engine, **ratio))
    if settings.engine_only:
        skip("window start-up", "--engine-only")
    else:
        window, reason = measure_window_startup(reps)
        if window is None:
            skip("window start-up", reason or "not measured")
        else:
            rows.append(Row.timed("startup", "window start-up", "-", window))
    return rows, skipped


def _device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(resolve_device(device))
    if device == "mps":
        return "Apple MPS"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _package_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def metadata_dict(settings: BenchSettings) -> dict[str, Any]:
    """Date, machine, device and library versions of a run."""
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "device": settings.device,
        "device_name": _device_name(settings.device),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pyside6": _package_version("PySide6", "PySide6-Essentials"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "attn_gui": __version__,
    }


def run_bench(settings: BenchSettings, log: Log = print) -> dict[str, Any]:
    """Run every measurement of ``settings`` and return the JSON-ready report.

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
    rows, skipped = bench_engine(settings, log)
    profiles = []
    missed = {int(r.size[2:]): r.median for r in rows if r.met is False}
    if settings.profile and missed:
        for T in sorted({min(missed), max(missed)}):
            runs = max(3, min(100, int(PROFILE_BUDGET_MS / missed[T])))
            log(f"profiling compute() at T={T} ({runs} calls) ...")
            profiles.append(profile_compute(T, settings.device, runs))
    rows += bench_display(settings, log)
    notes = []
    if resolve_device(settings.device).type == "cpu":
        notes.append('on the CPU numpy("weights") shares the tensor\'s memory and copies nothing; '
                     'numpy("weights").copy() is what a full host copy costs')
    rows += bench_memory(settings, log)
    model_rows, model_skipped = bench_model(settings, log)
    rows += model_rows
    skipped += model_skipped
    window_rows, window_skipped = bench_window(settings, log)
    rows += window_rows
    skipped += window_skipped
    startup_rows, startup_skipped = bench_startup(settings, log)
    rows += startup_rows
    skipped += startup_skipped
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    return {
        "meta": meta,
        "settings": asdict(settings),
        "rows": [asdict(r) for r in rows],
        "profiles": profiles,
        "notes": notes,
        "skipped": skipped,
    }


SECTION_TITLES = {
    "engine": "Engine overhead: compute() against a plain torch reference (h=8, head size 64, d_model=512)",
    "display": "Display reduction of the weights (8 heads x T x T)",
    "memory": "Peak memory of fresh subprocesses",
    "model": "Model mode: all-MiniLM-L6-v2 (6 layers, 12 heads, d_model 384), run by the engine",
    "window": "The window (offscreen, 1600 x 1000): control change -> every visible map repainted",
    "startup": "Start-up of fresh subprocesses",
}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "MiB":
        return f"{value:.0f} MiB"
    return f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms"


def format_report(report: dict[str, Any]) -> str:
    """The report as plain-text tables, one per section, then the profiles and skipped parts."""
    meta = report["meta"]
    lines = [
        f"attn-gui bench ({report['settings']['mode']}) {meta['date']}",
        f"device {meta['device']} ({meta['device_name']}), {meta['cpu_count']} CPUs, "
        f"{meta['torch_threads']} torch threads, torch {meta['torch']}",
    ]
    header = ("name", "size", "median", "p95", "runs", "ratio / target", "met")
    for section, title in SECTION_TITLES.items():
        rows = [r for r in report["rows"] if r["section"] == section]
        if not rows:
            continue
        table = [header]
        for r in rows:
            ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
            if r["target"] is not None:
                ratio += f" / {r['target']:.2f}"
            met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
            table.append((r["name"], r["size"], _fmt(r["median"], r["unit"]), _fmt(r["p95"], r["unit"]),
                          str(r["runs"]), ratio, met))
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        lines += ["", title]
        for i, row in enumerate(table):
            cells = [c.ljust(w) if j < 2 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths))]
            lines.append("  " + "  ".join(cells).rstrip())
            if i == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        ratio_notes = sorted({f"{r['name']}: ratio to {r['ratio_to']}" for r in rows if r["ratio_to"]})
        lines += [f"  ({note})" for note in ratio_notes]
    for prof in report["profiles"]:
        lines += ["", f"Where compute() spends its time at T={prof['T']} "
                      f"({prof['total_ms']:.2f} ms per call, cProfile own time, {prof['runs']} calls)"]
        lines += [f"  {e['share'] * 100:5.1f}%  {e['ms']:9.3f} ms  {e['function']}" for e in prof["top"]]
    if report["notes"]:
        lines.append("")
        lines += [f"note: {n}" for n in report["notes"]]
    if report["skipped"]:
        lines.append("")
        lines += [f"skipped: {s['name']}: {s['reason']}" for s in report["skipped"]]
    return "\n".join(lines)


def write_json(report: dict[str, Any], path: str | os.PathLike) -> None:
    """Write the report as indented JSON, creating the parent folder if needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def run_bench_cli(args) -> int:
    """``attn-gui bench``: run, print progress to stderr and the tables to stdout; 0 on success.

    Parameters
    ----------
    args : argparse.Namespace
        With ``quick``, ``device``, ``json`` and ``engine_only``.
    """
    tiny = os.environ.get(TINY_ENV, "") not in ("", "0")
    settings = BenchSettings.for_mode(quick=args.quick, device=args.device, engine_only=args.engine_only,
                                      tiny=tiny)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    report = run_bench(settings, log)
    print(format_report(report))
    if args.json:
        write_json(report, args.json)
        print(f"\nwrote {args.json}")
    return 0


"""Display reduction: what the window fetches, ``display("weights", 384, 384)``, against the full array."""

from __future__ import annotations

from ..engine import compute
from ..engine.base.devices import resolve_device
from ..present.frame import make_frame
from ..present.frame import DISPLAY_MAX
from .settings import BenchSettings, engine_config
from .timing import Log, Row, time_interleaved


def bench_display(settings: BenchSettings, log: Log) -> list[Row]:
    """``display("weights", 384, 384)`` against ``numpy("weights")`` at ``settings.display_T``.

    A third row times ``numpy("weights").copy()``: on the CPU ``numpy()`` shares the
    tensor's memory, so only the copy shows what a full host copy costs there.
    """
    T = settings.display_T
    log(f"display reduction T={T} on {settings.device} ...")
    result = compute(engine_config(T, settings.device))
    timings = time_interleaved(
        {
            "display": lambda: result.display("weights", DISPLAY_MAX, DISPLAY_MAX),
            "numpy": lambda: result.numpy("weights"),
            "copy": lambda: result.numpy("weights").copy(),
        },
        settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s,
    )
    shown = result.display("weights", DISPLAY_MAX, DISPLAY_MAX)
    full_bytes = result.weights.numel() * result.weights.element_size()
    size = f"T={T}"
    numpy_name = 'numpy("weights")'
    log(f"compute and display arrays T={T}, full and streamed ...")
    config = engine_config(T, settings.device)
    whole = time_interleaved(
        {"full": lambda: make_frame(0, compute(config), DISPLAY_MAX),
         "streamed": lambda: make_frame(0, compute(config, display_max=DISPLAY_MAX), DISPLAY_MAX)},
        settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s,
    )
    full_name = "full compute, then display arrays"
    return [*_gpu_frame(settings, log),
        Row.timed("display", full_name, size, whole["full"]),
        Row.timed("display", "streamed compute (the window's)", size, whole["streamed"],
                  ratio=whole["streamed"].median_ms / whole["full"].median_ms, ratio_to=full_name),
        Row.timed("display", numpy_name, size, timings["numpy"], extra={"bytes": full_bytes}),
        Row.timed("display", 'numpy("weights").copy()', size, timings["copy"], extra={"bytes": full_bytes}),
        Row.timed("display", f'display("weights", {DISPLAY_MAX}, {DISPLAY_MAX})', size, timings["display"],
                  ratio=timings["display"].median_ms / timings["numpy"].median_ms, ratio_to=numpy_name,
                  extra={"bytes": int(shown.nbytes), "shape": list(shown.shape)}),
    ]


GPU_FRAME_T = 8192
GPU_FRAME_TARGET_MS = 25.0


def _gpu_frame(settings: BenchSettings, log: Log) -> list[Row]:
    """On a GPU: a T = 8192, 8-head frame from compute start to the host arrays the window draws."""
    if resolve_device(settings.device).type == "cpu" or settings.mode == "tiny":
        return []
    log(f"window frame T={GPU_FRAME_T} on {settings.device} ...")
    config = engine_config(GPU_FRAME_T, settings.device)
    timing = time_interleaved({"frame": lambda: make_frame(0, compute(config, display_max=DISPLAY_MAX))},
                              settings.device, settings.min_repeats, settings.max_repeats, settings.budget_s)["frame"]
    return [Row.timed("display", "compute start to the window's host arrays", f"T={GPU_FRAME_T}", timing,
                      target=GPU_FRAME_TARGET_MS, met=timing.p95_ms <= GPU_FRAME_TARGET_MS)]


def display_notes(device: str) -> list[str]:
    """How to read the display rows on ``device``."""
    if resolve_device(device).type != "cpu":
        return []
    return ['on the CPU numpy("weights") shares the tensor\'s memory and copies nothing; '
            'numpy("weights").copy() is what a full host copy costs']

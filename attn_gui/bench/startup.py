"""Start-up: wall time of fresh Python subprocesses, from the bare interpreter to the window's first frame."""

from __future__ import annotations

import tempfile
import time

from .settings import BenchSettings, qt_skip_reason
from .timing import Log, Row, Timing, child_env, last_error_line, run_python

# Run in a fresh interpreter with the launch time as argv[1]; prints "painted <ms>" at the first frame.
WINDOW_STARTUP_CODE = """
import time, sys
t0 = float(sys.argv[1])
from PySide6 import QtCore, QtWidgets
from attn_gui.ui.main_window import MainWindow
app = QtWidgets.QApplication(sys.argv[:1])
win = MainWindow()
win.show()
def painted(*_):
    app.processEvents()  # run the queued paints of the first frame
    print(f"painted {(time.time() - t0) * 1e3:.1f}", flush=True)
    QtCore.QTimer.singleShot(0, app.quit)
if win.frame is None:  # computed in the worker thread
    win.frameShown.connect(painted)
else:  # a small config was computed while the window was built
    QtCore.QTimer.singleShot(0, painted)
app.exec()
"""


def time_command(code: str, repeats: int = 3, warmup: int = 1) -> Timing:
    """Wall time of ``python -c code`` in fresh subprocesses (``warmup`` untimed runs first)."""
    samples = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        proc = run_python(code)
        if proc.returncode != 0:
            raise RuntimeError(f"python -c {code!r} failed: {last_error_line(proc)}")
        if i >= warmup:
            samples.append((time.perf_counter() - start) * 1e3)
    return Timing(samples)


def measure_window_startup(repeats: int = 3) -> Timing:
    """Wall time from launching a fresh ``python`` to the main window's first painted frame.

    The window runs offscreen unless QT_QPA_PLATFORM is set, with its settings in a
    temporary folder.

    Raises
    ------
    RuntimeError
        When the window does not start.
    """
    env = child_env()
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        env["ATTN_GUI_CONFIG_DIR"] = tmp
        for _ in range(repeats):
            proc = run_python(WINDOW_STARTUP_CODE, repr(time.time()), env=env)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("painted ")), None)
            if proc.returncode != 0 or line is None:
                raise RuntimeError(f"the window did not start: {last_error_line(proc)}")
            samples.append(float(line.split()[1]))
    return Timing(samples)


def bench_startup(settings: BenchSettings, log: Log) -> tuple[list[Row], list[dict[str, str]]]:
    """Start-up times of the interpreter alone, torch + PySide6.QtWidgets, attn_gui.engine and the window."""
    rows: list[Row] = []
    skipped: list[dict[str, str]] = []
    reps, warm = settings.startup_repeats, settings.startup_warmup
    qt_name = "import torch, PySide6.QtWidgets"
    qt_reason = qt_skip_reason(settings)

    def skip(name: str, reason: str) -> None:
        log(f"skipped: {name}: {reason}")
        skipped.append({"name": name, "reason": reason})

    log("start-up: python -c pass ...")
    rows.append(Row.timed("startup", "python -c pass", "-", time_command("pass", reps, warm)))
    qt = None
    if qt_reason:
        skip(qt_name, qt_reason)
    else:
        log(f"start-up: {qt_name} ...")
        qt = time_command(qt_name, reps, warm)
        rows.append(Row.timed("startup", qt_name, "-", qt))
    log("start-up: import attn_gui.engine ...")
    engine = time_command("import attn_gui.engine", reps, warm)
    ratio = {"ratio": engine.median_ms / qt.median_ms, "ratio_to": qt_name} if qt else {}
    rows.append(Row.timed("startup", "import attn_gui.engine", "-", engine, **ratio))
    if qt_reason:
        skip("window start-up", qt_reason)
    else:
        log("start-up: the window ...")
        try:
            rows.append(Row.timed("startup", "window start-up", "-", measure_window_startup(reps)))
        except RuntimeError as exc:
            skip("window start-up", str(exc))
    return rows, skipped

"""The terminal around a command: signals (Ctrl-C, SIGTERM) as a request to stop, progress lines on stderr,
and the refusal to open a window where there is no display."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any
from collections.abc import Callable, Iterator

from .common import UsageError, one_line

LAUNCHED = False  # run as the program (launch.main): its signal handlers never raise; set by cli.main


class Stop(threading.Event):
    """Set by Ctrl-C or SIGTERM once ``writing`` (``interrupts``): the work stops between its steps."""

    writing = False


def stop_now(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts() -> Iterator[Stop]:
    """Ctrl-C and SIGTERM as a request to stop: yields an Event the export asks between files.

    Until the export starts writing (``stop.writing = True``) a signal is handled as before
    it (the compute holds no files): the program (``launch``) ends at once with one line and
    exit 130, never raising inside Qt's or torch's C code; ``main`` called in-process raises
    KeyboardInterrupt. Once writing, a signal only sets the event, so no exception ever
    unwinds through Qt's drawing code; the program keeps this handler to its end, so a
    signal after the files are written changes nothing (exit 0, the summary its one line).
    """
    stop = Stop()

    def handler(signum, frame):
        if stop.writing:
            stop.set()
            return
        previous = old[signum]
        if previous == signal.SIG_IGN:
            return
        if callable(previous):
            previous(signum, frame)  # launch's: one line and exit 130; or Python's: KeyboardInterrupt
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        if not LAUNCHED:
            for sig, previous in old.items():
                signal.signal(sig, previous)


@contextlib.contextmanager
def raising_interrupts() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt (in the main thread), so work that holds other processes
    (a local Ray and its workers) stops them before the program's one line and exit 130; set back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, stop_now) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


def tty_progress(done: int, total: int) -> None:
    """One self-overwriting line on a terminal's stderr (only there: logs stay clean)."""
    sys.stderr.write(f"\rattn-gui: writing file {done} of {total} ({100 * done // total}%)")
    if done == total:
        sys.stderr.write("\r\033[K")  # the bar goes; the summary line follows on stdout
    sys.stderr.flush()


def passages_progress(command: str, rate: bool = False) -> Callable[[Any], None] | None:
    """A run over passages' progress (``engine.analysis.corpus.census.Progress``): one self-overwriting line on a
    terminal's stderr, passages done (their rate where ``rate``) and the time left; None off a terminal."""
    if not sys.stderr.isatty():
        return None

    def progress(p) -> None:
        left = "" if p.left is None else f", {int(p.left) // 60} min {int(p.left) % 60:02d} s left"
        speed = f", {p.rate:.1f} passages/s" if rate else ""
        sys.stderr.write(f"\rattn-gui {command}: {p.done:,} of {p.total:,} passages{speed}{left}\033[K")
        if p.done == p.total:
            sys.stderr.write("\r\033[K")
        sys.stderr.flush()

    return progress


def stage_progress() -> Callable[[int, int, str], None]:
    """Progress on stderr: one self-overwriting line on a terminal, else a line every 10 % of each stage."""
    shown: dict[str, int] = {}
    tty = sys.stderr.isatty()

    def progress(done: int, total: int, what: str) -> None:
        percent = 100 * done // max(total, 1)
        if tty:
            sys.stderr.write(f"\rattn-gui circuit: {what} {done} of {total} ({percent}%)\033[K")
            if done == total:
                sys.stderr.write("\r\033[K")
        elif percent >= shown.get(what, -10) + 10 or done == total:
            shown[what] = percent
            sys.stderr.write(f"attn-gui circuit: {what} {done} of {total} ({percent}%)\n")
        sys.stderr.flush()
    return progress


NO_DISPLAY = ("so the window cannot open; run it in a desktop session or over ssh -X, or use attn-gui export / "
              "generate, which need none")


def check_display() -> None:
    """Refuse, in one line, to open the window on Linux with no display, or an X display that does not
    answer (Qt would abort on xcb: exit 134 and a core dump)."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM") or os.environ.get("WAYLAND_DISPLAY"):
        return
    display = os.environ.get("DISPLAY")
    if not display:
        raise UsageError(f"attn-gui: there is no display (DISPLAY and WAYLAND_DISPLAY are unset), {NO_DISPLAY}")
    if not _x_answers(display):
        raise UsageError(f"attn-gui: there is no display: nothing answers at DISPLAY={one_line(display, 60)}, "
                         f"{NO_DISPLAY}")


def _x_answers(display: str) -> bool:
    """Whether an X server accepts a connection at ``display`` ("[host]:N[.S]"); True for a form not known here."""
    import socket

    host, _, rest = display.rpartition(":")
    number = rest.partition(".")[0]
    if not number.isdigit() or host.startswith("/"):
        return True  # another form (a launchd socket path …): Qt is left to try it
    try:
        if host in ("", "unix"):  # a local server: its socket file, else Linux's abstract socket of that name
            for address in (f"/tmp/.X11-unix/X{number}", f"\0/tmp/.X11-unix/X{number}"):
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(2)
                    try:
                        s.connect(address)
                        return True
                    except OSError:
                        continue
            return False
        with socket.create_connection((host, 6000 + int(number)), timeout=2):
            return True
    except (OSError, ValueError, OverflowError):
        return False

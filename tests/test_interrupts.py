"""Ctrl-C at any moment of ``attn-gui export --format png`` (issue 38, item 3): one line at most, exit 0 or
130, never a crash inside Qt or PySide6's start-up (a segfault, an abort, a silent -2), nothing half-written.

Python's ``signal`` semantics are the peer: a handler that raises KeyboardInterrupt does so wherever the
interpreter is, inside an import of PySide6 or a Qt paint override too, which aborted or crashed the
program; the handlers now set a flag or leave with ``os._exit`` after one line.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DELAYS = [3.0 * i / 19 for i in range(20)]  # twenty moments, 0 to 3 s after the program's first line
BATCH = 4  # run side by side: the moments are measured from each program's own start


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux: SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (sig - 1) & 1)


def _interrupted(tmp_path: Path, delays: list[float]) -> list[tuple[float, int, str, str, Path]]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    runs = []
    for i, delay in enumerate(delays):
        out = tmp_path / f"run{i}" / "out"
        out.parent.mkdir()
        proc = subprocess.Popen([sys.executable, "-m", "attn_gui", "export", "--format", "png", "--heads", "4",
                                 "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        runs.append((delay, proc, out))
    started = {}
    sent = set()
    while len(sent) < len(runs):
        now = time.monotonic()
        for delay, proc, _ in runs:
            if proc.pid in sent:
                continue
            if proc.pid not in started and (_catches(proc.pid, signal.SIGTERM) or proc.poll() is not None):
                started[proc.pid] = now  # launch's first line has run
            if proc.pid in started and now - started[proc.pid] >= delay:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                sent.add(proc.pid)
        time.sleep(0.002)  # polling the processes' state, not synchronising with them
    results = []
    for delay, proc, out in runs:
        stdout, stderr = proc.communicate(timeout=300)
        results.append((delay, proc.returncode, stdout.decode(), stderr.decode(), out))
    return results


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("batch", range(len(DELAYS) // BATCH))
def test_twenty_interrupts_during_a_png_export_each_end_in_one_line(tmp_path, batch):
    for delay, code, stdout, stderr, out in _interrupted(tmp_path, DELAYS[batch * BATCH:(batch + 1) * BATCH]):
        said = (stdout + stderr).strip().splitlines()
        assert code in (0, 130), (delay, code, stderr[-3000:])
        assert len(said) <= 1 and "Traceback" not in stderr, (delay, said[:5])
        if code == 0:  # finished before the signal came, or after its files were written: whole
            assert said[0].startswith("wrote ") and (out / "manifest.json").is_file(), (delay, said)
        else:
            assert not out.exists(), delay
        assert [p.name for p in out.parent.iterdir() if p.name != "out"] == [], delay  # no hidden half-export

"""Issue 20's reproductions: each gives one line and exit 2 (130 for an interrupt), no traceback,
no segfault, no file left behind."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attn_gui.cli import build_parser, main
from attn_gui.engine import OPTIONS

REPO = Path(__file__).resolve().parents[1]


def attn_gui(*argv, cwd, **kw):
    """``python -m attn_gui ARGV`` in a real process (bytes arguments allowed)."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run([sys.executable, "-m", "attn_gui", *argv], capture_output=True, cwd=cwd, env=env,
                          timeout=120, **kw)


def test_png_export_into_a_folder_name_that_is_not_utf8(tmp_path):
    # Qt made from sys.argv crashed (exit 139) on the undecodable bytes
    out = os.fsencode(tmp_path) + b"/bad\xfe2"
    proc = attn_gui("export", "--format", "png", "--out", out, "--heads", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    assert os.path.isfile(out + b"/figure.png")


def test_an_overlong_out_name_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / ("x" * 300)
    proc = attn_gui("export", "--format", "npy", "--out", str(out), cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr, err
    assert len(err.strip().splitlines()) == 1 and "too long" in err
    assert os.listdir(tmp_path) == []


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (Linux: SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught >> (sig - 1) & 1)


def test_the_program_catches_interrupts_before_importing_anything_of_its_own():
    # python -X importtime lists modules as they finish: after the interpreter's own start-up
    # (site) only the package (which imports nothing) and the launcher with signal come first
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "attn_gui", "--version"],
                          capture_output=True, text=True, timeout=120)
    names = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    before = names[names.index("site") + 1:names.index("attn_gui.launch")]
    assert set(before) <= {"runpy", "attn_gui", "signal", "os"}, before
    assert names.index("attn_gui.launch") < names.index("attn_gui.cli")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_start_up_is_one_line_and_exit_130(tmp_path, sig, delay):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "attn_gui", "export", "--format", "npy", "--out",
                             str(tmp_path / "out")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # started: attn-gui's first line has run (it catches SIGTERM, which Python leaves alone); from
    # here on, whatever the moment (its own imports take about 0.2 s, torch and Qt then seconds),
    # one line and 130. Before it only the interpreter's own start-up runs.
    while not _catches(proc.pid, signal.SIGTERM) and proc.poll() is None:
        time.sleep(0.001)
    time.sleep(delay)  # the signal arrives at a chosen moment of the imports, as a person's Ctrl-C would
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err, err.decode()
    if out.startswith(b"wrote "):  # finished before the signal (at most killed while the interpreter shut down)
        assert proc.returncode in (0, -sig) and not err
        return
    assert proc.returncode == 130, (proc.returncode, err.decode())
    assert len(err.decode().strip().splitlines()) == 1  # "interrupted", or "cancelled" once writing
    assert not (tmp_path / "out").exists()


def test_abbreviations_are_refused():
    # "--head" was read as "--heads" by prefix; every parser refuses prefixes now
    assert main(["export", "--out", "x", "--hea", "2"]) == 2
    assert main(["generate", "--ste", "2"]) == 2


def test_the_help_of_a_no_flag_says_what_it_does():
    help_text = build_parser()._subparsers._group_actions[0].choices["export"].format_help()
    flat = " ".join(help_text.split())
    assert "--no-scale do not divide the scores" in flat
    assert "--no-projections do not project" in flat


def test_ranges_print_as_integers():
    help_text = build_parser()._subparsers._group_actions[0].choices["export"].format_help()
    flat = " ".join(help_text.split())
    assert "e+" not in flat
    seed = OPTIONS["seed"]
    assert f"{seed.lo} to {seed.hi}" in flat


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the display check is Linux's")
def test_no_display_is_one_line_and_exit_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run([sys.executable, "-m", "attn_gui"], capture_output=True, env=env, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "no display" in err and "attn-gui export" in err


def test_the_license_is_an_spdx_string():
    import tomllib  # setuptools >= 77 reads it; the table form is deprecated (a warning on every build)

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"


QUIT_WITHOUT_CLOSING = """
import sys
from PySide6 import QtCore, QtWidgets
app = QtWidgets.QApplication(["attn-gui"])
from attn_gui.ui.app import open_window
from attn_gui.ui.settings import Settings
from pathlib import Path
import time


def run():  # as run_gui: the window is a local, deleted when exec returns
    window = open_window(settings=Settings(Path(sys.argv[1]), memory_only=True))
    window.show()
    window.generation.runner.start("step", lambda: time.sleep(1.0))  # a Generate step in progress, as reported
    QtCore.QTimer.singleShot(200, app.quit)  # quit with the window open, its threads running
    return app.exec()


sys.exit(run())
"""


def test_quitting_without_closing_the_window_stops_its_threads(tmp_path):
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", QUIT_WITHOUT_CLOSING, str(tmp_path / "settings.json")],
                          capture_output=True, env=env, timeout=60, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 0 and "QThread" not in err, (proc.returncode, err)


def test_export_head_out_of_range_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "out"
    proc = attn_gui("export", "--format", "png", "--out", str(out), "--heads", "2", "--head", "3", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr, err
    assert err.strip().splitlines() == ["attn-gui: this config has heads 1 to 2; got --head 3"]
    assert not out.exists()


def test_export_head_is_the_head_figure_png_shows(tmp_path, monkeypatch, capsys):
    import attn_gui.render.offscreen as offscreen

    shown = []
    caption = offscreen.figure_caption
    monkeypatch.setattr(offscreen, "figure_caption", lambda result, head: shown.append(head) or caption(result, head))
    assert main(["export", "--format", "png", "--out", str(tmp_path / "out"), "--heads", "2", "--head", "2",
                 "--sentence", "the cat sat"]) == 0
    assert shown == [1]  # head 2 as a reader counts it, index 1 of the head axis
    assert {"weights_head1.png", "weights_head2.png", "figure.png"} <= set(os.listdir(tmp_path / "out"))


def test_grouped_query_images_are_named_like_their_csvs(tmp_path):
    # were k_head1..k_head<h>.png beside k_kv1..k_kv<g>.csv
    out = tmp_path / "out"
    assert main(["export", "--format", "png,csv", "--out", str(out), "--preset", "grouped-query"]) == 0
    names = set(os.listdir(out))
    for field in ("k", "v", "w_k", "w_v"):
        pngs = {n[:-4] for n in names if n.startswith(f"{field}_") and n.endswith(".png")}
        csvs = {n[:-4] for n in names if n.startswith(f"{field}_") and n.endswith(".csv")}
        assert pngs == csvs and pngs and all("_kv" in n for n in pngs), (field, pngs, csvs)
    assert {"q_head1.png", "q_head1.csv"} <= names


def test_a_decoder_figure_carries_the_next_token_top_5(tmp_path, monkeypatch):
    import attn_gui.render.offscreen as offscreen
    from attn_gui.engine import compute
    from attn_gui.engine.config.config import AttentionConfig

    titles = []
    with_title = offscreen._with_title
    monkeypatch.setattr(offscreen, "_with_title", lambda body, *lines: titles.append(lines) or with_title(body, *lines))
    args = ["--model", "smollm2-135m", "--sentence", "The cat sat on the"]
    assert main(["export", "--format", "png", "--out", str(tmp_path / "out"), *args]) == 0
    top = compute(AttentionConfig(model="smollm2-135m", sentence="The cat sat on the")).next_tokens
    assert len(top) == 5 and len(titles) == 1
    subtitle = titles[0][1]
    for token, p in top:
        assert f"“{token}” {p:.1%}" in subtitle


def test_an_export_over_the_size_guard_needs_yes(tmp_path, monkeypatch, capsys):
    from attn_gui.export import bundle

    monkeypatch.setattr(bundle, "CONFIRM_BYTES", 10_000)
    out = tmp_path / "out"
    argv = ["export", "--format", "npy,csv", "--out", str(out), "--heads", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--yes" in err and "nothing was written" in err
    assert not out.exists()
    assert main([*argv, "--yes"]) == 0 and (out / "manifest.json").exists()


def test_an_export_over_a_minute_needs_yes_though_small_on_disk(tmp_path, capsys):
    # 32 heads of 128 tokens: about 330 pictures, some 140 MB but over a minute to draw (80 s measured)
    out = tmp_path / "out"
    words = " ".join(f"w{i}" for i in range(128))
    argv = ["export", "--out", str(out), "--heads", "32", "--d-model", "64", "--d-k", "16", "--d-v", "16",
            "--sentence", words]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "longer than a minute" in err and "--yes" in err, err
    minutes = re.search(r"take about (\d+) min", err)
    assert minutes and int(minutes.group(1)) >= 1 and not out.exists()


@pytest.mark.parametrize("formats, tokens", [("png,svg,npy,csv", 12), ("npy,csv", 12), ("csv", 2000), ("svg", 128)])
def test_the_size_estimate_is_within_2x_of_the_written_size(tmp_path, formats, tokens):
    from attn_gui.engine import compute
    from attn_gui.engine.config.config import AttentionConfig
    from attn_gui.export.bundle import ExportTooLarge, export_all
    from attn_gui.present.frame import make_frame

    if "png" in formats:
        from attn_gui.render.offscreen import ensure_app
        ensure_app(offscreen=True)
    sentence = " ".join(["cat"] * tokens)
    frame = make_frame(0, compute(AttentionConfig(sentence=sentence, heads=1, d_model=8)))
    assert frame.result.seq_len >= tokens
    with pytest.raises(ExportTooLarge) as refused:
        export_all(frame, tmp_path / "a", formats, confirm_over=0)
    assert not (tmp_path / "a").exists()
    written = export_all(frame, tmp_path / "b", formats, confirm_over=None)
    size = sum(p.stat().st_size for p in written)
    assert 0.5 <= refused.value.need / size <= 2, (refused.value.need, size)


@pytest.mark.parametrize("change, words", [
    ({"head": 4}, "head 5"), ({"token": 999_999}, "token 1000000"), ({"focus": "nope"}, "focus"),
    ({"config": {"model": "minilm-l6", "layer": 98}}, "layer"),
])
def test_a_session_that_disagrees_with_its_config_is_refused_in_one_line(change, words):
    from attn_gui.engine import AttentionConfig, UserError
    from attn_gui.present.session import parse_session, session_dict
    from attn_gui.present.state import ViewState

    data = session_dict(ViewState(AttentionConfig(sentence="the cat sat", heads=1)))
    if "config" in change:
        data["state"]["config"].update(change["config"])
    else:
        data["state"].update(change)
    with pytest.raises((ValueError, UserError)) as refused:
        parse_session(json.dumps(data))
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_a_terminal_sees_the_export_progress_and_a_pipe_does_not(tmp_path):
    import pty

    main_fd, child_fd = pty.openpty()
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    argv = [sys.executable, "-m", "attn_gui", "export", "--format", "npy,csv", "--heads", "2"]
    proc = subprocess.run([*argv, "--out", str(tmp_path / "a")], stderr=child_fd, stdout=subprocess.PIPE,
                          env=env, timeout=120)
    os.close(child_fd)
    seen = os.read(main_fd, 65536).decode()
    os.close(main_fd)
    assert proc.returncode == 0 and "writing file 1 of" in seen and "(100%)" in seen
    piped = attn_gui("export", "--format", "npy,csv", "--heads", "2", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert piped.returncode == 0 and piped.stderr == b""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the display check is Linux's")
@pytest.mark.parametrize("argv, display", [([], ":99"), (["lesson", "2-qkv", "--step", "2"], None),
                                           (["lesson", "2-qkv", "--step", "2"], ":99")])
def test_an_unreachable_display_or_a_lesson_without_one_is_one_line(argv, display):
    # Qt aborted on xcb (exit 134, a core dump); nothing listens at :99 here (no /tmp/.X11-unix/X99)
    assert not Path("/tmp/.X11-unix/X99").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    if display:
        env["DISPLAY"] = display
    proc = subprocess.run([sys.executable, "-m", "attn_gui", *argv], capture_output=True, env=env, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "there is no display" in err and "attn-gui export" in err


# Ctrl-C at any moment of ``attn-gui export --format png`` (issue 38, item 3): one line at most, exit 0 or
# 130, never a crash inside Qt or PySide6's start-up (a segfault, an abort, a silent -2), nothing half-written.
# Python's ``signal`` semantics are the peer: a handler that raises KeyboardInterrupt does so wherever the
# interpreter is, inside an import of PySide6 or a Qt paint override too, which aborted or crashed the program;
# the handlers now set a flag or leave with ``os._exit`` after one line.
DELAYS = [3.0 * i / 19 for i in range(20)]  # twenty moments, 0 to 3 s after the program's first line
BATCH = 4  # run side by side: the moments are measured from each program's own start


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

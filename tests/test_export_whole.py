"""Whole exports: the target holds the complete previous export or the complete new one.

Interrupts are real signals sent to a subprocess mid-export; a full disk is a patched
write; leftovers of a killed run are made by SIGKILL.
"""

import errno
import importlib
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from attn_gui.cli import main
from attn_gui.engine import AttentionConfig, TooLargeError, compute
from attn_gui.export import arrays, bundle
from attn_gui.export.files import ExportError
from attn_gui.export.folder import Cancelled
from attn_gui.present.frame import make_frame
from attn_gui.present.files import WriteError

compute_mod = importlib.import_module("attn_gui.engine.run.compute")
REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO)}


def snapshot(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {p.name: p.read_bytes() if p.is_file() else None for p in sorted(folder.iterdir())}


def leftovers(parent: Path) -> list[str]:
    return sorted(n for n in os.listdir(parent) if "attn-gui" in n or n.endswith(".tmp"))


def run(argv):
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.fixture
def previous(tmp_path):
    """A folder holding a complete arrays export of the default config."""
    out = tmp_path / "figs"
    assert run(["export", "--out", str(out), "--format", "npy,csv"]) == 0
    return out, snapshot(out)


def start_export(out: Path, *options: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "attn_gui", "export", "--out", str(out), *options]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)


def wait_for_partial(proc: subprocess.Popen, parent: Path, files: int = 1, deadline: float = 60) -> Path:
    """The hidden folder of a running export, once it holds ``files`` files."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        for name in os.listdir(parent):
            if name.endswith(".partial") and len(os.listdir(parent / name)) >= files:
                return parent / name
    raise AssertionError("the export never started writing")


SLOW = ("--heads", "4", "--format", "png,svg,npy", "--sentence", " ".join(f"w{i}" for i in range(24)))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_export_cancels_it_and_changes_nothing(previous, sig):
    out, before = previous
    proc = start_export(out, *SLOW)
    wait_for_partial(proc, out.parent, files=2)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr == f"attn-gui: export cancelled; nothing changed in {out}\n"
    assert stdout == ""
    assert snapshot(out) == before
    assert leftovers(out.parent) == []


def test_a_killed_export_leaves_the_target_whole_and_the_next_run_cleans_up(previous):
    out, before = previous
    proc = start_export(out, *SLOW)
    wait_for_partial(proc, out.parent, files=1)
    proc.kill()
    proc.communicate()
    assert snapshot(out) == before  # the kill changed nothing in the target
    assert leftovers(out.parent)  # the hidden folder of the killed run
    (out / ".x.npy.0123abcd.tmp").write_bytes(b"half a file")  # as an old version's killed fsync left
    assert run(["export", "--out", str(out), "--format", "npy"]) == 0
    assert leftovers(out.parent) == [] and leftovers(out) == []
    assert sorted(os.listdir(out)) == sorted(json.loads((out / "manifest.json").read_text())["files"]
                                             + ["manifest.json"])


def test_a_full_disk_keeps_the_previous_export(previous, monkeypatch, capsys):
    out, before = previous
    real = arrays.atomic_write
    count = []

    def fill_up(path, data):
        count.append(path)
        if len(count) > 3:
            raise WriteError(f"cannot write {path}: {os.strerror(errno.ENOSPC)}")
        real(path, data)

    monkeypatch.setattr(arrays, "atomic_write", fill_up)
    assert run(["export", "--out", str(out), "--format", "npy,csv", "--heads", "2"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert snapshot(out) == before and leftovers(out.parent) == []


def test_not_enough_disk_is_refused_before_writing(tmp_path, monkeypatch):
    import shutil

    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1000))
    frame = make_frame(0, compute(AttentionConfig()))
    with pytest.raises(ExportError, match="needs about .* on disk"):
        bundle.export_all(frame, tmp_path / "out", formats="npy")
    assert os.listdir(tmp_path) == []


def test_a_re_export_replaces_the_previous_one_whole(previous):
    out, _ = previous
    assert run(["export", "--out", str(out), "--format", "npy", "--heads", "3"]) == 0
    info = json.loads((out / "manifest.json").read_text())
    assert sorted(os.listdir(out)) == sorted(info["files"] + ["manifest.json"])  # no stale CSVs
    assert np.load(out / "weights.npy").shape[0] == 3


def test_concurrent_exports_never_mix(tmp_path):
    out = tmp_path / "figs"
    procs = [start_export(out, "--format", "npy,csv", "--seed", str(seed)) for seed in (1, 2, 3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    info = json.loads((out / "manifest.json").read_text())
    assert sorted(os.listdir(out)) == sorted(info["files"] + ["manifest.json"])
    expected = compute(AttentionConfig.from_dict(info["config"]))
    np.testing.assert_array_equal(np.load(out / "x.npy"), expected.numpy("x"))  # the files agree
    np.testing.assert_array_equal(np.loadtxt(out / "x.csv", delimiter=",", ndmin=2).astype(np.float32),
                                  expected.numpy("x"))
    assert leftovers(tmp_path) == []


def test_a_folder_with_other_files_is_refused_untouched(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / ".attn-gui-probe").write_text("and me")  # the old write check's name (issue item 4)
    before = snapshot(out)
    assert run(["export", "--out", str(out), "--format", "npy"]) == 2
    err = capsys.readouterr().err
    assert "holds files that are not an export's ('.attn-gui-probe', 'notes.txt')" in err
    assert "--overwrite" in err and err.count("\n") == 1
    assert snapshot(out) == before


def test_overwrite_writes_among_other_files_and_keeps_them(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "x.npy.bak").write_bytes(b"mine too")
    assert run(["export", "--out", str(out), "--format", "npy", "--overwrite"]) == 0
    assert (out / "notes.txt").read_text() == "keep me" and (out / "x.npy.bak").read_bytes() == b"mine too"
    info = json.loads((out / "manifest.json").read_text())
    assert set(os.listdir(out)) == {"notes.txt", "x.npy.bak", "manifest.json", *info["files"]}
    assert leftovers(tmp_path) == []


def test_an_output_name_that_is_a_folder_is_refused_before_writing(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "weights.npy").mkdir(parents=True)
    (out / "notes.txt").write_text("keep me")
    before = snapshot(out)
    assert run(["export", "--out", str(out), "--format", "npy", "--overwrite"]) == 2
    assert "has a folder or link named 'weights.npy'" in capsys.readouterr().err
    assert snapshot(out) == before and os.listdir(out / "weights.npy") == []


def test_a_folder_named_in_a_manifest_is_not_taken_for_the_exports(previous, capsys):
    out, _ = previous
    info = json.loads((out / "manifest.json").read_text())
    (out / "x.npy").unlink()
    (out / "x.npy").mkdir()  # a user's folder under an exported name: not the export's to replace
    (out / "x.npy" / "data").write_text("keep me")
    assert run(["export", "--out", str(out), "--format", "npy"]) == 2
    assert "not an export's" in capsys.readouterr().err
    assert (out / "x.npy" / "data").read_text() == "keep me" and len(os.listdir(out)) == len(info["files"]) + 1


def test_text_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "o"
    sentence = os.fsdecode(b"abc \xff\xfe def")  # what Python makes of such bytes in argv
    assert run(["export", "--out", str(out), "--sentence", sentence]) == 2
    err = capsys.readouterr().err
    assert "sentence is not valid text" in err and err.count("\n") == 1
    assert not out.exists()


def test_a_refused_compute_leaves_no_folder(tmp_path, capsys):
    out = tmp_path / "o"
    assert run(["export", "--out", str(out), "--sentence", " ".join(f"w{i}" for i in range(33_000))]) == 2
    assert "over the limit" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("out, message", [
    ("", "the output folder name is empty"),
    ("   ", "the output folder name is empty"),
])
def test_an_empty_out_is_refused(tmp_path, monkeypatch, capsys, out, message):
    monkeypatch.chdir(tmp_path)
    assert run(["export", "--out", out, "--format", "npy"]) == 2
    assert message in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_a_dangling_link_is_called_a_link(tmp_path, capsys):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    assert run(["export", "--out", str(link), "--format", "npy"]) == 2
    assert f"{link} is a symbolic link to {tmp_path / 'gone'}, which does not exist" in capsys.readouterr().err


def test_a_link_to_a_folder_exports_into_the_folder(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert run(["export", "--out", str(tmp_path / "link"), "--format", "npy"]) == 0
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real" / "manifest.json").exists()


def test_the_success_line_stays_one_line_with_a_newline_in_the_path(tmp_path, capsys):
    out = tmp_path / "a\nb"
    assert run(["export", "--out", str(out), "--format", "npy"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "a\\nb" in lines[0]


def test_cancel_between_files_removes_the_hidden_folder(previous):
    out, before = previous
    frame = make_frame(0, compute(AttentionConfig(heads=2)))
    calls = []
    with pytest.raises(Cancelled, match=f"export cancelled; nothing changed in {out}"):
        bundle.export_all(frame, out, formats="npy,csv", progress=lambda d, t: calls.append(d),
                          cancel=lambda: len(calls) >= 3)
    assert snapshot(out) == before and leftovers(out.parent) == []


def test_csv_is_streamed_not_built_in_memory(tmp_path):
    matrix = np.random.default_rng(0).standard_normal((700, 700)).astype(np.float32)  # ~7 MB of text
    tracemalloc.start()
    try:
        arrays.atomic_write(tmp_path / "m.csv", lambda f: arrays.write_csv(f, matrix))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (tmp_path / "m.csv").stat().st_size > 5_000_000
    assert peak < 1_000_000


def test_out_of_memory_while_writing_is_one_line(tmp_path, monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(bundle, "write_arrays", no_memory)
    frame = make_frame(0, compute(AttentionConfig()))
    with pytest.raises(ExportError, match="out of memory while writing the export"):
        bundle.export_all(frame, tmp_path / "o", formats="npy")
    assert os.listdir(tmp_path) == []


def test_cpu_out_of_memory_in_the_compute_is_a_user_error(monkeypatch):
    def allocator(*args):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: not enough memory")

    monkeypatch.setattr(compute_mod, "_compute", allocator)
    with pytest.raises(TooLargeError, match=r"out of memory: T = 5 with 1 head\(s\) needs about"):
        compute(AttentionConfig())

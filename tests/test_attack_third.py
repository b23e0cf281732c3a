"""Issue 61 (a third attack run): an export removes only the names it created; a signal during ``circuit``'s write
leaves no hidden folder; a task file is read as a corpus is (regular, bounded) and bad values are one line."""

import json
import os
import subprocess
import sys

import pytest

from attn_gui.export.folder import MANIFEST, Target


def _export(folder, names=("a.csv",)):
    """Write a minimal export (``names`` and a manifest naming them) into ``folder`` through ``Target``."""
    target = Target(folder)
    stage = target.open()
    for name in names:
        (stage / name).write_text("x")
    (stage / MANIFEST).write_text(json.dumps({"attn_gui_export": 1, "files": list(names)}))
    target.commit([*names, MANIFEST])
    return target


def test_a_file_named_like_a_temporary_is_a_persons_and_is_kept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / ".draft.0123abcd.tmp").write_text("mine")
    try:
        _export(out)
    except Exception as exc:  # refused as a folder of other files: fine, as long as the file stays
        assert "--overwrite" in str(exc)
    assert (out / ".draft.0123abcd.tmp").read_text() == "mine"  # before: deleted with the "empty" folder


def test_a_file_saved_into_the_folder_during_an_export_is_kept(tmp_path):
    out = tmp_path / "out"
    _export(out, ("a.csv", "b.csv"))
    target = Target(out)  # the folder holds the previous export only: it is replaced whole
    stage = target.open()
    (stage / "a.csv").write_text("new")
    (stage / MANIFEST).write_text(json.dumps({"attn_gui_export": 1, "files": ["a.csv"]}))
    (out / "notes.txt").write_text("saved meanwhile")  # the person saves a file there while it is written
    target.commit(["a.csv", MANIFEST])
    assert (out / "notes.txt").read_text() == "saved meanwhile"  # before: deleted with the previous export
    assert (out / "a.csv").read_text() == "new" and not (out / "b.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # nothing hidden left beside it


SIGNAL_MID_WRITE = """
import os, signal, sys
import attn_gui.launch as launch  # the program's own handlers: one line and exit 130
from attn_gui.export import circuits
real = circuits._edges
def edges(*args, **kwargs):  # SIGTERM arrives while the first file is written
    os.kill(os.getpid(), signal.SIGTERM)
    return real(*args, **kwargs)
circuits._edges = edges
sys.argv = ["attn-gui", *sys.argv[1:]]
sys.exit(launch.main())
"""


def test_sigterm_during_the_circuit_write_leaves_no_hidden_folder(tmp_path):

    from tiny_decoders import circuit_pairs, tiny_decoder  # tests/

    tiny_decoder("llama", tmp_path / "model")
    pairs = circuit_pairs(tmp_path / "model")
    (tmp_path / "runs").mkdir()
    out = tmp_path / "runs" / "c"
    done = subprocess.run([sys.executable, "-c", SIGNAL_MID_WRITE, "circuit", "--model", str(tmp_path / "model"),
                           "--task", pairs, "--no-faithfulness", "--out", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("attn-gui:") and "Traceback" not in done.stderr
    assert list((tmp_path / "runs").iterdir()) == []  # before: .c.attn-gui-PID-XXXXXXXX.partial stayed


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from tiny_decoders import tiny_decoder  # tests/

    path = tmp_path_factory.mktemp("llama")
    tiny_decoder("llama", path)
    return str(path)


def _task_refused(capsys, model, task, out) -> str:
    from attn_gui.cli import main

    assert main(["circuit", "--model", model, "--task", str(task), "--no-faithfulness", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err


GOOD = {"clean": "the cat sat", "corrupt": "the dog sat", "answer": " on"}


@pytest.mark.parametrize("line, said", [
    (json.dumps({**GOOD, "clean": None}), "line 1: 'clean' is null, not text"),  # before: the prompt "None"
    (json.dumps({**GOOD, "answer": {"a": 1}}), "line 1: 'answer' is an object, not text"),
    (json.dumps({**GOOD, "corrupt": True}), "line 1: 'corrupt' is true, not text"),  # before: "True"
    ('{"clean": "the cat sat", "corrupt": "the dog sat", "answer": NaN}', "line 1: 'answer' is NaN, not text"),
    (json.dumps({**GOOD, "wrong": 3}), "line 1: 'wrong' is 3, not text"),
    ("[" * 200_000 + "]" * 200_000, "line 1: nested too deeply to read"),  # before: RecursionError
    (json.dumps({**GOOD, "clean": "", "corrupt": ""}), "line 1: 'clean' is empty"),  # before: IndexError
    ('{"clean": "the cat \\ud800", "corrupt": "the dog sat", "answer": " on"}',
     "line 1: 'clean' holds a lone surrogate"),  # before: TypeError in the tokenizer
    (json.dumps({**GOOD, "clean": "a " * 2_000_000}), "line 1: 4,000,"),  # before: ChildFailed (50 MB: the same)
])
def test_bad_task_values_are_one_line_naming_the_line_and_field(llama, tmp_path, capsys, line, said):
    task = tmp_path / "task.jsonl"
    task.write_text(line + "\n", encoding="utf-8")
    assert said in _task_refused(capsys, llama, task, tmp_path / "c")


def test_a_task_files_name_with_a_terminal_escape_is_shown_escaped(llama, tmp_path, capsys):
    task = tmp_path / "\x1b[2Jx.jsonl"
    task.write_text('{"clean": null}\n')
    err = _task_refused(capsys, llama, task, tmp_path / "c")
    assert "\x1b" not in err and "\\x1b[2Jx.jsonl line 1" in err  # before: the escape reached the terminal raw


READ = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # before: /dev/zero was read until memory ran out
from attn_gui.engine.base.errors import ConfigError
from attn_gui.engine.analysis.circuits.pairs_file import read_rows
try:
    read_rows(sys.argv[1])
except ConfigError as exc:
    print(exc)
"""


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="a FIFO")
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom"])
def test_a_fifo_or_a_device_as_the_task_is_refused_at_once(tmp_path, kind):
    task = tmp_path / "x.jsonl"
    if kind == "fifo":
        os.mkfifo(task)
    else:
        task.symlink_to(kind)
    try:  # before: the FIFO blocked forever (here: until the timeout)
        done = subprocess.run([sys.executable, "-c", READ, str(task)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {kind} as the task did not return")
    assert done.stdout.strip() == (f"cannot read pairs from x.jsonl: it is a "
                                   f"{'pipe (FIFO)' if kind == 'fifo' else 'device'}, not a regular file"), \
        done.stderr[-500:]


def test_a_compare_folder_name_with_a_newline_keeps_the_bench_table_whole():
    from attn_gui import bench

    label = "trees\nbroken \x1b[31m"  # before: the header split over two lines and the escape reached the terminal
    row = {"section": "window", "name": "update latency", "size": "T=5", "median": 2.0, "p95": 3.0, "unit": "ms",
           "runs": 2, "ratio": 1.0, "ratio_to": label, "target": None, "met": None,
           "extra": {"compared_median": 2.0, "compared_p95": 3.0, "load": [[0.1, 0.2]], "compared_load": [[0.1, 0.2]]}}
    report = {"meta": {"date": "-", "device": "cpu", "device_name": "-", "cpu_count": 2, "torch_threads": 1,
                       "torch": "-"}, "settings": {"mode": "tiny"}, "rows": [row],
              "profiles": [], "notes": [f"slower than {label}: update latency"], "skipped": []}
    table = bench.format_report(report)
    assert "\x1b" not in table and "trees\\nbroken \\x1b[31m median" in table
    header = next(line for line in table.splitlines() if line.lstrip().startswith("name"))
    rule = table.splitlines()[table.splitlines().index(header) + 1]
    assert len(header.rstrip()) == len(rule.rstrip())  # the columns still line up under their rule
    assert "note: slower than trees\\nbroken \\x1b[31m: update latency" in table


def test_a_raw_line_separator_inside_a_task_string_is_one_line(tmp_path):
    from attn_gui.engine.analysis.circuits.pairs_file import read_rows

    task = tmp_path / "t.jsonl"
    task.write_text('{"clean": "a\u2028b", "corrupt": "c d", "answer": " e"}\r\n', encoding="utf-8", newline="")
    assert read_rows(task) == [("t.jsonl line 1", "a\u2028b", "c d", " e", None)]  # before: "not JSON" on line 1


def test_a_full_disk_during_circuit_is_one_line_and_keeps_the_old_export(llama, tmp_path, capsys, monkeypatch):
    import errno

    from attn_gui.cli import main
    from attn_gui.export import circuits
    from tiny_decoders import circuit_pairs  # tests/

    pairs = circuit_pairs(tmp_path)
    out = tmp_path / "c"
    args = ["circuit", "--model", llama, "--task", pairs, "--no-faithfulness", "--out", str(out)]
    assert main(args) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()

    def full(svg, path):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(circuits, "svg_png", full)
    assert main(args) == 2  # before: OSError's traceback
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress lines
    assert err == f"attn-gui: cannot write to {out}: No space left on device; nothing was changed there"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "pairs.jsonl"]


SIGNAL_MID_ATTRIBUTE = """
import os, pathlib, signal, sys
import attn_gui.launch as launch
real = pathlib.Path.write_text
def write_text(self, *args, **kwargs):  # SIGTERM arrives as components.csv is written
    if self.name == "components.csv":
        os.kill(os.getpid(), signal.SIGTERM)
    return real(self, *args, **kwargs)
pathlib.Path.write_text = write_text
sys.argv = ["attn-gui", *sys.argv[1:]]
sys.exit(launch.main())
"""


def test_sigterm_during_the_attribute_write_leaves_no_hidden_folder(llama, tmp_path):
    from tiny_decoders import SENTENCE  # tests/

    (tmp_path / "runs").mkdir()
    done = subprocess.run([sys.executable, "-c", SIGNAL_MID_ATTRIBUTE, "attribute", "--model", llama, "--sentence",
                           SENTENCE, "--token", "mat", "--out", str(tmp_path / "runs" / "a")], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 130, done.stderr
    assert list((tmp_path / "runs").iterdir()) == []  # before: .a.attn-gui-PID-XXXXXXXX.partial stayed

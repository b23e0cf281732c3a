"""Issue 61 (a third attack run): an export removes only the names it created; a signal during ``circuit``'s write
leaves no hidden folder; a task file is read as a corpus is (regular, bounded) and bad values are one line."""

import json

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
    import subprocess
    import sys

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

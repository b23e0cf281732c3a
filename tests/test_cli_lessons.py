"""`attn-gui lessons` lists the lessons; `attn-gui lesson NAME --step N` checks both before any window."""

from attn_gui.cli import main
from attn_gui.present.lessons import lesson_names


def test_lessons_lists_every_lesson(capsys):
    assert main(["lessons"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == lesson_names()
    assert "7 steps" in out[1]


def test_unknown_lesson_or_step_is_one_line_and_exit_2(capsys):
    assert main(["lesson", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown lesson 'nope'" in err
    assert main(["lesson", "2-qkv", "--step", "8"]) == 2
    assert capsys.readouterr().err == "attn-gui: lesson 2-qkv has steps 1 to 7, not 8\n"
    assert main(["lesson", "2-qkv", "--ste", "3"]) == 2  # no abbreviations
    assert "unrecognized arguments" in capsys.readouterr().err

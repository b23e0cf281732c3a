"""``attn-gui train``: the checkpoint and log it writes, and one line with exit 2 for bad options."""

import csv
import json

import pytest

from attn_gui.cli import main

TINY = ["train", "--task", "copy", "--layers", "1", "--heads", "2", "--d-model", "16", "--symbols", "4",
        "--length", "8", "--batch", "4", "--steps", "5"]


def test_train_writes_a_checkpoint_and_its_log(tmp_path, capsys):
    assert main([*TINY, "--out", str(tmp_path / "ck")]) == 0
    files = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert files == ["config.json", "log.csv", "model.safetensors", "tokenizer.json"]
    rows = list(csv.DictReader((tmp_path / "ck" / "log.csv").read_text().splitlines()))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4, 5]
    assert "loss" in capsys.readouterr().err


def test_train_with_learned_positions_writes_a_gpt2_checkpoint(tmp_path):
    assert main([*TINY, "--positions", "learned", "--out", str(tmp_path / "ck")]) == 0
    config = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert (config["model_type"], config["architectures"]) == ("gpt2", ["GPT2LMHeadModel"])


@pytest.mark.parametrize("bad", [["--heads", "3"], ["--task", "nope"], ["--ste", "3"], ["--steps", "0"],
                                 ["--d-model", "8"], ["--positions", "alibi"], ["--threads", "0"]])
def test_bad_train_options_print_one_line_and_exit_2(tmp_path, capsys, bad):
    assert main([*TINY, "--out", str(tmp_path / "ck"), *bad]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "ck").exists()


def test_train_runs_on_the_threads_asked_and_gives_the_process_its_own_back(tmp_path, monkeypatch, capsys):
    import torch

    from attn_gui.engine import training

    seen, before = [], torch.get_num_threads()
    step = training.Trainer.step
    monkeypatch.setattr(training.Trainer, "step", lambda self: (seen.append(torch.get_num_threads()), step(self))[1])
    assert main([*TINY, "--out", str(tmp_path / "ck")]) == 0
    assert set(seen) == {1} and torch.get_num_threads() == before  # the default: one thread
    assert "left" in capsys.readouterr().err  # the progress bar says the time left

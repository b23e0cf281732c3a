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

    from attn_gui.engine.train.loop import Trainer

    seen, before = [], torch.get_num_threads()
    step = Trainer.step
    monkeypatch.setattr(Trainer, "step", lambda self: (seen.append(torch.get_num_threads()), step(self))[1])
    assert main([*TINY, "--out", str(tmp_path / "ck")]) == 0
    assert set(seen) == {1} and torch.get_num_threads() == before  # the default: one thread
    assert "left" in capsys.readouterr().err  # the progress bar says the time left


def _bad_outs(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    return {"an existing file": str(tmp_path / "a-file"), "below a file": str(tmp_path / "a-file" / "ck"),
            "below a device": "/dev/null/ck", "a virtual file system": "/proc/attn-gui-ck",
            "an over-long name": str(tmp_path / ("n" * 300)), "the root": "/", "empty": "",
            "a folder of other files": str(tmp_path / "full")}


@pytest.mark.parametrize("case", [
    "an existing file", "below a file", "below a device", "a virtual file system", "an over-long name", "the root",
    "empty", "a folder of other files"])
def test_a_bad_out_is_refused_before_the_first_step(tmp_path, capsys, monkeypatch, case):
    from attn_gui.engine.train.loop import Trainer

    steps = []
    monkeypatch.setattr(Trainer, "step", lambda self: steps.append(1))  # a step taken: the test fails
    assert main([*TINY, "--out", _bad_outs(tmp_path)[case]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert steps == []
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("error", ["OSError", "SafetensorError"])
def test_a_full_disk_at_the_save_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, capsys, monkeypatch, error):
    """safetensors raises its own SafetensorError, not an OSError, when the disk fills: the message is the one
    it gave on a full 64 KiB tmpfs here (os error 28, ENOSPC)."""
    import errno
    import os

    import safetensors.torch
    from safetensors import SafetensorError

    out = tmp_path / "ck"
    assert main([*TINY, "--out", str(out)]) == 0
    before = _tree(out)

    def full(*args, **kwargs):
        if error == "OSError":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    capsys.readouterr()
    assert main([*TINY, "--seed", "3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"attn-gui: cannot write the checkpoint to {out}: No space left on device; "
                                            "a previous checkpoint there is kept")
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck"]  # no hidden stage left


def _tree(folder):
    """Every file and folder under ``folder``: its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("seed", [str(2**70), "-1"])
def test_a_seed_out_of_the_generators_range_is_one_line(tmp_path, capsys, seed):
    assert main([*TINY, "--seed", seed, "--out", str(tmp_path / "ck")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "seed must be 0 to 9223372036854775806" in err, err
    assert not (tmp_path / "ck").exists()


def test_out_replaces_only_a_checkpoint_train_wrote(tmp_path, capsys):
    from corpus_data import llama_folder  # tests/

    downloaded = tmp_path / "downloaded"  # a model folder with a model.safetensors, and the user's own files
    llama_folder(downloaded)
    (downloaded / "NOTES.md").write_text("my notes")
    (downloaded / "eval").mkdir()
    (downloaded / "eval" / "scores.csv").write_text("1,2\n")
    trained = tmp_path / "trained"  # a checkpoint train wrote, and a note put beside it since
    assert main([*TINY, "--out", str(trained)]) == 0
    (trained / "NOTES.md").write_text("why this run")
    for folder, said in ((downloaded, "holds files that are not a checkpoint attn-gui train wrote"),
                         (trained, "holds 'NOTES.md', which attn-gui train did not write")):
        before = _tree(folder)
        capsys.readouterr()
        assert main([*TINY, "--seed", "2", "--out", str(folder)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and "Traceback" not in err, err
        assert _tree(folder) == before
    (trained / "NOTES.md").unlink()
    assert main([*TINY, "--seed", "2", "--out", str(trained)]) == 0  # its own checkpoint: replaced


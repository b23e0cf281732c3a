"""Issue 61, item 19: a target folder that cannot be renamed (the root of a mounted volume, a Docker ``-v`` folder:
``rename`` answers EBUSY, or ``os.path.ismount``) is written into instead of renamed; the export lands and nothing
of the person's there is removed (before: "cannot move the export into ...: Device or resource busy" after the
compute, for export, circuit, attribute and train)."""

import errno
import json
import os
from pathlib import Path

import pytest
import torch

from attn_gui.cli import main
from attn_gui.engine.train.checkpoint import save_checkpoint
from attn_gui.engine.train.model import TinyDecoder, TrainConfig
from attn_gui.export import folder as folder_mod


def run(argv):
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def busy_root(monkeypatch, root: Path, module=os) -> None:
    """``root`` cannot be renamed, as a mount point cannot (EBUSY), nor swapped by renameat2."""
    real = os.rename

    def rename(src, dst, *a, **k):
        if Path(os.path.abspath(src)) == root or Path(os.path.abspath(dst)) == root:
            raise OSError(errno.EBUSY, "Device or resource busy")
        return real(src, dst, *a, **k)
    monkeypatch.setattr(os, "rename", rename)
    real_exchange = folder_mod._exchange

    def exchange(a, b):
        if Path(b) == root:
            raise OSError(errno.EBUSY, "Device or resource busy")
        return real_exchange(a, b)
    monkeypatch.setattr(folder_mod, "_exchange", exchange)


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("how", ["busy", "ismount"])
def test_an_export_into_a_mount_point_lands(tmp_path, monkeypatch, how):
    out = tmp_path / "out"
    out.mkdir()  # the volume's root exists, empty
    if how == "busy":
        busy_root(monkeypatch, out)
    else:
        real = os.path.ismount
        monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == out or real(p))
    assert run(["export", "--out", str(out), "--format", "npy"]) == 0  # before: exit 2, Device or resource busy
    first = json.loads((out / "manifest.json").read_text())
    assert files(out) == {*first["files"], "manifest.json"}
    (out / "notes.txt").write_text("mine")  # the person's own file
    assert run(["export", "--out", str(out), "--format", "csv", "--overwrite"]) == 0
    second = json.loads((out / "manifest.json").read_text())
    assert (out / "notes.txt").read_text() == "mine"
    assert files(out) >= {*second["files"], "manifest.json", "notes.txt"}
    assert not [n for n in os.listdir(tmp_path) if "attn-gui" in n]  # no hidden folder left beside
    assert not [n for n in os.listdir(out) if "attn-gui" in n]  # nor inside


def test_an_export_replacing_its_own_in_a_mount_point_removes_only_its_files(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    busy_root(monkeypatch, out)
    assert run(["export", "--out", str(out), "--format", "npy,csv"]) == 0
    assert run(["export", "--out", str(out), "--format", "npy"]) == 0  # the previous export is replaced whole
    manifest = json.loads((out / "manifest.json").read_text())
    assert files(out) == {*manifest["files"], "manifest.json"}
    assert not any(n.endswith(".csv") for n in files(out))


def test_a_checkpoint_into_a_mount_point_lands(tmp_path, monkeypatch):
    out = tmp_path / "run1"
    out.mkdir()
    busy_root(monkeypatch, out)
    model = TinyDecoder(TrainConfig(symbols=8, length=16, layers=1, heads=2, d_model=16), torch.Generator())
    save_checkpoint(model, out, step=1, extra={"log.csv": "step,loss\n"})
    save_checkpoint(model, out, step=2)  # before: OSError Device or resource busy (the old one moved aside)
    assert files(out) == {"config.json", "model.safetensors", "tokenizer.json"}  # the old log.csv was its own
    assert json.loads((out / "config.json").read_text())["attn_gui_step"] == 2
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]

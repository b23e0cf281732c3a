"""A monkey drives the real window with random actions; nothing may crash, warn or disagree.

Every mode is driven: random weights and the pretrained model (when installed), head
and token selection, the map in focus, and Export all (each export must be whole).
CI runs a short walk; ATTN_GUI_MONKEY_STEPS=10000 runs a long one, ATTN_GUI_SOAK=10000
runs the soak (consecutive updates, RSS at start and end printed).
"""

import json
import os
import random
from collections import Counter

import numpy as np
import pytest
from PySide6 import QtWidgets

from attn_gui.engine import FIELDS, PRESETS, compute
from attn_gui.engine.sources import is_available
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import map_data, map_id

TEXTS = ["When in doubt look intelligent", "", "   ", "?!", "a", "Ünïcödé 日本語 слово 🙂",
         "tab\tand\nnewline", "ctrl\x00\x1b chars", "the the the the", "x " * 40,
         "The animal didn't cross the street because it was too tired"]


def settled(win) -> bool:
    if win.frame is None:
        return False
    # an invalid edit leaves the state as it was: the maps keep the last good result
    return win.frame.result.config == win.state.config or win.failed_config == win.state.config


def check_maps_match_a_fresh_compute(win):
    result = win.frame.result
    fresh = make_frame(0, compute(result.config))
    head, focus = win.state.head, win.canvas.focus
    names = [focus] if focus is not None else ["x", "weights", "output"]
    shown = [(win.canvas.item_of(map_id(name, head if FIELDS[name].per_head else None)), name) for name in names]
    for view, name in shown:
        expected = map_data(fresh, name, head if FIELDS[name].per_head else None, win.hidden_tokens()).matrix
        # float32 to its last bits: the window computes small configs at one torch thread, this at two
        np.testing.assert_allclose(view.image.image, np.where(np.isfinite(expected), expected, 0), rtol=1e-5,
                                   atol=1e-5, err_msg=name)


MODEL = "minilm-l6" if is_available("minilm-l6") else None
FOCUS = [None, *FIELDS]


def check_export(win, folder):
    written = win.export_all(str(folder))
    assert written, win.statusBar().currentMessage()
    info = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(os.listdir(folder)) == sorted([*info["files"], "manifest.json"])  # whole, nothing else
    assert info["config"] == win.frame.result.config.to_dict()


def random_action(win, rng: random.Random, folder=None) -> int:
    p = win.panel
    kind = rng.randrange(13)
    if kind == 0:
        text = rng.choice(TEXTS)
        if rng.random() < 0.5:
            p.sentenceInput.setPlainText(text)
        else:
            p.sentenceInput.insertPlainText(" " + text[: rng.randrange(len(text) + 1)])
    elif kind == 1:
        spin = rng.choice([p.dModelSpin, p.dKSpin, p.dVSpin, p.headsSpin])
        top = {"headsSpin": 6}.get(spin.objectName(), rng.choice([8, 32, 96]))
        spin.setValue(rng.randint(spin.minimum(), top))
    elif kind == 2:
        rng.choice([p.seedSpin, p.weightSeedSpin]).setValue(rng.randrange(100_000))
    elif kind == 3:
        box = rng.choice([p.sameStreamCheck, p.projectionsCheck, p.scaleCheck, p.causalCheck])
        box.setChecked(not box.isChecked())
    elif kind == 4:
        combo = rng.choice([p.tokenizerCombo, p.inputsCombo, p.initCombo, p.layoutCombo, p.similarityCombo,
                            p.dtypeCombo, p.positionalCombo])
        combo.setCurrentIndex(rng.randrange(combo.count()))
    elif kind == 5:
        p.temperatureSpin.setValue(rng.choice([0.01, 0.5, 1.0, 3.0, 100.0]))
    elif kind == 6:
        win.apply_preset(rng.choice(list(PRESETS)))
    elif kind == 7:
        if win.frame is not None:
            win.select_head(rng.randrange(win.frame.result.heads))
            win.select_token(rng.randrange(win.frame.result.seq_len))
    elif kind == 8:
        win.resize(rng.randint(900, 1900), rng.randint(600, 1200))
    elif kind == 9:  # model mode and back
        if MODEL is not None and win.state.config.model is None:
            win.edit_config({"model": MODEL, "layer": rng.randrange(6)})
        elif win.state.config.model is not None:
            if rng.random() < 0.5:
                win.edit_config({"layer": rng.randrange(6)})
            else:
                win.edit_config({"model": None, "layer": 0})
    elif kind == 10:  # the map in focus
        win.set_state(win.state.replace(focus=rng.choice(FOCUS)))
    elif kind == 11:  # heads: how many, then which one
        p.headsSpin.setValue(rng.randint(1, 6))
        if win.frame is not None:
            win.select_head(rng.randrange(win.frame.result.heads))
    elif folder is not None and rng.random() < 0.3:  # Export all, now and then (it takes a second)
        return -1
    return kind


def run_monkey(win, qtbot, steps: int, seed: int = 1234, folder=None) -> Counter:
    rng = random.Random(seed)
    done = Counter()
    for step in range(steps):
        kind = random_action(win, rng, folder)
        qtbot.waitUntil(lambda: settled(win), timeout=20000)
        if kind == -1:
            check_export(win, folder)
        done[kind] += 1
        if step % 10 == 0 or step == steps - 1:
            check_maps_match_a_fresh_compute(win)
    return done


def test_monkey_short(window, qtbot, tmp_path):
    steps = int(os.environ.get("ATTN_GUI_MONKEY_STEPS", "150"))
    done = run_monkey(window, qtbot, steps, folder=tmp_path / "export")
    print(f"\nmonkey: {steps} actions, by kind {dict(sorted(done.items()))}, model {MODEL}")


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@pytest.mark.skipif(not os.environ.get("ATTN_GUI_SOAK"), reason="set ATTN_GUI_SOAK=N to run N updates")
def test_soak(window, qtbot):
    n = int(os.environ["ATTN_GUI_SOAK"])
    p = window.panel
    start = None
    for i in range(n):
        p.sentenceInput.setPlainText(f"When in doubt look intelligent {i % 7} " + "word " * (i % 5))
        p.seedSpin.setValue(i % 1000)
        qtbot.waitUntil(lambda: settled(window), timeout=20000)
        QtWidgets.QApplication.processEvents()
        if i == 200:  # after warm-up: caches and Qt's pixmaps have their working size
            start = rss_mib()
    end = rss_mib()
    print(f"\nsoak: {n} updates, RSS after warm-up {start:.1f} MiB, at end {end:.1f} MiB")
    assert end - start < 50

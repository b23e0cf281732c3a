"""A monkey drives the real window with random actions; nothing may crash, warn or disagree.

Every mode is driven: random weights and the variants' presets, MiniLM-L6, SmolLM2-135M
with Generate, the KV-cache dock and the Interventions dock (struck heads, the effect
grid), model folders opened from disk (a tiny BERT and a tiny Llama made by transformers),
colour scales, docks, head and token selection, the map in focus, and Export all (each
export must be whole). Every 10 actions the map in focus equals a fresh compute, its token
labels included. CI runs a short walk; ATTN_GUI_MONKEY_STEPS=10000 runs a long one (RSS at
start, every 500 actions and at the end printed), ATTN_GUI_SOAK=10000 runs the soak
(consecutive updates). Run a long walk with ``-s -o faulthandler_timeout=0``: the suite's
5-minute traceback dump reads the other threads' frames while they run, and once crashed
the process (SIGSEGV inside faulthandler, 5:02 into a walk).
"""

import json
import os
import sys
import random
from collections import Counter

import numpy as np
import pytest
from PySide6 import QtWidgets

from attn_gui.engine import FIELDS, PRESETS, compute, model_spec
from attn_gui.engine.model.registry import is_available
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import map_data, map_id
from attn_gui.present.scales import scale_choices
from attn_gui.present.state import DOCKS

TEXTS = ["When in doubt look intelligent", "", "   ", "?!", "a", "Ünïcödé 日本語 слово 🙂",
         "tab\tand\nnewline", "ctrl\x00\x1b chars", "the the the the", "x " * 40,
         "The animal didn't cross the street because it was too tired", "[CLS] [SEP] <s>", "the cat sat on a mat"]
BUNDLED = tuple(name for name in ("minilm-l6", "smollm2-135m") if is_available(name))


def idle(win) -> bool:
    """No compute, generation, KV-cache step or effect grid in flight, and the shown frame is the state's."""
    gen = win.generation
    if win.frame is None or gen.steps is not None or gen.step_running or win.docks.panels["kv-cache"].busy:
        return False
    if win.docks.panels["interventions"]._grid_gen is not None or win.docks.panels["why"].busy:
        return False
    # an invalid edit leaves the state as it was: the maps keep the last good result
    return win.frame.result.config == win.state.config or win.failed_config == win.state.config


settled = idle


def check_maps_match_a_fresh_compute(win):
    result = win.frame.result
    fresh = make_frame(0, compute(result.config))
    head, focus = win.state.head, win.canvas.focus
    names = [focus] if focus is not None else ["x", "weights", "output"]
    for name in names:
        per_head = head if FIELDS[name].per_head else None
        view = win.canvas.item_of(map_id(name, per_head))
        if view is None:  # a field this model has not (a decoder's K/V heads are fewer): nothing drawn
            continue
        expected = map_data(fresh, name, per_head, win.hidden_tokens())
        # float32 to its last bits: the window computes small configs at one torch thread, this at two
        np.testing.assert_allclose(view.data.matrix, expected.matrix, rtol=1e-5, atol=1e-5, err_msg=name)
        assert (view.data.row_labels, view.data.col_labels) == (expected.row_labels, expected.col_labels), name


FOCUS = [None, *FIELDS]


def check_export(win, folder):
    written = win.files.export_all(str(folder), confirmed=True)
    assert written, win.statusBar().currentMessage()
    info = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(os.listdir(folder)) == sorted([*info["files"], "manifest.json"])  # whole, nothing else
    assert info["config"] == win.frame.result.config.to_dict()


def random_action(win, rng: random.Random, folder=None, models=BUNDLED) -> int:
    p = win.panel
    config = win.state.config
    decoder = config.model is not None and model_spec(config.model).causal
    kind = rng.randrange(18)
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
    elif kind == 6:  # the presets hold the variants: RoPE, ALiBi, windows, sinks, grouped heads, cross-attention
        win.apply_preset(rng.choice(list(PRESETS)))
    elif kind == 7:
        if win.frame is not None:
            win.select_head(rng.randrange(win.frame.result.heads))
            win.select_token(rng.randrange(win.frame.result.seq_len))
    elif kind == 8:
        win.resize(rng.randint(900, 1900), rng.randint(600, 1200))
    elif kind in (9, 10):  # a model, a layer of it, or random weights again
        choice = rng.choice([None, *models])
        if choice is None or choice == config.model and rng.random() < 0.7:
            layers = model_spec(config.model).layers if config.model is not None else 1
            win.edit_config({"layer": rng.randrange(layers)} if config.model else {"model": None, "layer": 0})
        elif not (choice in BUNDLED or rng.random() < 0.5):
            before = win.state
            if not win.files.open_model(choice):  # as File → Open model… does; a refusal (in a dialog) changes nothing
                assert win.state == before
        else:
            win.edit_config({"model": choice, "layer": rng.randrange(model_spec(choice).layers), "ablate": ()})
    elif kind == 11:  # the map in focus
        win.set_state(win.state.replace(focus=rng.choice(FOCUS)))
    elif kind == 12:  # heads: how many, then which one
        p.headsSpin.setValue(rng.randint(1, 6))
        if win.frame is not None:
            win.select_head(rng.randrange(win.frame.result.heads))
    elif kind == 13:  # a colour scale: the map's right-click menu
        field = rng.choice(list(FIELDS))
        win.set_scale(field, rng.choice(scale_choices(FIELDS[field].kind)))
    elif kind == 14:  # a dock in front
        win.show_dock(rng.choice(DOCKS))
    elif kind == 15 and decoder:  # Generate, or the KV cache's prefill and decode
        if rng.random() < 0.5:
            win.generation.generate(rng.randint(1, 3))
        else:
            win.show_dock("kv-cache")
            rng.choice([win.docks.panels["kv-cache"].prefill, win.docks.panels["kv-cache"].step])()
    elif kind == 16 and decoder:  # Interventions: strike or restore the shown head, or two layers of the grid
        win.show_dock("interventions")
        if rng.random() < 0.8:
            win.docks.panels["interventions"].strikeButton.click()
        else:
            win.docks.panels["interventions"].max_layers = 2
            win.docks.panels["interventions"].run_effects()
    elif folder is not None and kind == 17 and rng.random() < 0.3:  # Export all, now and then (it takes a second)
        return -1
    return kind


def run_monkey(win, qtbot, steps: int, seed: int = 1234, folder=None, models=BUNDLED) -> Counter:
    rng = random.Random(seed)
    done = Counter()
    for step in range(steps):
        kind = random_action(win, rng, folder, models)
        qtbot.waitUntil(lambda: idle(win), timeout=60000)
        if kind == -1:
            check_export(win, folder)
        done[kind] += 1
        if step % 10 == 0 or step == steps - 1:
            check_maps_match_a_fresh_compute(win)
        if step % 500 == 499:
            print(f"monkey: {step + 1} actions, RSS {rss_mib():.0f} MiB", file=sys.stderr, flush=True)
    return done


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """A tiny random Llama (2 layers, 4 query heads over 2 K/V heads) saved by transformers, with a tokenizer."""
    import transformers
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<s>", "</s>", "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "when", "in",
             "doubt", "look", "intelligent"]
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      bos_token_id=1, eos_token_id=2)
    path = tmp_path_factory.mktemp("tiny-llama")
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path / "tokenizer.json"))
    return str(path)


def test_monkey_short(window, qtbot, tmp_path, bert_folder, llama_folder, monkeypatch):
    steps = int(os.environ.get("ATTN_GUI_MONKEY_STEPS", "150"))
    dialogs = Counter()  # a modal message box would wait for a click forever: counted and answered No
    for kind in ("warning", "critical", "information", "question"):
        monkeypatch.setattr(QtWidgets.QMessageBox, kind, staticmethod(
            lambda parent, title, *rest, kind=kind: dialogs.update([f"{kind}: {title}"])
            or QtWidgets.QMessageBox.StandardButton.No))
    models = (*BUNDLED, bert_folder[0], llama_folder)
    start = rss_mib()
    done = run_monkey(window, qtbot, steps, folder=tmp_path / "export", models=models)
    print(f"\nmonkey: {steps} actions, by kind {dict(sorted(done.items()))}, models {BUNDLED} and two folders; "
          f"dialogs {dict(dialogs)}; RSS {start:.0f} MiB at the start, {rss_mib():.0f} MiB at the end")


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

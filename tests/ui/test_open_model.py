"""File → Open model… and the panel's Open… button: a model folder on disk becomes the weights,
its layers and heads computed as transformers computes them, remembered among the recent models;
a folder that is not a model says why and changes nothing. File → Open GGUF file… does the same
for a llama.cpp .gguf file."""

import pytest
import torch
from PySide6 import QtWidgets

from attn_gui.engine import model_spec


def test_open_a_folder_shows_its_layers_and_remembers_it(window, qtbot, bert_folder):
    path, hf = bert_folder
    window.edit_config({"sentence": "the cat sat on a mat"})
    assert window.files.open_model(path)
    qtbot.waitUntil(lambda: window.frame.result.config.model == path, timeout=20000)
    r = window.frame.result
    assert r.tokens == ("[CLS]", "the", "cat", "sat", "on", "a", "mat", "[SEP]")
    with torch.no_grad():
        out = hf(torch.tensor(r.token_ids.tolist())[None], output_attentions=True)
    assert torch.allclose(r.weights, out.attentions[0][0], atol=1e-5, rtol=0)
    combo = window.panel.sourceCombo
    assert combo.currentText() == model_spec(path).label and "BERT encoder" in combo.currentText()
    assert window.panel.layerSpin.maximum() == 2  # the folder's layers, counted from 1
    window.panel.layerSpin.setValue(2)
    qtbot.waitUntil(lambda: window.frame.result.config.layer == 1, timeout=20000)
    assert torch.allclose(window.frame.result.weights, out.attentions[1][0], atol=1e-5, rtol=0)
    assert window.settings.recent("models")[0] == path
    window.files.fill_recent_models()
    assert [a.text() for a in window.menus.recent_models.actions()] == [path]
    window.edit_config({"model": None, "layer": 0})
    qtbot.waitUntil(lambda: window.frame.result.config.model is None, timeout=20000)
    window.menus.recent_models.actions()[0].trigger()  # the recent entry opens it again
    qtbot.waitUntil(lambda: window.frame.result.config.model == path, timeout=20000)


def test_a_folder_that_is_not_a_model_changes_nothing(window, qtbot, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warnings.append(a[2]))
    before = window.state
    (tmp_path / "config.json").write_text('{"model_type": "no-such-model"}')
    (tmp_path / "tokenizer.json").write_text("{}")
    assert not window.files.open_model(str(tmp_path))
    assert "is a 'no-such-model' model; supported model_types: llama" in warnings[-1]
    assert warnings[-1].endswith("others open through transformers, not this one: transformers here lacks it")
    assert not window.files.open_model(str(tmp_path / "nowhere"))
    assert "neither a bundled model, a model folder nor a .gguf file" in warnings[-1]
    assert window.state == before and window.settings.recent("models") == []


def test_the_panel_button_asks_for_a_folder(window, qtbot, monkeypatch, bert_folder):
    path, _ = bert_folder
    asked = []
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory", lambda *a: asked.append(a) or path)
    window.panel.openModelButton.click()
    assert asked and window.state.config.model == path
    qtbot.waitUntil(lambda: window.frame.result.config.model == path, timeout=20000)


def test_open_gguf_file_asks_for_a_gguf_and_shows_its_layers(window, qtbot, monkeypatch, qwen2_gguf, tmp_path):
    path, hf = qwen2_gguf
    asked, warnings = [], []
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", lambda *a: asked.append(a) or (path, ""))
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warnings.append(a[2]))
    window.edit_config({"sentence": "the cat sat on a mat"})
    window.menus.open_gguf.trigger()
    assert asked and asked[0][3] == "GGUF model (*.gguf)" and window.state.config.model == path
    qtbot.waitUntil(lambda: window.frame.result.config.model == path, timeout=20000)
    r = window.frame.result
    with torch.no_grad():
        out = hf(torch.tensor(r.token_ids.tolist())[None], output_attentions=True)
    assert torch.allclose(r.weights, out.attentions[0][0], atol=1e-5, rtol=0)
    assert window.panel.sourceCombo.currentText() == "qwen2-tiny.gguf (Qwen2 decoder, GGUF)"
    assert window.settings.recent("models")[0] == path
    before = window.state
    (tmp_path / "junk.gguf").write_bytes(b"not a model")
    assert not window.files.open_model(str(tmp_path / "junk.gguf"))
    assert warnings[-1].endswith("junk.gguf is not a readable GGUF file: it does not start with GGUF")
    assert window.state == before


def _word_level_llama(path, layers: int = 1):
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "<s>", "</s>", "the", "cat", "sat"]
    config = transformers.LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=16,
                                      num_hidden_layers=layers,
                                      num_attention_heads=2)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path / "tokenizer.json"))
    return str(path)


def test_opening_a_model_in_memory_over_a_sentence_without_tokens_says_so(window, qtbot, monkeypatch, tmp_path):
    # found by the 10,000-action monkey: the window held a sentence its model's worker had refused
    # (spaces only), and opening another model already in memory raised inside set_state
    warnings = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warnings.append(a[2]))
    first, second = _word_level_llama(tmp_path / "a"), _word_level_llama(tmp_path / "b")
    window.edit_config({"sentence": "the cat sat"})
    assert window.files.open_model(first)
    qtbot.waitUntil(lambda: window.frame.result.config.model == first, timeout=20000)
    assert window.edit_config({"model": second, "sentence": "   "})  # not in memory: its worker checks the tokens
    qtbot.waitUntil(lambda: window.failed_config == window.state.config, timeout=20000)
    before = window.state
    assert not window.files.open_model(first)  # in memory: checked now, refused in a dialog, nothing changes
    assert "has no tokens" in warnings[-1] and window.state == before


def test_entering_and_leaving_model_mode_lays_the_maps_out_once(window, qtbot, monkeypatch, tmp_path, drawn):
    # the model view's dock is shown (and made taller: more layers than heads) before the maps are
    # laid out, so drawing the frame lays them out once, for the canvas beside the dock, not for
    # the old size and again after the dock took its room
    from attn_gui.render.canvas import Canvas

    folder = _word_level_llama(tmp_path / "m", layers=3)
    window.edit_config({"sentence": "the cat sat"})
    qtbot.waitUntil(lambda: window.frame.result.seq_len == 3, timeout=20000)
    drawn(window)
    places = []
    place = Canvas._place
    monkeypatch.setattr(Canvas, "_place", lambda self: (places.append(self.viewport().size()), place(self)))
    height = window.canvas.viewport().height()
    with qtbot.waitSignal(window.frameShown, timeout=20000):
        assert window.files.open_model(folder)
    drawn(window)  # the layout is the frame's first step (render/canvas.py)
    assert window.modelDock.isVisible() and len(places) == 1 and places[0].height() < height  # after the dock
    places.clear()
    with qtbot.waitSignal(window.frameShown, timeout=20000):
        window.edit_config({"model": None})
    drawn(window)
    assert not window.modelDock.isVisible() and len(places) == 1 and places[0].height() >= height - 20


def _broken_folder(tmp_path):
    """A tiny Llama saved by transformers with one layer's W_v dropped: config.json and tokenizer.json read,
    the weights refused."""
    import transformers
    from safetensors.torch import load_file, save_file
    from tokenizers import Tokenizer, models, pre_tokenizers

    config = transformers.AutoConfig.for_model("llama", hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                               num_attention_heads=4, num_key_value_heads=2, vocab_size=16)
    folder = tmp_path / "broken-llama"
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({"<unk>": 0, "the": 1, "cat": 2}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    weights = load_file(folder / "model.safetensors")
    del weights["model.layers.1.self_attn.v_proj.weight"]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return str(folder)


def _broken_gguf(tmp_path, qwen2_gguf):
    """The Qwen2 file with its first merge's space flipped to NUL: the header reads, the vocabulary does not build."""
    from pathlib import Path

    data = bytearray(Path(qwen2_gguf[0]).read_bytes())
    key = b"tokenizer.ggml.merges"
    first = data.find(key) + len(key) + 4 + 4 + 8 + 8
    data[data.index(b" ", first)] = 0
    path = tmp_path / "broken.gguf"
    path.write_bytes(bytes(data))
    return str(path)


@pytest.mark.parametrize("kind", ["folder", "gguf"])
def test_a_model_refused_past_its_config_never_switches_nor_enters_recent(window, qtbot, tmp_path, monkeypatch,
                                                                         qwen2_gguf, kind):
    warnings = []
    monkeypatch.setattr(QtWidgets.QMessageBox, "warning", lambda *a: warnings.append(a[2]))
    path = _broken_folder(tmp_path) if kind == "folder" else _broken_gguf(tmp_path, qwen2_gguf)
    before = window.state
    assert not window.files.open_model(path)
    said = "the weights lack" if kind == "folder" else "broken.gguf's vocabulary is not a tokenizer"
    assert said in warnings[-1] and "\n" not in warnings[-1].split("\n\n", 1)[1]
    assert window.state == before and window.settings.recent("models") == []

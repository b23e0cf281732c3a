"""The Why dock's Lenses view (issue 60) on a tiny random 3-layer Llama folder and a Jacobian lens fitted on it.

- The logit lens's cells equal the engine's logit lens (``attribution.logit_lens``, itself checked against
  TransformerLens' ``accumulated_resid`` in tests/engine/test_lens_reference.py): the output of block l is what
  enters layer l + 1. The Jacobian lens's cells are ``read_lens``'s top 5 (a display check), and their top token and
  p (to the two places shown) TransformerLens 4.3's ``JacobianLens.readout`` of the same lens file, loaded there.
- A click on a cell selects its position in both tables and shows that layer in the window.
- A lens of another model is refused in one line in the view, the last good one staying; a model the loaded lens
  does not fit is said the same way, and no table of the other model is left shown.
- Cancel stops a fit after the shard in progress, its shards kept; the same fit again resumes from them and gives
  the lens ``fit_lens`` gives in one go; the view then opens with it.
"""

from __future__ import annotations

import json

import pytest
import torch
from PySide6 import QtCore
from pytestqt.qtbot import QtBot

from attn_gui.engine.analysis.attribution.logit import logit_lens
from attn_gui.engine.analysis.corpus.read import read_corpus
from attn_gui.engine.analysis.lens import artifact
from attn_gui.engine.analysis.lens.fit import fit_lens
from attn_gui.engine.analysis.lens.jacobian import LensSettings
from attn_gui.engine.analysis.lens.readout import read_lens
from attn_gui.engine.model.plan import plan
from lens_bridges import tiny_folder  # tests/
from tiny_decoders import SENTENCE  # tests/

PASSAGES = ["the cat sat on a mat and the dog ran w1 w2", "a dog ran on the mat w4 w5 w6 and the cat sat",
            "the mat the cat the dog sat ran on w12 w13", "w3 w2 w1 the dog sat on a cat and ran w9"]
OPTIONS = dict(dim_batch=8, max_seq_len=16, skip_first_positions=2, shard_size=1)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """(the model's folder, the corpus file, a fit's folder)."""
    root = tmp_path_factory.mktemp("lens-view")
    tiny_folder("llama", root / "model", layers=3)
    (root / "corpus.txt").write_text("\n".join(PASSAGES) + "\n")
    model = str(root / "model")
    fit_lens(read_corpus(root / "corpus.txt"), root / "lens", LensSettings(model=model, **OPTIONS))
    return model, root / "corpus.txt", root / "lens"


def _open(window, qtbot: QtBot, model: str):
    assert window.edit_config({"sentence": SENTENCE, "model": model, "layer": 0})
    qtbot.waitUntil(lambda: window.frame.result.config == window.state.config, timeout=30000)
    panel = window.docks.panels["why"]
    with qtbot.waitSignal(panel.shown, timeout=30000, check_params_cb=lambda kind: kind == "lens"):
        window.show_dock("why")
    panel.tabs.setCurrentWidget(panel.lenses)
    return panel, panel.lenses


def test_both_lenses_shown_as_the_engine_reads_them(window, fitted, qtbot: QtBot):
    model, _, folder = fitted
    panel, view = _open(window, qtbot, model)
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "read"):
        view.load(str(folder))
    config = window.state.config
    r = read_lens(config, artifact.load(folder))
    assert r.layers == [0, 1, 2]
    peer = logit_lens(config)  # rows: into layers 1..3, then the output
    for row, layer in enumerate(r.layers):
        assert view.logit.verticalHeaderItem(row).text().endswith(f"layer {layer + 1}" + (" (output)" if layer == 2
                                                                                         else ""))
        for pos in range(len(r.tokens)):
            top, p = peer.tokens[layer + 1][pos][0], float(peer.probs[layer + 1, pos, 0])
            text, shown_p = view.logit.item(row, pos).text().rsplit(" ", 1)
            assert text == top and float(shown_p) == pytest.approx(p, abs=0.005 + 1e-9)
            jacobian = view.jacobian.item(row, pos)
            assert jacobian.text() == f"{r.jacobian_tokens[row][pos][0]} {float(r.jacobian_probs[row, pos, 0]):.2f}"
            assert jacobian.toolTip().splitlines() == [f"{t}  {q:.3f}" for t, q in zip(
                r.jacobian_tokens[row][pos], r.jacobian_probs[row, pos].tolist(), strict=True)]
    assert view.logit.verticalHeaderItem(0).text().startswith("▶")  # the window shows layer 1
    assert "fitted on" in view.message.text() and "4 prompts" in view.message.text()


def test_the_jacobian_cells_are_transformerlens_readout(window, fitted, qtbot: QtBot):
    pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")
    import transformers
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.tools.analysis import JacobianLens

    model, _, folder = fitted
    panel, view = _open(window, qtbot, model)
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "read"):
        view.load(str(folder))
    src = plan(window.state.config).source
    hf = transformers.AutoModelForCausalLM.from_pretrained(model, attn_implementation="eager").eval()
    bridge = TransformerBridge.boot_transformers(model, hf_model=hf, tokenizer=transformers.AutoTokenizer
                                                 .from_pretrained(model))
    bridge.to_tokens = lambda text, *_, **__: torch.tensor([list(src.tokenize(text).token_ids)])  # the same ids
    theirs = JacobianLens.load(str(folder / "lens.pt"))
    reference = theirs.readout(bridge, SENTENCE, use_jacobian=True, top_k=1, return_full_logits=True)
    assert sorted(reference.lens_logits) == [0, 1, 2]
    for row, layer in enumerate(sorted(reference.lens_logits)):
        top = torch.softmax(reference.lens_logits[layer].double(), -1).max(-1)
        for pos in range(view.jacobian.columnCount()):
            assert view.jacobian.item(row, pos).text() == (f"{src.token_text(int(top.indices[pos]))} "
                                                            f"{float(top.values[pos]):.2f}")


def test_a_click_on_a_cell_shows_its_layer_and_follows_its_position(window, fitted, qtbot: QtBot):
    model, _, folder = fitted
    panel, view = _open(window, qtbot, model)
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "read"):
        view.load(str(folder))
    table = view.jacobian
    table.scrollToItem(table.item(1, 4))
    qtbot.mouseClick(table.viewport(), QtCore.Qt.MouseButton.LeftButton,
                     pos=table.visualItemRect(table.item(1, 4)).center())
    qtbot.waitUntil(lambda: window.state.config.layer == 1, timeout=5000)
    for t in (view.logit, view.jacobian):
        assert [i.column() for i in t.selectionModel().selectedColumns()] == [4]
    qtbot.waitUntil(lambda: view.logit.verticalHeaderItem(1).text().startswith("▶"), timeout=5000)
    assert not view.logit.verticalHeaderItem(0).text().startswith("▶")
    assert table.item(1, 4).font().bold()  # the clicked token is followed


def test_a_lens_of_another_model_is_refused_in_one_line(window, fitted, qtbot: QtBot, tmp_path):
    model, _, folder = fitted
    panel, view = _open(window, qtbot, model)
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "read"):
        view.load(str(folder))
    good, cells = view.lens, view.jacobian.item(0, 0).text()
    other = artifact.load(folder)
    other.metadata["attn_gui"]["fingerprint"] = "0" * 64  # the same shapes, another model's weights
    other.save(tmp_path / "other.pt")
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "refused"):
        view.load(str(tmp_path / "other.pt"))
    assert "whose weights are not those of" in view.message.text() and "\n" not in view.message.text()
    narrow = artifact.Lens({0: torch.eye(16)}, 1, 16)
    narrow.save(tmp_path / "narrow.pt")
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "refused"):
        view.load(str(tmp_path / "narrow.pt"))
    assert view.message.text().startswith("the lens is 16 wide and") and "another model" in view.message.text()
    assert view.lens is good and view.jacobian.item(0, 0).text() == cells and view.jacobian.isVisible()
    other_model = tiny_folder("qwen2", tmp_path / "other-model", layers=3)  # the same sizes, other weights
    with qtbot.waitSignal(view.shown, timeout=30000, check_params_cb=lambda kind: kind == "refused"):
        assert window.edit_config({"model": other_model})
    assert "whose weights are not those of" in view.message.text() and not view.jacobian.isVisible()


def test_cancel_stops_a_fit_and_keeps_its_shards(window, fitted, qtbot: QtBot, tmp_path):
    model, corpus, folder = fitted
    panel, view = _open(window, qtbot, model)
    panel.tabs.setCurrentIndex(0)
    out = tmp_path / "fit"
    # cancelled as the first shard is kept, on the fit's own thread: the fit stops right there, wherever the
    # window's thread is
    view.progressed.connect(lambda done, total: view.cancel(), QtCore.Qt.ConnectionType.DirectConnection)
    with qtbot.waitSignal(view.shown, timeout=60000, check_params_cb=lambda kind: kind == "cancelled"):
        view.fit(str(corpus), str(out), **OPTIONS)
    assert sorted(p.name for p in (out / "shards").glob("*.npz")) == ["shard-000000.npz"]
    assert not (out / "lens.pt").exists() and "kept" in view.message.text() and view.fitButton.isEnabled()
    view.progressed.disconnect()
    view.progressed.connect(view._on_progress)
    with qtbot.waitSignal(view.shown, timeout=60000, check_params_cb=lambda kind: kind == "read"):
        view.fit(str(corpus), str(out), **OPTIONS)
    assert json.loads((out / "manifest.json").read_text())["shards_resumed"] == 1
    whole = artifact.load(folder)  # the same fit in one go
    assert view.lens is not None and view.lens.n_prompts == whole.n_prompts == 4
    for layer in whole.source_layers:
        assert torch.allclose(view.lens.jacobians[layer], whole.jacobians[layer], rtol=1e-6, atol=1e-7)
    assert panel.tabs.currentWidget() is view and view.jacobian.isVisible()
    assert (view.bar.value(), view.bar.maximum()) == (4, 4)

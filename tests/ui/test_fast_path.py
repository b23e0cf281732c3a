"""The fast path offered (issue 59): a decoder of FAST_PATH_PARAMETERS or more on the CPU at float32 gets one line
under the sentence with each choice's measured cost and bfloat16's error; a click switches, the choice is remembered
for that model, and the maps' titles say bfloat16 drew them. The threshold is lowered to a tiny Llama's size here
(no 1 B file in the tests); its parameter count is transformers' own."""

import pytest

from attn_gui.engine import AttentionConfig
from attn_gui.engine.config.config import BFLOAT16_ERROR
from attn_gui.engine.model.plan import plan
from attn_gui.present import fast_path
from tiny_decoders import SENTENCE, tiny_decoder  # (tests/)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fast-llama")
    hf = tiny_decoder("llama", folder)
    return str(folder), hf.num_parameters()


@pytest.fixture
def lowered(monkeypatch, llama):
    monkeypatch.setattr(fast_path, "FAST_PATH_PARAMETERS", llama[1])  # this model counts as large
    return llama


def _open(window, qtbot, path: str, dtype: str = "float32"):
    with qtbot.waitSignal(window.frameShown, timeout=60000,
                          check_params_cb=lambda frame: frame.result.config.model == path):
        assert window.edit_config({"sentence": SENTENCE, "model": path, "dtype": dtype})


def test_the_parameter_count_is_transformers(llama):
    path, count = llama
    source = plan(AttentionConfig(model=path)).source
    source.load()
    assert source.parameters() == count


def test_a_gguf_files_count_is_read_from_its_shapes(tmp_path):
    import gguf

    from gguf_writing import quantized_llama  # (tests/)

    path, hf = quantized_llama(tmp_path / "q4_0.gguf", lambda _: gguf.GGMLQuantizationType.Q4_0)
    source = plan(AttentionConfig(model=path)).source
    assert source.parameters() is None  # not in memory: nothing is loaded to answer
    source.load()
    assert source.parameters() == hf.num_parameters()


def test_a_large_model_is_offered_bfloat16_and_one_click_switches_and_is_remembered(window, qtbot, lowered,
                                                                                     settings):
    path, count = lowered
    note = window.panel.offerNote
    _open(window, qtbot, path)
    assert window.state.config.dtype == "float32"  # nothing changed by itself
    qtbot.waitUntil(note.isVisible, timeout=10000)
    slow, fast = count / fast_path.MEASURED_PARAMETERS * 34.0, count / fast_path.MEASURED_PARAMETERS * 2.0
    assert f"about {slow:.1f} s a sentence" in note.text() and f"about {fast:.1f} s" in note.text()
    assert BFLOAT16_ERROR in note.text() and 'href="bfloat16"' in note.text()
    alpha = window.canvas.item_of("weights:0")
    assert "bfloat16" not in alpha.data.title
    with qtbot.waitSignal(window.frameShown, timeout=60000,
                          check_params_cb=lambda frame: frame.result.config.dtype == "bfloat16"):
        note.linkActivated.emit("bfloat16")
    assert not note.isVisible() and settings.matmuls(path) == "bfloat16"
    qtbot.waitUntil(lambda: "bfloat16 matmuls" in window.canvas.item_of("weights:0").data.title, timeout=20000)
    assert "bfloat16" in window.statusLabel.text()
    # chosen here: float32 set again in the controls stays float32, and is not offered again
    with qtbot.waitSignal(window.frameShown, timeout=60000,
                          check_params_cb=lambda frame: frame.result.config.dtype == "float32"):
        assert window.edit_config({"dtype": "float32"})
    assert window.state.config.dtype == "float32" and not note.isVisible()


def test_a_remembered_bfloat16_is_taken_again_and_said(window, qtbot, lowered, settings):
    path, _ = lowered
    settings.set_matmuls(path, "bfloat16")
    note = window.panel.offerNote
    with qtbot.waitSignal(window.frameShown, timeout=60000,
                          check_params_cb=lambda frame: frame.result.config.dtype == "bfloat16"):
        assert window.edit_config({"sentence": SENTENCE, "model": path})
    assert note.isVisible() and "as you chose for it before" in note.text() and 'href="float32"' in note.text()
    with qtbot.waitSignal(window.frameShown, timeout=60000,
                          check_params_cb=lambda frame: frame.result.config.dtype == "float32"):
        note.linkActivated.emit("float32")
    assert settings.matmuls(path) == "float32" and not note.isVisible()


def test_kept_float32_and_a_small_model_are_not_offered(window, qtbot, llama, settings, monkeypatch):
    path, count = llama
    _open(window, qtbot, path)  # the real threshold: a tiny model is never offered
    assert not window.panel.offerNote.isVisible()
    monkeypatch.setattr(fast_path, "FAST_PATH_PARAMETERS", count)
    settings.set_matmuls(path, "float32")
    with qtbot.waitSignal(window.frameShown, timeout=60000):
        assert window.edit_config({"layer": 1})
    assert not window.panel.offerNote.isVisible() and window.state.config.dtype == "float32"


def test_bad_saved_choices_read_as_none():
    assert fast_path.read_choices("not json") == {}
    assert fast_path.read_choices('["a"]') == {}
    assert fast_path.read_choices('{"a": "bfloat16", "b": "float64", "c": 3}') == {"a": "bfloat16"}

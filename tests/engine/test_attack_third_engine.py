"""Issue 61 (a third attack run): what a local Ray census cleans up is Ray's own processes of its run, never
a process the person (or another model) started meanwhile."""

import os

import numpy as np
import subprocess

import pytest

from attn_gui.engine.analysis.corpus.census import census
from attn_gui.engine.analysis.corpus.read import read_corpus
from attn_gui.engine.analysis.corpus.shards import Settings
from corpus_data import llama_folder, sentences  # tests/

RAY_ENV = {"RAY_AUTH_MODE": "disabled"}  # Ray listens on this machine only


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="the reaper reads Linux's /proc")
def test_a_process_started_during_a_local_census_survives_its_cleanup(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    from attn_gui.engine.analysis.corpus import ray as corpus_ray

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    llama_folder(tmp_path / "model")
    (tmp_path / "corpus.txt").write_text("\n".join(sentences(40)))
    mine: list[subprocess.Popen] = []

    def start_mine(progress) -> None:  # the person's own process, started while Ray runs
        if not mine:
            mine.append(subprocess.Popen(["sleep", "600"]))

    try:
        census(read_corpus(tmp_path / "corpus.txt"), tmp_path / "out",
               Settings(model=str(tmp_path / "model"), shard_size=16), runner=corpus_ray.runner("local", 2),
               progress=start_mine)
        assert mine
        assert mine[0].poll() is None  # before: -9, the reaper SIGKILLed every descendant started after it
    finally:
        for proc in mine:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("kind_name, at, value", [("Q8_0", 0, np.nan), ("Q4_1", 2, np.inf), ("Q4_0", 0, -np.inf)])
def test_a_non_finite_block_scale_in_a_gguf_is_named_at_open(tmp_path, kind_name, at, value):
    """ggml's block_q8_0 is {float16 d; int8 qs[32]}, block_q4_1 {float16 d, m; uint8 qs[16]}: the scale at byte
    ``at`` of block 3 of layer 1's W_q set to ``value``. Before: opened without a word, and α all NaN."""
    import gguf
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import quantize

    from attn_gui.engine import ConfigError
    from attn_gui.engine.model.decoder import source as decoder
    from gguf_writing import quantized_llama  # tests/

    kind = gguf.GGMLQuantizationType[kind_name]
    size = GGML_QUANT_SIZES[kind][1]

    def blocks(w, kind, rng):
        raw = quantize(w, kind)
        if blocks.key == "model.layers.1.self_attn.q_proj.weight":
            raw[0, 3 * size + at:3 * size + at + 2] = np.array([value], np.float16).view(np.uint8)
        return raw

    def kind_of(key):
        blocks.key = key
        return kind

    with np.errstate(invalid="ignore"):  # the float peer's dequantize: inf times a zero quant is NaN
        path, _ = quantized_llama(tmp_path / f"{kind_name}.gguf", kind_of, blocks)
    with pytest.raises(ConfigError) as info:
        decoder.load_model(path)
    said = str(info.value)
    shown = "NaN" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    assert "\n" not in said and f"tensor blk.1.attn_q.weight ({kind_name}) has {shown}" in said
    assert "block 3 of" in said


@pytest.fixture(scope="module")
def lens_llama(tmp_path_factory):
    pytest.importorskip("transformer_lens", reason="the lens extra (pip install attn-gui[lens]) is not installed")
    from lens_bridges import tiny_folder  # tests/

    return tiny_folder("llama", tmp_path_factory.mktemp("lens"))


def _absent_devices() -> list[str]:
    import torch

    return [d for d, there in (("cuda", torch.cuda.is_available()), ("mps", torch.backends.mps.is_available()))
            if not there]


@pytest.mark.parametrize("dtype, device, said", [
    ("int8", "cpu", "dtype must be torch.float32, torch.float64, torch.float16, torch.bfloat16, not torch.int8"),
    ("bool", "cpu", "not torch.bool"), ("complex64", "cpu", "not torch.complex64"),
    ("'float32'", "cpu", "not 'float32'"),
    ("float32", "meta", "device must be cpu, cuda, cuda:N or mps, not 'meta'"),
    ("float32", "nonsense", "not 'nonsense'"), ("float32", "cuda:x", "not 'cuda:x'"),
    *[("float32", d, "is not available on this machine") for d in _absent_devices()],
])
def test_to_lens_refuses_a_dtype_or_device_it_cannot_use_in_one_line(lens_llama, dtype, device, said):
    import torch

    import attn_gui
    from attn_gui.engine import ConfigError

    value = dtype.strip("'") if dtype.startswith("'") else getattr(torch, dtype)
    with pytest.raises(ConfigError) as info:  # before: torch's and transformers' own errors, several lines
        attn_gui.to_lens(lens_llama, device=device, dtype=value)
    assert said in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_to_lens_in_a_half_dtype_equals_the_float32_bridge_within_its_precision(lens_llama, dtype):
    """Before: refused ("the bridge computes a step or a setting the engine does not"), the check held to float32's
    1e-4. Peer: the float32 bridge (itself checked equal to the engine's logits, tests/engine/test_lens.py); bound:
    8 units of the dtype's rounding (torch.finfo(dtype).eps) of the largest logit."""
    import torch

    import attn_gui

    half = getattr(torch, dtype)
    full, bridge = attn_gui.to_lens(lens_llama), attn_gui.to_lens(lens_llama, dtype=half)
    ids = torch.tensor([[1, 5, 7, 9, 3, 11, 2]])
    with torch.no_grad():
        ours, theirs = bridge(ids)[0], full(ids)[0]
    assert ours.dtype == half
    bound = 8 * torch.finfo(half).eps * max(1.0, float(theirs.abs().max()))
    assert float((ours.float() - theirs).abs().max()) <= bound


def test_a_text_corpus_passage_is_a_line_ending_in_a_newline_only(tmp_path):
    """Python's str.splitlines (the peer of what not to do) splits at a form feed, U+2028 and \\x1c too."""
    text = "one\x0cstill one\r\ntwo\u2028still two\nthree\x1cstill three\n"
    (tmp_path / "corpus.txt").write_text(text, encoding="utf-8", newline="")
    corpus = read_corpus(tmp_path / "corpus.txt")
    assert len(text.splitlines()) == 6  # before: 6 passages
    assert corpus.passages == ("one\x0cstill one", "two\u2028still two", "three\x1cstill three")


def test_a_raw_line_separator_inside_a_json_string_is_valid(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"text": "a\u2028b"}\n{"text": "c"}\n', encoding="utf-8")
    assert read_corpus(tmp_path / "corpus.jsonl").passages == ("a\u2028b", "c")  # before: "not JSON" on line 1


def test_the_ray_address_check_is_bounded_as_a_whole(monkeypatch):
    """A server that answers one byte a second: each read is within the bound, the nine of a frame's header are
    not. Before: the header read whole (about 9 s) and called "not a Ray cluster"; now: refused at the bound."""
    import socket
    import threading
    import time

    from attn_gui.engine.analysis.corpus import ray as corpus_ray
    from attn_gui.engine.analysis.corpus.read import CorpusError

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def drip() -> None:
        conn, _ = server.accept()
        with conn:
            for byte in b"\x00\x00\x00\x01\x00\x00\x00\x00\x00":  # a frame header, not SETTINGS
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return
                time.sleep(1)

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    monkeypatch.setattr(corpus_ray, "CONNECT_SECONDS", 3)
    try:
        with pytest.raises(CorpusError) as info:
            corpus_ray.check_address(f"127.0.0.1:{port}")
    finally:
        server.close()
    assert f"no Ray cluster answers at 127.0.0.1:{port} (no answer)" in str(info.value)


def test_a_datasets_state_naming_a_null_byte_is_one_line(tmp_path):
    import json

    from attn_gui.engine.analysis.corpus.read import CorpusError

    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "a\0b.arrow"}]}))
    with pytest.raises(CorpusError) as info:  # before: ValueError: embedded null byte
        read_corpus(folder)
    assert "state.json names 'a\\x00b.arrow', which is no file name" in str(info.value)


def test_a_resealed_cache_with_a_begin_token_past_the_vocabulary_is_rebuilt(tmp_path):
    import json
    from pathlib import Path

    from attn_gui.engine import model_spec
    from attn_gui.engine.readers import cache
    from attn_gui.engine.readers.gguf import load as gguf_load
    from gguf_writing import byte_level_vocab, tiny, write_gguf  # tests/

    hf = tiny("llama", len(byte_level_vocab()[0]), seed=3)
    path = write_gguf(tmp_path / "resealed.gguf", hf, "llama", "byte", "Resealed")
    spec = model_spec(path)
    gguf_load.load(spec, Path(path))
    manifest_path = cache.cache_root() / gguf_load.cache_name(Path(path)) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["meta"].update(add_bos=True, bos_id=4_000_000_000)
    manifest["sha256"] = cache._sealed(manifest)  # sealed again, as the attack did
    manifest_path.write_text(json.dumps(manifest))
    loaded = gguf_load.load(spec, Path(path))  # before: IndexError; the cache's facts are checked against the
    assert loaded["add_bos"] is None  # file's header now (item 12): rebuilt, the file adds no begin token
    assert json.loads(manifest_path.read_text())["meta"]["bos_id"] == 0


@pytest.mark.parametrize("edit, said", [
    (lambda t: t.drop(["layer"]), "no layer or head column"),  # before: KeyError, past the dock's loader
    (lambda t: t.set_column(t.column_names.index("entropy"), "entropy", t.column("entropy").cast("string")),
     "its column 'entropy' holds string, not numbers"),  # before: read as objects, drawn by nothing
    (lambda t: t.slice(0, t.num_rows - 1), "its rows are not each layer's heads once"),
])
def test_a_census_table_that_is_not_a_censuss_is_one_line(tmp_path, edit, said):
    import pyarrow.parquet as pq

    from attn_gui.engine.analysis.corpus.census import run_in_process
    from attn_gui.engine.analysis.corpus.outputs import read_heads
    from attn_gui.engine.analysis.corpus.read import CorpusError

    llama_folder(tmp_path / "model")
    (tmp_path / "corpus.txt").write_text("\n".join(sentences(8)))
    census(read_corpus(tmp_path / "corpus.txt"), tmp_path / "out", Settings(model=str(tmp_path / "model")),
           runner=lambda *a: run_in_process(*a, threads=1))
    table = pq.read_table(tmp_path / "out" / "heads.parquet")
    assert "entropy" in table.column_names
    pq.write_table(edit(table), tmp_path / "out" / "heads.parquet")
    with pytest.raises(CorpusError) as info:  # a UserError: the Corpus dock says it where it shows the census
        read_heads(tmp_path / "out")
    assert said in str(info.value) and "\n" not in str(info.value)

"""Issue 45's census cases: a datasets folder never reads outside itself; --out is written only where
nothing else is; a half-written census never reads as finished; FIFOs, /dev/zero and deep JSON are
refused in one line; long passages are cut before they are tokenized; damaged shards are computed
again; a full disk and two runs into one folder are one line or fine, never a traceback or a stray
temporary file."""

import errno
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from attn_gui.engine.analysis.corpus.read import CHARS_MOST, CorpusError, passage_limit, read_corpus
from attn_gui.engine.analysis.corpus.stats import STATS
from attn_gui.engine.analysis.corpus.shards import Settings, ShardSums
from attn_gui.engine.analysis.corpus.census import census, run_in_process
from attn_gui.engine.readers.catalog import model_spec
from attn_gui.engine.analysis.corpus.outputs import read_examples, read_heads, read_manifest
from corpus_data import WORDS, llama_folder, sentences  # tests/

run = functools.partial(run_in_process, threads=1)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama")
    return str(path), llama_folder(path)


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "sentences.txt"
    path.write_text("\n".join(sentences(48)))
    return path


@pytest.fixture(scope="module")
def whole(model, texts, tmp_path_factory):
    """A finished census of the 48 sentences, in shards of 16 (its folder)."""
    out = tmp_path_factory.mktemp("whole") / "out"
    census(read_corpus(texts), out, Settings(model=model[0], shard_size=16), runner=run)
    return out


def _saved(folder: Path, names: list[str], table=None) -> Path:
    """A datasets save_to_disk folder whose state.json names ``names`` (and one Arrow file of ``table`` inside)."""
    folder.mkdir(parents=True, exist_ok=True)
    table = table if table is not None else pa.table({"text": ["the cat sat"]})
    with pa.ipc.new_stream(str(folder / "data-00000-of-00001.arrow"), table.schema) as writer:
        writer.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": n} for n in names]}))
    return folder


def _arrow_file(path: Path, text: str) -> None:
    table = pa.table({"text": [text] * 3})
    with pa.ipc.new_stream(str(path), table.schema) as writer:
        writer.write_table(table)


@pytest.mark.parametrize("name", ["../private/secret.arrow", "ABSOLUTE", "link.arrow",
                                  "sub/../../private/secret.arrow"])
def test_a_datasets_folder_never_reads_a_file_outside_itself(tmp_path, name):
    (tmp_path / "private").mkdir()
    _arrow_file(tmp_path / "private" / "secret.arrow", "my secret text")
    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "sub").mkdir()
    os.symlink(tmp_path / "private" / "secret.arrow", folder / "link.arrow")
    name = str(tmp_path / "private" / "secret.arrow") if name == "ABSOLUTE" else name
    _saved(folder, ["data-00000-of-00001.arrow", name])
    with pytest.raises(CorpusError, match="which is outside the folder; a datasets folder is read only from "
                                            "inside itself") as info:
        read_corpus(folder)
    assert "secret text" not in str(info.value)


def test_a_data_file_that_is_not_arrow_is_refused_without_quoting_its_bytes(tmp_path):
    folder = _saved(tmp_path / "ds", ["data-00000-of-00001.arrow", "notes.arrow"])
    (folder / "notes.arrow").write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(CorpusError, match="notes.arrow is not an Arrow stream file$") as info:
        read_corpus(folder)
    assert "root" not in str(info.value).replace(str(tmp_path), "")


def test_a_folder_inside_reads_as_before(tmp_path):
    folder = _saved(tmp_path / "ds", ["data-00000-of-00001.arrow", "sub/more.arrow"])
    (folder / "sub").mkdir()
    _arrow_file(folder / "sub" / "more.arrow", "w1 w2")
    assert read_corpus(folder).passages == ("the cat sat", "w1 w2", "w1 w2", "w1 w2")


def test_jsonl_nested_too_deep_is_one_line(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"text": "a"}\n' + '{"text": "b", "x": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    with pytest.raises(CorpusError, match=r"deep.jsonl, line 2: nested too deeply to read$"):
        read_corpus(path)
    folder = _saved(tmp_path / "ds", [])
    (folder / "state.json").write_text('{"_data_files": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(CorpusError, match="is not a folder written by datasets' save_to_disk"):
        read_corpus(folder)


def _bounded_child(code: str, timeout: float = 90, memory: int | None = None) -> subprocess.CompletedProcess:
    """``code`` run by Python in a child, given ``timeout`` seconds (and at most ``memory`` bytes of address
    space): a read that blocks or never ends fails the test instead of hanging it."""
    def limit():
        if memory is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit if memory else None, cwd=Path(__file__).parent)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_fifos_and_devices_are_refused_not_read(tmp_path):
    for name in ("corpus.txt", "corpus.jsonl", "corpus.parquet"):
        os.mkfifo(tmp_path / name)
    _saved(tmp_path / "ds", ["data-00000-of-00001.arrow", "pipe.arrow"])
    os.mkfifo(tmp_path / "ds" / "pipe.arrow")
    (tmp_path / "state").mkdir()
    os.mkfifo(tmp_path / "state" / "state.json")
    paths = [tmp_path / n for n in ("corpus.txt", "corpus.jsonl", "corpus.parquet", "ds", "state")] + ["/dev/zero"]
    code = ("from attn_gui.engine.analysis.corpus.read import CorpusError, read_corpus\n"
            f"for path in {[str(p) for p in paths]!r}:\n"
            "    try:\n"
            "        read_corpus(path)\n"
            "        print('read', path)\n"
            "    except CorpusError as exc:\n"
            "        print(exc)\n")
    out = _bounded_child(code, memory=4 * 2**30)  # /dev/zero read whole would pass 4 GiB
    assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 6
    for line in lines[:3] + lines[5:]:
        assert line.endswith("it is a pipe (FIFO), not a regular file") or line.endswith("it is a device, not a "
                                                                                         "regular file"), line
    assert lines[3].endswith("it is a pipe (FIFO), not a regular file")
    assert "is not a folder written by datasets' save_to_disk" in lines[4]


def test_a_long_passage_is_cut_before_it_is_tokenized_and_stored_cut(model, tmp_path, monkeypatch):
    from attn_gui.engine.model.decoder import source as decoder

    path, hf = model
    limit = passage_limit(model_spec(path).max_tokens)  # 64: the folder's max_position_embeddings
    words = [WORDS[3 + i % 40] for i in range(300_000)]  # about 1 MB on one line
    (tmp_path / "c.txt").write_text(" ".join(words) + "\nthe cat sat on the mat\n" + "x" * 1_000_000 + "\n")
    seen = []
    tokenize = decoder.Source.tokenize
    monkeypatch.setattr(decoder.Source, "tokenize", lambda self, text: seen.append(len(text)) or tokenize(self, text))
    census(read_corpus(tmp_path / "c.txt"), tmp_path / "out", Settings(model=path), runner=run)
    assert max(seen) <= CHARS_MOST * limit  # never the whole megabyte
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["cut"], manifest["tokens"]) == (2, limit + 6 + 1)  # the word of x's: one unknown token
    examples = read_examples(tmp_path / "out")
    assert max(len(e["text"]) for e in examples) <= CHARS_MOST * limit
    ids = [WORDS.index(w) for w in words[:limit]]
    total, rows = 0, 0
    for ids_ in (ids, [WORDS.index(w) for w in ("the", "cat", "sat", "on", "the", "mat")], [0]):
        with torch.no_grad():  # transformers on the first ``limit`` tokens of each passage
            alpha = torch.stack(hf(torch.tensor([ids_]), output_attentions=True).attentions)[:, 0].double()
        total, rows = total + alpha.diagonal(-1, -2, -1).sum(-1), rows + len(ids_) - 1
    np.testing.assert_allclose(read_heads(tmp_path / "out")["previous"], (total / rows).numpy(), atol=1e-4)
    for e in examples:  # the text kept gives the tokens the example names, as the explorer opens it
        if e["passage"] == 1:
            assert e["text"].split()[e["query"] - 1] == e["query_token"] == words[e["query"] - 1]


def test_out_is_written_only_into_an_empty_folder_or_the_same_census(model, texts, whole, tmp_path):
    path, _ = model
    corpus, settings = read_corpus(texts), Settings(model=path, shard_size=16)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text('{"my": "own"}')
    (mine / "heads.parquet").write_bytes(b"my own bytes")
    export = tmp_path / "export"  # an export's folder: its own manifest.json
    export.mkdir()
    (export / "manifest.json").write_text('{"model": "minilm-l6", "fields": []}')
    (export / "weights.npy").write_bytes(b"\x93NUMPY")
    for folder in (mine, export):
        before = {p.name: p.read_bytes() for p in folder.iterdir()}
        with pytest.raises(CorpusError, match="holds files that are not a census .*; give an empty or new folder$"):
            census(corpus, folder, settings, runner=run)
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    with pytest.raises(CorpusError, match="holds a census of another corpus, model or settings"):
        census(corpus, whole, Settings(model=path, shard_size=8), runner=run)
    again = census(corpus, whole, settings, runner=run)  # the same census: resumed whole
    assert again.resumed == again.shards == 3
    (tmp_path / "empty").mkdir()
    assert census(corpus, tmp_path / "empty", settings, runner=run).shards == 3


def test_a_census_stopped_while_writing_never_reads_as_finished(model, texts, whole, tmp_path, monkeypatch):
    import shutil

    path, _ = model
    corpus, settings = read_corpus(texts), Settings(model=path, shard_size=16)
    assert read_manifest(whole)["passages"] == 48
    other = tmp_path / "other"  # the same sentences read by another model: other numbers
    llama_folder(tmp_path / "model2", seed=3)
    census(corpus, other, Settings(model=str(tmp_path / "model2"), shard_size=16), runner=run)
    mixed = tmp_path / "mixed"
    shutil.copytree(whole, mixed)
    shutil.copy(other / "heads.parquet", mixed / "heads.parquet")  # the new heads beside the old manifest
    with pytest.raises(CorpusError, match="heads.parquet is not the file its manifest names"):
        read_manifest(mixed)
    stopped = tmp_path / "stopped"
    shutil.copytree(whole, stopped)
    calls = []

    def fails_on_the_second(table, where, *args, **kwargs):  # the examples' write fails
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return write_table(table, where, *args, **kwargs)

    write_table = pq.write_table
    monkeypatch.setattr(pq, "write_table", fails_on_the_second)
    with pytest.raises(CorpusError):
        census(corpus, stopped, settings, runner=run)
    with pytest.raises(CorpusError, match="holds no finished census"):
        read_manifest(stopped)


def _truncate(p):
    p.write_bytes(p.read_bytes()[:100])


def _garble(p):
    data = bytearray(p.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = os.urandom(64)
    p.write_bytes(bytes(data))


def _empty(p):
    p.write_bytes(b"")


def _junk_zip(p):
    import zipfile

    with zipfile.ZipFile(p, "w") as z:
        z.writestr("meta.npy", b"junk")


def _a_folder(p):
    p.unlink()
    p.mkdir()
    (p / "x").write_text("x")


def _another_shard(p):  # a whole shard, of other passages
    p.write_bytes((p.parent / "shard-000000.npz").read_bytes())


def _other_shapes(p):  # a whole shard of another model's size
    s = ShardSums.load(p)
    s.sums = {k: np.zeros((3, 3)) for k in s.sums}
    s.save(p)


@pytest.mark.parametrize("damage", [_truncate, _garble, _empty, _junk_zip, _a_folder, _another_shard, _other_shapes])
def test_a_damaged_shard_is_computed_again_and_said_in_one_line(model, texts, whole, tmp_path, damage):
    import shutil

    path, _ = model
    out = tmp_path / "out"
    shutil.copytree(whole, out)
    damage(out / "shards" / "shard-000001.npz")
    said = []
    result = census(read_corpus(texts), out, Settings(model=path, shard_size=16), runner=run,
                    notice=said.append)
    assert said[0].startswith("1 stored shard could not be read and is computed again: shard-000001.npz (")
    assert len(said) == 1 and "\n" not in said[0]
    assert result.resumed == 2 and result.shards == 3
    for name in STATS:
        np.testing.assert_allclose(read_heads(out)[name], read_heads(whole)[name], atol=1e-12, rtol=0)


def _parts(folder: Path) -> list[str]:
    """The temporary files left in ``folder`` (none where it is not there)."""
    return [p.name for p in folder.rglob("*") if ".part" in p.name]


@pytest.mark.parametrize("where", ["shard", "outputs", "any write"])
def test_a_full_disk_is_one_line_and_leaves_no_temporary_file(model, texts, tmp_path, monkeypatch, where):
    """The disk fills (ENOSPC injected: a test cannot mount a small tmpfs everywhere) while a shard, the
    outputs or any file is written."""
    path, _ = model
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def savez(f, **arrays):
        f.write(b"PK\x03\x04 half a shard")
        raise full

    def write_table(*args, **kwargs):
        raise full

    def fsync(fd):
        raise full

    patch = {"shard": (np, "savez", savez), "outputs": (pq, "write_table", write_table),
             "any write": (os, "fsync", fsync)}[where]
    monkeypatch.setattr(*patch)
    out = tmp_path / "out"
    with pytest.raises(CorpusError, match="No space left on device") as info:
        census(read_corpus(texts), out, Settings(model=path, shard_size=16), runner=run)
    assert "\n" not in str(info.value)
    assert _parts(out) == [] and not (out / "manifest.json").exists()


def test_two_censuses_into_one_folder_both_finish(model, texts, whole, tmp_path, monkeypatch):
    """Census B runs whole while census A is between writing a shard and renaming it into place."""
    path, _ = model
    corpus, settings = read_corpus(texts), Settings(model=path, shard_size=16)
    out = tmp_path / "out"
    replace = os.replace
    other = []

    def replace_after_b(src, dst):
        if not other and str(dst).endswith("shard-000000.npz"):
            other.append(None)  # B's own renames go straight through
            other[0] = census(corpus, out, settings, runner=run)
        return replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_after_b)
    first = census(corpus, out, settings, runner=run)
    assert other and other[0].shards == first.shards == 3
    assert _parts(out) == []
    for name in STATS:
        np.testing.assert_allclose(read_heads(out)[name], read_heads(whole)[name], atol=1e-12, rtol=0)
    assert read_manifest(out)["passages"] == 48

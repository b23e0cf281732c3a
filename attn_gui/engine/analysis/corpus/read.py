"""Reading a corpus: a text file, JSON lines, Parquet or Arrow files, or a datasets folder, into passages, each
read up to its model's limit (``read_passage``)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path


from ...base import disk
from ...base.errors import UserError
from ...specs.families import MAX_TOKENS


FORMAT = 2  # of the shard files: a change makes older runs start again rather than mix


INSTALL_HINT = "pip install 'attn-gui[corpus]' (ray and pyarrow)"


def passage_limit(max_tokens: int) -> int:
    """The tokens of a passage the census reads: the model's own limit, at most 512 (``families.MAX_TOKENS``):
    it keeps every layer's T x T alpha of a passage, which a decoder's own length (8,192 and more) would not fit."""
    return min(max_tokens, MAX_TOKENS)


CHARS_FIRST = 8  # characters read first per token of the limit: past it, English gives more tokens than the limit


CHARS_MOST = 64  # characters read at most per token of the limit: no vocabulary's tokens are longer on average


@dataclass(frozen=True)
class Read:
    """What the census reads of one passage: its first tokens (at most the model's limit), whether it was
    cut (more tokens, or more characters, than were read) and the text tokenized, which gives those tokens."""

    ids: tuple[int, ...]
    tokens: tuple[str, ...]
    cut: bool
    text: str


def read_passage(model, text: str, limit: int) -> Read:
    """The first ``limit`` tokens of ``text`` (``model.tokenize``), never tokenizing the whole of a long passage.

    A passage of more than ``CHARS_FIRST`` x ``limit`` characters is cut at a space before it is
    tokenized, and read again four times as long while it gives fewer than ``limit`` + 1 tokens, up to
    ``CHARS_MOST`` x ``limit`` characters: a 30 MB line is never handed to a tokenizer whole. Cut at a
    space, the tokens read are those of the whole passage (every tokenizer here splits words at spaces
    first); a passage cut at ``CHARS_MOST`` x ``limit`` characters with no space in its second half is cut
    inside a word, and counted as cut.
    """
    size = CHARS_FIRST * limit
    while True:
        part = text if len(text) <= size else text[:_space_before(text, size)]
        toks = model.tokenize(part)
        if len(part) == len(text) or len(toks.token_ids) > limit or size >= CHARS_MOST * limit:
            break
        size = min(4 * size, CHARS_MOST * limit)
    cut = len(toks.token_ids) > limit or len(part) < len(text)
    return Read(tuple(toks.token_ids[:limit]), tuple(toks.tokens[:limit]), cut, part)


def _space_before(text: str, end: int) -> int:
    """Where to cut ``text`` at most ``end`` characters in: at its last white space in ``[end / 2, end)``, else at
    ``end``."""
    for i in range(end - 1, end // 2, -1):
        if text[i].isspace():
            return i
    return end


class CorpusError(UserError):
    """A corpus, an output folder or a census setting that cannot be used; the message says why."""


@dataclass(frozen=True)
class Corpus:
    """The passages of a corpus file, in order, with how they were read."""

    path: str
    format: str  # text, jsonl, parquet or datasets
    field: str | None
    passages: tuple[str, ...]
    blank: int  # empty or white-space passages left out

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for text in self.passages:
            digest.update(text.encode("utf-8", "surrogatepass") + b"\0")
        return digest.hexdigest()


def corpus_format(path: str | os.PathLike) -> str:
    """The format of ``path``, from its suffix (a folder is a ``datasets`` save_to_disk folder)."""
    p = Path(path)
    if p.is_dir():
        return "datasets"
    suffix = p.suffix.lower()
    return {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}.get(suffix, "text")


MAX_CORPUS_BYTES = 2**30  # the census holds a corpus's passages in memory: a larger file is refused, never half read


MAX_STATE_BYTES = 16 * 2**20  # a datasets folder's state.json (a list of file names)


def read_corpus(path: str | os.PathLike, field: str | None = None) -> Corpus:
    """Read the passages of ``path``: a text file (one passage per line), JSONL (``field``, default
    ``text``), Parquet (column ``field``) or a ``datasets`` save_to_disk folder (read with pyarrow).

    Only regular files are read (a FIFO or a device never), at most ``MAX_CORPUS_BYTES`` of them, and
    a datasets folder's only from inside itself. Raises ``CorpusError`` for a file that cannot be read,
    a missing field, or no passage at all.
    """
    kind = corpus_format(path)
    if kind == "text" and field is not None:
        raise CorpusError(f"--field applies to JSONL, Parquet and datasets folders; {path} is read as text, "
                          f"one passage per line")
    name = field or "text"
    try:
        if kind == "text":
            texts = lines(_bounded(Path(path)).decode("utf-8"))
        elif kind == "jsonl":
            texts = _read_jsonl(Path(path), name)
        else:
            texts = _read_arrow(Path(path), name, kind)
    except UnicodeDecodeError as exc:
        raise CorpusError(f"cannot read {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise CorpusError(f"cannot read {path}: {exc.strerror or exc}") from None
    except MemoryError:
        raise CorpusError(f"cannot read {path}: its passages do not fit in the memory free") from None
    passages = tuple(t for t in texts if t.strip())
    if not passages:
        raise CorpusError(f"the corpus {path} has no passages (no line with text)")
    return Corpus(str(path), kind, None if kind == "text" else name, passages, len(texts) - len(passages))


def lines(text: str) -> list[str]:
    """``text``'s lines: each ends in ``\\n`` (a ``\\r`` before it dropped), nothing else; a form feed, U+2028
    or ``\\x1c`` is inside its line, as a raw U+2028 is inside a JSON string (``str.splitlines`` splits at
    all of them)."""
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [part.removesuffix("\r") for part in parts]


def _bounded(path: Path, limit: int = MAX_CORPUS_BYTES) -> bytes:
    """The bytes of the regular file ``path``; ``CorpusError`` past ``limit``."""
    try:
        return disk.read_regular(path, limit)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise CorpusError(f"{path} is over {limit:,} bytes, more than a census reads; split it") from None
        raise


def _read_jsonl(path: Path, name: str) -> list[str]:
    texts = []
    for number, line in enumerate(lines(_bounded(path).decode("utf-8")), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        except RecursionError:
            raise CorpusError(f"{path}, line {number}: nested too deeply to read") from None
        if not isinstance(record, dict) or not isinstance(record.get(name), str):
            raise CorpusError(f"{path}, line {number}: no text field {name!r} (give it with --field)")
        texts.append(record[name])
    return texts


def arrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 (the submodule, loaded for the callers)
    except ImportError:
        raise CorpusError(f"Parquet and datasets folders and the census's outputs need pyarrow: "
                          f"{INSTALL_HINT}") from None
    return pyarrow


def _read_arrow(path: Path, name: str, kind: str) -> list[str]:
    pa = arrow()
    if kind == "parquet":
        data = pa.BufferReader(_bounded(path))
        try:
            columns = pa.parquet.read_schema(data).names
        except pa.ArrowException:
            raise CorpusError(f"cannot read {path}: not a Parquet file") from None
        if name not in columns:
            raise CorpusError(f"{path} has no column {name!r} (it has {', '.join(columns)}); give one with --field")
        table = pa.parquet.read_table(data, columns=[name])
    else:  # datasets' save_to_disk: state.json lists its Arrow stream files
        if (path / "dataset_dict.json").exists():
            raise CorpusError(f"{path} holds several splits; give one split's folder, e.g. {path / 'train'}")
        tables = []
        left = MAX_CORPUS_BYTES
        for file in _data_files(path):
            raw = _bounded(file, left)
            left -= len(raw)
            try:
                tables.append(pa.ipc.open_stream(pa.BufferReader(raw)).read_all())
            except pa.ArrowException:  # its message may quote the file's bytes: not repeated
                raise CorpusError(f"cannot read {path}: {file.name} is not an Arrow stream file") from None
        table = pa.concat_tables(tables) if tables else None
        if table is None or name not in table.column_names:
            have = ", ".join(table.column_names) if table is not None else "no data files"
            raise CorpusError(f"{path} has no column {name!r} ({have}); give one with --field")
    column = table.column(name)
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        raise CorpusError(f"{path}: column {name!r} holds {column.type}, not text")
    return [t for t in column.to_pylist() if t is not None]


def _data_files(folder: Path) -> list[Path]:
    """The Arrow files a datasets folder's state.json names, each a file inside the folder: an absolute
    name, a ``..`` or a symbolic link leading out of it is refused by name before anything is opened."""
    try:
        state = json.loads(_bounded(folder / "state.json", MAX_STATE_BYTES))
        names = [f["filename"] for f in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError, RecursionError, CorpusError):
        raise CorpusError(f"{folder} is not a folder written by datasets' save_to_disk (no readable "
                          f"state.json)") from None
    root = Path(os.path.realpath(folder))
    files = []
    for name in names:
        if isinstance(name, str) and ("\0" in name or not name.isprintable()):  # realpath: "embedded null byte"
            raise CorpusError(f"{folder}/state.json names {name!r:.80}, which is no file name; a datasets folder "
                              f"names its Arrow files")
        real = Path(os.path.realpath(folder / name)) if isinstance(name, str) and name else None
        if real is None or os.path.isabs(name) or real == root or not real.is_relative_to(root):
            raise CorpusError(f"{folder}/state.json names {str(name)!r:.80}, which is outside the folder; a "
                              f"datasets folder is read only from inside itself")
        files.append(folder / name)
    return files


def json_or_none(path: Path, key: str | None = None):
    """The JSON in the regular file ``path`` (its ``key``, where given); None where there is none, it is not
    JSON or not an object."""
    try:
        data = json.loads(disk.read_regular(path, MAX_STATE_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    return data if key is None else data.get(key) if isinstance(data, dict) else None

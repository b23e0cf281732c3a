"""Corpus census: what each head of a model does over a whole corpus, reduced shard by shard.

A corpus is cut into shards of passages. A ``ShardWorker`` holds the model once and turns a
shard into per-(layer, head) sums, row counts and top-k example heaps (never a T x T matrix);
the driver (``census``) keeps each shard's sums on disk as it arrives and reduces them all in
shard order, so the numbers do not depend on which worker took which shard, an interrupted run
resumes where it stopped, and nothing is counted twice. ``corpus_ray`` runs the same workers
as Ray actors.

The statistics, each a mean over every counted query row of every passage (positions from 1;
the first row is never counted: in a decoder it has one key and says nothing):

- ``previous``: alpha[i, i-1], rows i >= 2;
- ``duplicate``: sum of alpha[i, j] over the earlier j < i with the same token as i, over the
  rows i that have one;
- ``induction``: sum of alpha[i, j+1] over the earlier j with the same token as i and
  j + 1 < i (the token that followed the earlier copy: a repeated span continued), over the
  rows i that have one;
- ``sink``: alpha[i, 1], the weight on the first token;
- ``distance``: sum_j alpha[i, j] |i - j|, in tokens;
- ``entropy``: -sum_j alpha[i, j] ln alpha[i, j], in nats;
- ``dla`` (decoders with a language-model head): the head's direct logit attribution of the actual
  next token, rows i <= T - 1 scored on token i + 1 (``attribution.next_token_attribution``);
- ``jsd`` (``compare``): the Jensen-Shannon divergence (nats) between the two models' rows;
- ``pattern`` (``Pattern``): the fraction of the (query, key) pairs whose tokens match the
  pattern's two regular expressions that the head weights above its threshold.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import math
import os
import re
import shutil
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...base import disk
from ..attribution.trace import next_token_attribution
from ...config.config import AttentionConfig
from ...base.errors import UserError
from ...plan import Plan, plan
from ...sources import MODELS
from ...specs.families import MAX_TOKENS

STATS: tuple[str, ...] = ("previous", "duplicate", "induction", "sink", "distance", "entropy")
STAT_HELP: dict[str, str] = {
    "previous": "alpha[i, i-1], rows i >= 2",
    "duplicate": "sum of alpha[i, j] over earlier j with the same token as i, rows that have one",
    "induction": "sum of alpha[i, j+1] over earlier j with the same token as i and j+1 < i, rows that have one",
    "sink": "alpha[i, 1], the weight on the first token, rows i >= 2",
    "distance": "sum_j alpha[i, j] |i - j| in tokens, rows i >= 2",
    "entropy": "-sum_j alpha[i, j] ln alpha[i, j] in nats, rows i >= 2",
    "dla": "the head's direct logit attribution of the actual next token: its write at row i through the final "
           "norm (scale frozen at i) dotted with the unembedding row of token i+1, rows i <= T-1",
    "jsd": "Jensen-Shannon divergence (nats) between the two models' alpha rows, rows i >= 2",
    "pattern": "fraction of the pattern's (query, key) token pairs weighted above its threshold",
}
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


# Reading a corpus

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
            texts = _bounded(Path(path)).decode("utf-8").splitlines()
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
    for number, line in enumerate(_bounded(path).decode("utf-8").splitlines(), 1):
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


def _arrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 (the submodule, loaded for the callers)
    except ImportError:
        raise CorpusError(f"Parquet and datasets folders and the census's outputs need pyarrow: "
                          f"{INSTALL_HINT}") from None
    return pyarrow


def _read_arrow(path: Path, name: str, kind: str) -> list[str]:
    pa = _arrow()
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
        real = Path(os.path.realpath(folder / name)) if isinstance(name, str) and name else None
        if real is None or os.path.isabs(name) or real == root or not real.is_relative_to(root):
            raise CorpusError(f"{folder}/state.json names {str(name)!r:.80}, which is outside the folder; a "
                              f"datasets folder is read only from inside itself")
        files.append(folder / name)
    return files


# Settings

@dataclass(frozen=True)
class Pattern:
    """``from REGEX to REGEX > X``: the (query, key) pairs whose tokens match the two regular
    expressions (``re.search`` on the token as shown), and the weight a head must put above X."""

    text: str
    query: str
    key: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> Pattern:
        m = re.fullmatch(r"\s*from\s+(.+?)\s+to\s+(.+?)\s*>\s*([0-9]*\.?[0-9]+)\s*", text)
        if m is None:
            raise CorpusError(f'a pattern reads "from REGEX to REGEX > X", e.g. "from ^the$ to . > 0.5"; got {text!r}')
        for regex in m.group(1, 2):
            try:
                re.compile(regex)
            except re.error as exc:
                raise CorpusError(f"the pattern's regular expression {regex!r} is invalid: {exc}") from None
        threshold = float(m.group(3))
        if not 0 <= threshold < 1:
            raise CorpusError(f"the pattern's threshold must be 0 to 1 (a weight); got {threshold:g}")
        return cls(text, m.group(1), m.group(2), threshold)


@dataclass(frozen=True)
class Settings:
    """What a census computes; two runs with equal settings over the same corpus share shards."""

    model: str
    top_k: int = 5
    shard_size: int = 32
    pattern: Pattern | None = None
    compare: str | None = None

    def __post_init__(self):
        if not 1 <= self.top_k <= 100:
            raise CorpusError(f"--top-k must be 1 to 100; got {self.top_k}")
        if not 1 <= self.shard_size <= 100_000:
            raise CorpusError(f"--shard-size must be 1 to 100000; got {self.shard_size}")

    @functools.cached_property
    def model_plan(self) -> Plan:
        """The model's plan (``engine.plan``), made once: the census reads its spec, source and capabilities here."""
        return plan(AttentionConfig(model=self.model))

    @functools.cached_property
    def compare_plan(self) -> Plan | None:
        """The compared model's plan, made once (None without ``compare``)."""
        return None if self.compare is None else plan(AttentionConfig(model=self.compare))

    @property
    def stats(self) -> tuple[str, ...]:
        """The statistics computed: ``STATS``, ``dla`` where the model has it (``Plan.refusal``), then the options'."""
        dla = () if self.model_plan.refusal("attribute") else ("dla",)
        return STATS + dla + (("jsd",) if self.compare else ()) + (("pattern",) if self.pattern else ())

    def key(self, corpus: Corpus) -> dict:
        """What a stored shard must have been computed with to be reused."""
        models = [self.model] + ([self.compare] if self.compare else [])
        return {"format": FORMAT, "corpus": corpus.fingerprint(), "passages": len(corpus.passages),
                "models": [_model_identity(m) for m in models],
                "top_k": self.top_k, "shard_size": self.shard_size,
                "pattern": None if self.pattern is None else self.pattern.text}


def dla_refusal(model: str) -> str | None:
    """Why the census has no ``dla`` column for ``model`` (one line), or None where it has one (loads the model):
    ``Plan.refusal("attribute")``."""
    return plan(AttentionConfig(model=model)).refusal("attribute")


def _model_identity(name: str) -> str:
    """A bundled model's name, or a path made absolute (the same folder given two ways is one model)."""
    return name if name in MODELS else str(Path(name).resolve())


# One passage's sums

def _key_masks(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per statistic, the (T, T) weights each key gets in a row's value (1 on the keys counted)."""
    T = ids.numel()
    pos = torch.arange(T)
    earlier = pos[None, :] < pos[:, None]  # j < i
    same = (ids[:, None] == ids[None, :]) & earlier
    induction = torch.zeros(T, T, dtype=torch.bool)
    induction[:, 1:] = same[:, :-1] & (pos[None, 1:] < pos[:, None])  # i attends j+1 where x_j = x_i, j+1 < i
    first = torch.zeros(T, T, dtype=torch.bool)
    first[:, 0] = True
    return {"previous": pos[None, :] == pos[:, None] - 1, "duplicate": same, "induction": induction, "sink": first,
            "distance": (pos[:, None] - pos[None, :]).abs()}


def passage_stats(weights: torch.Tensor, ids: Sequence[int], other: torch.Tensor | None = None,
                  dla: tuple[torch.Tensor, torch.Tensor] | None = None
                  ) -> dict[str, tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Each statistic of one passage, summed over its counted rows.

    Parameters
    ----------
    weights : (L, h, T, T) tensor
        Every layer's alpha for the passage's T tokens.
    ids : T token ids
    other : (L, h, T, T) tensor, optional
        A second model's alpha on the same tokens: adds ``jsd``.
    dla : ((L, h, T - 1), (L, h, T - 1)) tensors, optional
        Each head's next-token DLA at rows 1 ... T - 1 and the key that gave most to it
        (``next_token_attribution``): adds ``dla``.

    Returns
    -------
    dict
        statistic -> (rows counted, sums (L, h) float64, best query (L, h), its key (L, h)), where the
        best query is the row with the largest value (0-based; -1 when no row counts) and its key the
        key that gave the most to it.
    """
    T = len(ids)
    pos = torch.arange(T)
    masks = _key_masks(torch.as_tensor(ids, dtype=torch.long))
    rows = {name: pos >= 1 for name in (*STATS, "jsd")}  # dla's own below
    rows["duplicate"] = masks["duplicate"].any(-1)
    rows["induction"] = masks["induction"].any(-1)
    alpha = weights.float()
    values: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # name -> (row values, row keys), (L, h, T)
    for name, mask in masks.items():
        contribution = alpha * mask.to(alpha.dtype)
        values[name] = (contribution.sum(-1), contribution.argmax(-1))
    values["entropy"] = (-torch.xlogy(alpha, alpha).sum(-1), alpha.argmax(-1))
    if other is not None:
        p, q = alpha.double(), other.double()
        m = (p + q) / 2
        jsd = 0.5 * (torch.xlogy(p, p) - torch.xlogy(p, m) + torch.xlogy(q, q) - torch.xlogy(q, m)).sum(-1)
        values["jsd"] = (jsd, (p - q).abs().argmax(-1))
    if dla is not None:  # row T has no next token: padded, not counted
        terms, keys = dla
        pad = (0, 1)
        values["dla"] = (torch.nn.functional.pad(terms.double(), pad), torch.nn.functional.pad(keys, pad))
        rows["dla"] = pos < T - 1
    out = {}
    for name, (value, key) in values.items():
        counted = rows[name]
        n = int(counted.sum())
        sums = (value.double() * counted).sum(-1).numpy()
        if n == 0:
            best = torch.full(value.shape[:-1], -1, dtype=torch.long)
            out[name] = (0, sums, best.numpy(), best.numpy())
            continue
        best = torch.where(counted, value.double(), -math.inf).argmax(-1)  # (L, h)
        out[name] = (n, sums, best.numpy(), key.gather(-1, best[..., None])[..., 0].numpy())
    return out


def pattern_stats(weights: torch.Tensor, tokens: Sequence[str], pattern: Pattern, causal: bool):
    """The pattern's pairs in one passage: (pairs, matches (L, h), best weight (L, h), query (L, h), key (L, h))."""
    q = torch.tensor([re.search(pattern.query, t) is not None for t in tokens])
    k = torch.tensor([re.search(pattern.key, t) is not None for t in tokens])
    pairs = q[:, None] & k[None, :]
    if causal:
        pairs &= torch.ones_like(pairs).tril()
    n = int(pairs.sum())
    alpha = weights.float()
    matches = ((alpha > pattern.threshold) & pairs).sum((-1, -2)).numpy().astype(np.float64)
    T = len(tokens)
    flat = torch.where(pairs, alpha, -math.inf).flatten(-2).argmax(-1)
    best = alpha.flatten(-2).gather(-1, flat[..., None])[..., 0].double().numpy()
    return n, matches, best, (flat // T).numpy(), (flat % T).numpy()


# A shard: sums, counts and heaps

def _empty_heap(shape: tuple[int, int], k: int) -> dict[str, np.ndarray]:
    return {"score": np.full((*shape, k), -np.inf), "passage": np.full((*shape, k), -1, dtype=np.int64),
            "query": np.full((*shape, k), -1, dtype=np.int32), "key": np.full((*shape, k), -1, dtype=np.int32)}


def merge_heaps(a: dict[str, np.ndarray], b: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
    """The top ``k`` of two heaps (..., k_a) and (..., k_b): highest score first, ties to the earlier passage."""
    both = {name: np.concatenate([a[name], b[name]], axis=-1) for name in a}
    order = np.lexsort((both["passage"] < 0, both["passage"], -both["score"]), axis=-1)[..., :k]
    return {name: np.take_along_axis(value, order, axis=-1) for name, value in both.items()}


@dataclass
class ShardSums:
    """One shard's (or, reduced, the corpus's) sums, row counts and example heaps per statistic."""

    passages: int = 0
    tokens: int = 0
    cut: int = 0  # passages longer than the model reads, cut to its limit
    empty: int = 0  # passages with no token
    counts: dict[str, int] = field(default_factory=dict)
    sums: dict[str, np.ndarray] = field(default_factory=dict)  # (L, h) float64
    heaps: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # (L, h, k) each

    def add(self, other: ShardSums, k: int) -> None:
        """Add ``other``'s sums and counts and merge its heaps into these."""
        self.passages += other.passages
        self.tokens += other.tokens
        self.cut += other.cut
        self.empty += other.empty
        for name, n in other.counts.items():
            self.counts[name] = self.counts.get(name, 0) + n
            self.sums[name] = self.sums[name] + other.sums[name] if name in self.sums else other.sums[name].copy()
            self.heaps[name] = merge_heaps(self.heaps[name], other.heaps[name], k) if name in self.heaps \
                else other.heaps[name]

    def means(self) -> dict[str, np.ndarray]:
        """Each statistic's mean per (layer, head): NaN where no row counted."""
        return {name: self.sums[name] / self.counts[name] if self.counts[name] else
                np.full_like(self.sums[name], np.nan) for name in self.sums}

    def save(self, path: Path) -> None:
        """Write to ``path`` (a .npz) whole or not at all (``disk.write_atomic``)."""
        arrays = {"meta": np.array(json.dumps({"passages": self.passages, "tokens": self.tokens, "cut": self.cut,
                                               "empty": self.empty, "counts": self.counts}))}
        for name in self.sums:
            arrays[f"sum.{name}"] = self.sums[name]
            arrays.update({f"heap.{name}.{part}": value for part, value in self.heaps[name].items()})
        # numpy's stub matches **arrays to allow_pickle too
        disk.write_atomic(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: Path) -> ShardSums:
        """A shard ``save`` wrote; ``OSError``, ``ValueError``, ``KeyError`` or ``TypeError`` for any other file."""
        with disk.open_regular(path) as f, np.load(f, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            sums = {key[4:]: z[key] for key in z.files if key.startswith("sum.")}
            heaps: dict[str, dict[str, np.ndarray]] = {name: {} for name in sums}
            for key in z.files:
                if key.startswith("heap."):
                    _, name, part = key.split(".")
                    heaps[name][part] = z[key]
        return cls(meta["passages"], meta["tokens"], meta["cut"], meta["empty"], meta["counts"], sums, heaps)

    def check(self, stats: Sequence[str], shape: tuple[int, int], k: int, first: int, passages: int) -> None:
        """``ValueError`` saying why, unless these are the sums of ``passages`` passages from ``first`` (from 0)
        for ``stats`` of a model of ``shape`` (layers, heads), ``k`` examples kept."""
        counts = (self.passages, self.tokens, self.cut, self.empty, *self.counts.values())
        if not all(type(n) is int and n >= 0 for n in counts) or self.cut > self.passages:
            raise ValueError("its counts are not counts")
        if self.passages != passages:
            raise ValueError(f"it holds {self.passages} passages, not {passages}")
        if set(self.counts) != set(stats) or set(self.sums) != set(stats) or set(self.heaps) != set(stats):
            raise ValueError("its statistics differ from this run's")
        for name in stats:
            heap = self.heaps[name]
            if self.sums[name].shape != shape or self.sums[name].dtype != np.float64 or set(heap) != set(HEAP):
                raise ValueError(f"its {name} is not {shape[0]} x {shape[1]} sums")
            if any(heap[part].shape != (*shape, k) or heap[part].dtype != dtype for part, dtype in HEAP.items()):
                raise ValueError(f"its {name} examples are not {k} per head")
            found = heap["passage"][heap["passage"] >= 0]
            if ((found < first) | (found >= first + passages)).any():
                raise ValueError(f"its {name} examples name passages of another shard")


HEAP = {"score": np.float64, "passage": np.int64, "query": np.int32, "key": np.int32}  # a heap's parts' types


def check_models(settings: Settings) -> None:
    """``ConfigError`` or ``CorpusError`` for a model that cannot be read, or two that cannot be compared."""
    spec = settings.model_plan.facts
    if settings.compare_plan is not None:
        other = settings.compare_plan.facts
        if (other.layers, other.heads) != (spec.layers, spec.heads):
            raise CorpusError(f"--compare needs the same layers and heads: {spec.label} has {spec.layers} x "
                              f"{spec.heads}, {other.label} {other.layers} x {other.heads}")


class ShardWorker:
    """Holds the model (and the compared model) once and turns shards of passages into ``ShardSums``.

    The same class runs in-process and as a Ray actor (``corpus_ray``); ``threads`` sets torch's
    CPU threads (a Ray actor takes one core).
    """

    def __init__(self, settings: Settings, threads: int | None = None):
        if threads is not None:
            torch.set_num_threads(threads)
        check_models(settings)
        self.settings = settings
        self.spec = settings.model_plan.facts
        self.model = settings.model_plan.source
        self.model.load()
        self.other = None
        if settings.compare_plan is not None:
            self.other = settings.compare_plan.source
            self.other.load()
        self.dla = settings.model_plan.runner("attribute") if "dla" in settings.stats else None  # its decoder

    def pid(self) -> int:
        """This worker's process id (a test stops a Ray actor with it)."""
        return os.getpid()

    def run(self, start: int, passages: Sequence[str]) -> dict:
        """``shard`` as plain data for Ray: the ShardSums' fields, or {"error": message} for a UserError."""
        try:
            return asdict(self.shard(start, passages))
        except UserError as exc:
            return {"error": str(exc)}

    def shard(self, start: int, passages: Sequence[str]) -> ShardSums:
        """The sums of ``passages``, the corpus's passages ``start``, ``start`` + 1, ... (from 0)."""
        s = self.settings
        shape = (self.spec.layers, self.spec.heads)
        total = ShardSums(counts={name: 0 for name in s.stats}, sums={name: np.zeros(shape) for name in s.stats},
                          heaps={name: _empty_heap(shape, s.top_k) for name in s.stats})
        limit = passage_limit(self.spec.max_tokens)
        for offset, text in enumerate(passages):
            total.passages += 1
            read = read_passage(self.model, text, limit)
            total.cut += read.cut
            ids, tokens = list(read.ids), list(read.tokens)
            if not ids:
                total.empty += 1
                continue
            total.tokens += len(ids)
            with torch.inference_mode():
                dla = None
                if self.dla is not None:  # the weights of the same forward pass
                    w, decoder_shape = self.dla.decoder("cpu", torch.float32)
                    weights, terms, keys = next_token_attribution(w, decoder_shape, torch.tensor(ids))
                    dla = (terms, keys)
                else:
                    _, weights = self.model.layer_inputs(torch.tensor(ids), "cpu", torch.float32)
                other = None
                if self.other is not None:
                    other_ids = list(read_passage(self.other, text, limit).ids)
                    if other_ids != ids:
                        raise CorpusError(f"--compare needs models with the same tokens: passage {start + offset + 1} "
                                          f"is {len(ids)} tokens for one and {len(other_ids)} for the other, or "
                                          f"differs")
                    other = self.other.layer_inputs(torch.tensor(ids), "cpu", torch.float32)[1]
                found = passage_stats(weights, ids, other, dla)
                if s.pattern is not None:
                    n, matches, best, query, key = pattern_stats(weights, tokens, s.pattern, self.spec.causal)
                    found["pattern"] = (n, matches, query, key)
            passage = start + offset
            for name, (n, sums, query, key) in found.items():
                total.counts[name] += n
                total.sums[name] += sums
                if n == 0:
                    continue
                score = best if name == "pattern" else sums / n  # the passage's mean
                single = {"score": score[..., None], "passage": np.full((*shape, 1), passage, dtype=np.int64),
                          "query": query[..., None].astype(np.int32), "key": key[..., None].astype(np.int32)}
                total.heaps[name] = merge_heaps(total.heaps[name], single, s.top_k)
        return total


def from_plain(data: dict) -> ShardSums:
    """A ShardSums from ``ShardWorker.run``'s plain data; ``CorpusError`` for a worker's error."""
    if "error" in data:
        raise CorpusError(data["error"])
    return ShardSums(**data)


# The driver

@dataclass(frozen=True)
class Progress:
    """Where a census stands: passages done of the corpus, and of this run (for its rate)."""

    done: int
    total: int
    done_now: int
    elapsed: float  # seconds of this run

    @property
    def rate(self) -> float:
        return self.done_now / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def left(self) -> float | None:
        """Seconds left at this run's rate; None before the first shard."""
        return (self.total - self.done) / self.rate if self.rate > 0 else None


@dataclass(frozen=True)
class Census:
    """A finished census: its totals, where it was written, and how much of it was reused."""

    out: Path
    totals: ShardSums
    means: dict[str, np.ndarray]
    shards: int
    resumed: int  # shards read back from an earlier run
    manifest: dict


OUTPUTS = ("heads.parquet", "examples.parquet")  # the manifest, written last, holds their sizes and SHA-256


class RunFolder:
    """DIR: the outputs, and DIR/shards/ with one .npz per finished shard and the run's key.

    Written only where nothing else is: a new or empty folder, or one holding an earlier census of
    the same corpus, models and settings (its ``shards/run.json``, or its manifest's ``run``), so no
    file a person wrote, and no other census, is ever replaced.
    """

    def __init__(self, out: str | os.PathLike, key: dict):
        self.out = Path(out)
        self.shards = self.out / "shards"
        if self.out.exists() and not self.out.is_dir():
            raise CorpusError(f"--out {out} is a file; give a folder")
        stored = self.shards / "run.json"
        if self.out.is_dir():
            old = _json(stored) if os.path.lexists(stored) else _json(self.out / "manifest.json", "run")
            if old is None and not os.path.lexists(stored) and self._holds_files():
                names = sorted(p.name for p in self.out.iterdir())
                raise CorpusError(f"--out {out} holds files that are not a census ({', '.join(names[:3])}"
                                  f"{', ...' if len(names) > 3 else ''}); give an empty or new folder")
            if old is not None and old != key:
                raise CorpusError(f"{out} holds a census of another corpus, model or settings; give another --out, "
                                  f"or delete the folder to start again")
        try:
            self.shards.mkdir(parents=True, exist_ok=True)
            if not os.path.lexists(stored):
                disk.write_atomic(stored, json.dumps(key, indent=1).encode())
        except OSError as exc:
            raise CorpusError(f"cannot write to {self.shards}: {exc.strerror or exc}") from None

    def _holds_files(self) -> bool:
        """Anything in the folder but an empty shards/ (a run stopped before its first file)."""
        entries = list(self.out.iterdir())
        return not (entries == [] or entries == [self.shards] and self.shards.is_dir()
                    and not self.shards.is_symlink() and not any(self.shards.iterdir()))

    def path(self, index: int) -> Path:
        return self.shards / f"shard-{index:06d}.npz"

    def discard(self, index: int) -> None:
        """Remove what stands where shard ``index`` goes (a damaged file, a folder), so it is computed again."""
        path = self.path(index)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            raise CorpusError(f"cannot remove the damaged {path}: {exc.strerror or exc}") from None


def _json(path: Path, key: str | None = None):
    """The JSON in the regular file ``path`` (its ``key``, where given); None where there is none, it is not
    JSON or not an object."""
    try:
        data = json.loads(disk.read_regular(path, MAX_STATE_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    return data if key is None else data.get(key) if isinstance(data, dict) else None


Runner = Callable[[Settings, list[tuple[int, int, tuple[str, ...]]], Callable[[int, ShardSums], None]], None]


def run_in_process(settings: Settings, shards, on_shard, threads: int | None = None) -> None:
    """Compute ``shards`` (index, start, passages) one after another in this process, on ``threads``
    of torch's CPU threads (None: torch's default; set back afterwards)."""
    before = torch.get_num_threads()
    try:
        worker = ShardWorker(settings, threads)
        for index, start, passages in shards:
            on_shard(index, worker.shard(start, passages))
    finally:
        torch.set_num_threads(before)


def census(corpus: Corpus, out: str | os.PathLike, settings: Settings, *, runner: Runner = run_in_process,
           progress: Callable[[Progress], None] | None = None, about: dict | None = None,
           notice: Callable[[str], None] | None = None) -> Census:
    """Compute (or resume) the census of ``corpus`` into folder ``out``.

    Shards already in ``out/shards`` from an interrupted run with the same corpus and settings
    are read back, not computed again; a damaged one (truncated, garbled, of another run, a folder
    in its place) is computed again, said once through ``notice``. Each new shard is written there
    as it arrives. The outputs (heads.parquet, examples.parquet, then manifest.json with their
    checksums) are written at the end, each whole. ``runner`` computes the missing shards
    (``run_in_process`` or ``corpus_ray.runner``). A write that fails (a full disk) is a
    ``CorpusError``; the shards written are kept.
    """
    _arrow()  # before any compute: the outputs need it
    check_models(settings)
    key = settings.key(corpus)
    folder = RunFolder(out, key)
    size = settings.shard_size
    n = len(corpus.passages)
    starts = range(0, n, size)
    spec = settings.model_plan.facts
    shape, stats = (spec.layers, spec.heads), settings.stats

    def check(index: int) -> str | None:
        """Why the stored shard ``index`` cannot be used; None where it can."""
        start = starts[index]
        try:
            ShardSums.load(folder.path(index)).check(stats, shape, settings.top_k, start, len(corpus.passages[
                start:start + size]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, EOFError, RecursionError,
                zipfile.BadZipFile) as exc:
            return (exc.strerror if isinstance(exc, OSError) and exc.strerror else None) or _said(exc)
        return None

    todo, damaged = [], []
    for i, start in enumerate(starts):
        if os.path.lexists(folder.path(i)):
            why = check(i)
            if why is None:
                continue
            damaged.append(f"{folder.path(i).name} ({why})")
            folder.discard(i)
        todo.append((i, start, corpus.passages[start:start + size]))
    if damaged and notice is not None:
        notice(f"{len(damaged)} stored shard{'s' if len(damaged) > 1 else ''} could not be read and "
               f"{'are' if len(damaged) > 1 else 'is'} computed again: {', '.join(damaged[:3])}"
               f"{', ...' if len(damaged) > 3 else ''}")
    done = n - sum(len(p) for _, _, p in todo)
    began = time.perf_counter()
    state = {"done": done, "now": 0}

    def on_shard(index: int, sums: ShardSums) -> None:
        try:
            sums.save(folder.path(index))
        except OSError as exc:
            raise CorpusError(f"cannot write {folder.path(index)}: {exc.strerror or exc}; the shards written are "
                              f"kept: run the same command again to resume") from None
        state["done"] += sums.passages
        state["now"] += sums.passages
        if progress is not None:
            progress(Progress(state["done"], n, state["now"], time.perf_counter() - began))

    if todo:
        runner(settings, todo, on_shard)
    totals = ShardSums()
    for i in range(len(starts)):
        why = check(i)
        if why is not None:  # changed since it was written or checked
            raise CorpusError(f"{folder.path(i)} cannot be read ({why}); run the same command again to compute it "
                              f"again")
        totals.add(ShardSums.load(folder.path(i)), settings.top_k)
    means = totals.means()
    if settings.compare_plan is not None:
        means.update(weight_differences(settings.model_plan, settings.compare_plan))
    elapsed = time.perf_counter() - began
    manifest = {
        "model": settings.model, "compare": settings.compare, "corpus": corpus.path, "format": corpus.format,
        "field": corpus.field, "passages": n, "blank_lines_skipped": corpus.blank, "tokens": totals.tokens,
        "cut": totals.cut, "max_tokens": passage_limit(spec.max_tokens),
        "empty_passages": totals.empty,
        "rows": totals.counts, "statistics": {name: STAT_HELP[name] for name in stats},
        "dla_not_computed": settings.model_plan.refusal("attribute"),
        "pattern": None if settings.pattern is None else asdict(settings.pattern), "top_k": settings.top_k,
        "shards": len(starts), "shard_size": size, "shards_resumed": len(starts) - len(todo),
        "shards_damaged": len(damaged),
        "seconds": round(elapsed, 3), "passages_per_second": round(state["now"] / elapsed, 3) if state["now"] else None,
        **(about or {}), "run": key,
    }
    try:
        write_outputs(folder.out, corpus, settings, totals, means, manifest)
    except OSError as exc:
        raise CorpusError(f"cannot write the census to {folder.out}: {exc.strerror or exc}; the shards are kept: "
                          f"run the same command again to write it") from None
    return Census(folder.out, totals, means, len(starts), len(starts) - len(todo), manifest)


def _said(exc: BaseException) -> str:
    """An error's first line, cut short, or its type's name where it says nothing."""
    said = (str(exc).splitlines() or [""])[0].strip()
    return f"{said:.60}" if said else type(exc).__name__


def weight_differences(model: Plan, other: Plan) -> dict[str, np.ndarray]:
    """||W_QK' - W_QK|| and ||W_OV' - W_OV|| (Frobenius) per (layer, head), where the shapes agree; else {}.

    W_QK = W_q^T W_k (d x d) and W_OV = W_o,h W_v (d x d) in column layout, K/V heads shared as
    grouped-query attention shares them.
    """
    a, b = model.facts, other.facts
    if (a.layers, a.heads, a.d_model, a.d_k, a.d_v, a.kv_heads) != (b.layers, b.heads, b.d_model, b.d_k, b.d_v,
                                                                      b.kv_heads):
        return {}
    qk, ov = np.zeros((a.layers, a.heads)), np.zeros((a.layers, a.heads))
    for layer in range(a.layers):
        w = [m.source.layer_weights(layer, "cpu", torch.float64) for m in (model, other)]
        circuits = [_circuits(p, a.heads) for p in w]
        qk[layer] = torch.linalg.matrix_norm(circuits[0][0] - circuits[1][0]).numpy()
        ov[layer] = torch.linalg.matrix_norm(circuits[0][1] - circuits[1][1]).numpy()
    return {"dW_QK": qk, "dW_OV": ov}


def _circuits(p, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head's W_QK (h, d, d) and W_OV (h, d, d) from column-layout projections."""
    group = heads // p.w_k.shape[0]
    w_k = p.w_k.repeat_interleave(group, 0)  # (h, d_k, d)
    w_v = p.w_v.repeat_interleave(group, 0)  # (h, d_v, d)
    d_v = w_v.shape[1]
    w_o = p.w_o.reshape(p.w_o.shape[0], heads, d_v).transpose(0, 1)  # (h, d, d_v)
    return p.w_q.transpose(-2, -1) @ w_k, w_o @ w_v


def write_outputs(out: Path, corpus: Corpus, settings: Settings, totals: ShardSums, means: dict[str, np.ndarray],
                  manifest: dict) -> None:
    """heads.parquet, examples.parquet and manifest.json, each written whole or not at all."""
    pa = _arrow()
    L, h = next(iter(totals.sums.values())).shape
    layer, head = np.meshgrid(np.arange(1, L + 1), np.arange(1, h + 1), indexing="ij")
    columns = {"layer": layer.ravel().astype(np.int32), "head": head.ravel().astype(np.int32)}
    columns.update({name: means[name].ravel() for name in (*settings.stats, "dW_QK", "dW_OV") if name in means})
    if settings.pattern is not None:
        columns["pattern_matches"] = totals.sums["pattern"].ravel().astype(np.int64)
    model = settings.model_plan.source
    limit = passage_limit(settings.model_plan.facts.max_tokens)
    read = functools.lru_cache(maxsize=None)(lambda i: read_passage(model, corpus.passages[i], limit))  # examples only
    rows: dict[str, list] = {n: [] for n in ("statistic", "layer", "head", "rank", "score", "passage", "query",
                                             "key", "query_token", "key_token", "text")}
    for name in settings.stats:
        heap = totals.heaps[name]
        for (li, hi, rank), passage in np.ndenumerate(heap["passage"]):
            if passage < 0:
                continue
            for column, value in (("statistic", name), ("layer", li + 1), ("head", hi + 1), ("rank", rank + 1),
                                  ("score", float(heap["score"][li, hi, rank])), ("passage", int(passage) + 1),
                                  ("query", int(heap["query"][li, hi, rank]) + 1),
                                  ("key", int(heap["key"][li, hi, rank]) + 1),
                                  ("query_token", read(passage).tokens[heap["query"][li, hi, rank]]),
                                  ("key_token", read(passage).tokens[heap["key"][li, hi, rank]]),
                                  ("text", read(passage).text)):
                rows[column].append(value)
    types = {"statistic": pa.string(), "layer": pa.int32(), "head": pa.int32(), "rank": pa.int32(),
             "score": pa.float64(), "passage": pa.int64(), "query": pa.int32(), "key": pa.int32(),
             "query_token": pa.string(), "key_token": pa.string(), "text": pa.string()}
    examples = pa.table({name: pa.array(values, type=types[name]) for name, values in rows.items()})
    # no manifest while the outputs change: a run stopped in between leaves no census that reads as finished
    (out / "manifest.json").unlink(missing_ok=True)
    files = {}
    for name, table in zip(OUTPUTS, (pa.table(columns), examples), strict=True):
        sink = pa.BufferOutputStream()
        pa.parquet.write_table(table, sink)
        data = sink.getvalue().to_pybytes()
        disk.write_atomic(out / name, data)
        files[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    text = json.dumps({**manifest, "files": files}, indent=1, ensure_ascii=False) + "\n"
    disk.write_atomic(out / "manifest.json", text.encode())


def read_heads(out: str | os.PathLike) -> dict[str, np.ndarray]:
    """heads.parquet of a census folder as {column: (L, h) array} (layer and head from 1 as written)."""
    pa = _arrow()
    table = pa.parquet.read_table(Path(out) / "heads.parquet")
    L, h = int(max(table.column("layer").to_pylist())), int(max(table.column("head").to_pylist()))
    return {name: np.asarray(table.column(name).to_numpy()).reshape(L, h) for name in table.column_names}


def read_examples(out: str | os.PathLike) -> list[dict]:
    """examples.parquet of a census folder as one dict per row (layer, head, passage, query, key from 1)."""
    return _arrow().parquet.read_table(Path(out) / "examples.parquet").to_pylist()


def read_manifest(out: str | os.PathLike) -> dict:
    """manifest.json of a finished census, whose outputs are those it names (their sizes and SHA-256);
    ``CorpusError`` for a folder that holds no finished census, or one whose outputs changed since."""
    manifest = _json(Path(out) / "manifest.json")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict):
        raise CorpusError(f"{out} holds no finished census (no manifest.json of one); write one with attn-gui "
                          f"corpus") from None
    for name in OUTPUTS:
        entry = files.get(name)
        try:
            same = isinstance(entry, dict) and type(entry.get("size")) is int and \
                hashlib.sha256(disk.read_regular(Path(out) / name, entry["size"])).hexdigest() == entry.get("sha256")
        except OSError:
            same = False
        if not same:
            raise CorpusError(f"{out} holds no finished census: {name} is not the file its manifest names (a run "
                              f"stopped while writing, or a file changed since); run attn-gui corpus again")
    return manifest

"""A census's settings, and the work of one shard: a ``ShardWorker`` holds the model once and turns a shard into
per-(layer, head) sums, row counts and top-k example heaps (``ShardSums``)."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...base import disk
from ..attribution.logit import next_token_attribution
from ...config.config import AttentionConfig
from ...base.errors import UserError
from ...model.plan import Plan, plan
from ...specs.catalog import MODELS
from .read import FORMAT, passage_limit, read_passage, CorpusError, Corpus
from ...specs.families import MAX_TOKENS
from .stats import Pattern, STATS, passage_stats, pattern_stats


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
        if self.tokens > passages * MAX_TOKENS or self.empty > passages:  # a passage is read to 512 tokens at most
            raise ValueError("its tokens are more than its passages can hold")
        if any(n > passages * MAX_TOKENS ** 2 for n in self.counts.values()):  # a row or pair of a passage at most
            raise ValueError("its statistics count more rows than its passages hold")
        if set(self.counts) != set(stats) or set(self.sums) != set(stats) or set(self.heaps) != set(stats):
            raise ValueError("its statistics differ from this run's")
        for name in stats:
            heap = self.heaps[name]
            if self.sums[name].shape != shape or self.sums[name].dtype != np.float64 or set(heap) != set(HEAP):
                raise ValueError(f"its {name} is not {shape[0]} x {shape[1]} sums")
            if any(heap[part].shape != (*shape, k) or heap[part].dtype != dtype for part, dtype in HEAP.items()):
                raise ValueError(f"its {name} examples are not {k} per head")
            if not np.isfinite(self.sums[name]).all():
                raise ValueError(f"its {name} sums are not finite")
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

    The same class runs in-process and as a Ray actor (``corpus.ray``); ``threads`` sets torch's
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

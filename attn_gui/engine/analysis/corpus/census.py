"""Corpus census: what each head of a model does over a whole corpus, reduced shard by shard.

A corpus is cut into shards of passages. A ``ShardWorker`` holds the model once and turns a
shard into per-(layer, head) sums, row counts and top-k example heaps (never a T x T matrix);
the driver (``census``) keeps each shard's sums on disk as it arrives and reduces them all in
shard order, so the numbers do not depend on which worker took which shard, an interrupted run
resumes where it stopped, and nothing is counted twice. ``corpus.ray`` runs the same workers
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
  next token, rows i <= T - 1 scored on token i + 1 (``attribution.logit.next_token_attribution``);
- ``jsd`` (``compare``): the Jensen-Shannon divergence (nats) between the two models' rows;
- ``pattern`` (``Pattern``): the fraction of the (query, key) pairs whose tokens match the
  pattern's two regular expressions that the head weights above its threshold.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...base import disk
from ...model.plan import Plan
from .read import passage_limit, CorpusError, Corpus, arrow, json_or_none
from .stats import STAT_HELP
from .shards import Settings, ShardSums, check_models, ShardWorker
from .outputs import write_outputs


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


class RunFolder:
    """DIR: the outputs, and DIR/shards/ with one .npz per finished shard and the run's key.

    Written only where nothing else is: a new or empty folder, or one holding an earlier census of
    the same corpus, models and settings (its ``shards/run.json``, or its manifest's ``run``), so no
    file a person wrote, and no other census, is ever replaced.
    """

    def __init__(self, out: str | os.PathLike, key: dict, what: str = "census"):
        self.out = Path(out)
        self.shards = self.out / "shards"
        if self.out.exists() and not self.out.is_dir():
            raise CorpusError(f"--out {out} is a file; give a folder")
        stored = self.shards / "run.json"
        if self.out.is_dir():
            old = json_or_none(stored) if os.path.lexists(stored) else json_or_none(self.out / "manifest.json", "run")
            if old is None and not os.path.lexists(stored) and self._holds_files():
                names = sorted(p.name for p in self.out.iterdir())
                raise CorpusError(f"--out {out} holds files that are not a {what} ({', '.join(names[:3])}"
                                  f"{', ...' if len(names) > 3 else ''}); give an empty or new folder")
            if old is not None and old != key:
                raise CorpusError(f"{out} holds a {what} of another corpus, model or settings; give another --out, "
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


Runner = Callable[[Settings, list[tuple[int, int, tuple[str, ...]]], Callable[[int, ShardSums], None]], None]



class ShardKeeper:
    """What a run does with each shard's sums as a worker hands them over (called with its index and sums): saved in
    ``folder`` (a write that fails: ``CorpusError`` in one line, the shards written kept), counted (``done`` of
    ``total`` passages, ``now`` in this run, since ``began``) and reported to ``progress``. The census's and the lens
    fit's."""

    def __init__(self, folder: RunFolder, save: Callable[[Any, Path], None], total: int, done: int,
                 progress: Callable[[Progress], None] | None):
        self.folder, self.save, self.total, self.progress = folder, save, total, progress
        self.done, self.now, self.began = done, 0, time.perf_counter()

    def __call__(self, index: int, sums: Any) -> None:
        try:
            self.save(sums, self.folder.path(index))
        except OSError as exc:
            raise CorpusError(f"cannot write {self.folder.path(index)}: {exc.strerror or exc}; the shards written "
                              f"are kept: run the same command again to resume") from None
        self.done += sums.passages
        self.now += sums.passages
        if self.progress is not None:
            self.progress(Progress(self.done, self.total, self.now, time.perf_counter() - self.began))


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
    (``run_in_process`` or ``corpus.ray.runner``). A write that fails (a full disk) is a
    ``CorpusError``; the shards written are kept.
    """
    arrow()  # before any compute: the outputs need it
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

    todo, damaged = _missing(folder, corpus, starts, size, check)
    if damaged and notice is not None:
        notice(f"{len(damaged)} stored shard{'s' if len(damaged) > 1 else ''} could not be read and "
               f"{'are' if len(damaged) > 1 else 'is'} computed again: {', '.join(damaged[:3])}"
               f"{', ...' if len(damaged) > 3 else ''}")
    done = n - sum(len(p) for _, _, p in todo)
    on_shard = ShardKeeper(folder, lambda sums, path: sums.save(path), n, done, progress)

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
    elapsed = time.perf_counter() - on_shard.began
    manifest = {
        **_manifest(corpus, settings, totals), "shards": len(starts), "shard_size": size,
        "shards_resumed": len(starts) - len(todo), "shards_damaged": len(damaged),
        "seconds": round(elapsed, 3), "passages_per_second": round(on_shard.now / elapsed, 3) if on_shard.now else None,
        **(about or {}), "run": key,
    }
    try:
        write_outputs(folder.out, corpus, settings, totals, means, manifest)
    except OSError as exc:
        raise CorpusError(f"cannot write the census to {folder.out}: {exc.strerror or exc}; the shards are kept: "
                          f"run the same command again to write it") from None
    return Census(folder.out, totals, means, len(starts), len(starts) - len(todo), manifest)


def _missing(folder: RunFolder, corpus: Corpus, starts: range, size: int,
             check: Callable[[int], str | None]) -> tuple[list, list[str]]:
    """The shards to compute, (index, start, passages) each, and the stored ones that could not be read (each
    named with why, and removed so that it is computed again)."""
    todo, damaged = [], []
    for i, start in enumerate(starts):
        if os.path.lexists(folder.path(i)):
            why = check(i)
            if why is None:
                continue
            damaged.append(f"{folder.path(i).name} ({why})")
            folder.discard(i)
        todo.append((i, start, corpus.passages[start:start + size]))
    return todo, damaged


def _manifest(corpus: Corpus, settings: Settings, totals: ShardSums) -> dict:
    """What the manifest says of the corpus, the model and the statistics (the run's figures are added by
    ``census``)."""
    return {
        "model": settings.model, "compare": settings.compare, "corpus": corpus.path, "format": corpus.format,
        "field": corpus.field, "passages": len(corpus.passages), "blank_lines_skipped": corpus.blank,
        "tokens": totals.tokens, "cut": totals.cut, "max_tokens": passage_limit(settings.model_plan.facts.max_tokens),
        "empty_passages": totals.empty,
        "rows": totals.counts, "statistics": {name: STAT_HELP[name] for name in settings.stats},
        "dla_not_computed": settings.model_plan.refusal("attribute"),
        "pattern": None if settings.pattern is None else asdict(settings.pattern), "top_k": settings.top_k,
    }


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

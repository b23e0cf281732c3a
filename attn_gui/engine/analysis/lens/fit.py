"""Fitting a Jacobian lens over a corpus, shard by shard, as the corpus census does (``corpus.census``).

The corpus (``corpus.read.read_corpus``: text, JSONL, Parquet, a datasets folder) is cut into shards of
``shard_size`` passages; each shard's ``LensSums`` (the sum of its prompts' J_l and their count) is kept in
DIR/shards/ as it arrives, so a stopped fit resumes where it stopped; the shards are reduced in shard order and
divided by the prompts counted, so a fit in process and one on Ray (``corpus.ray.runner`` with ``RayLensWorker``,
reducing on the workers) give the same matrices. DIR/lens.pt is the lens in TransformerLens' artifact format
(``artifact``); DIR is new, empty, or an earlier fit of the same corpus, model and settings (``census.RunFolder``).
"""

from __future__ import annotations

import json
import os
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...base import disk
from ...base.devices import resolve_device
from ..corpus.census import Progress, RunFolder, ShardKeeper
from ..corpus.read import CorpusError, Corpus
from ..corpus.shards import _model_identity
from .artifact import LENS_FILE, Lens, identity
from .jacobian import LensSettings, LensSums, LensWorker

FORMAT = 1  # of the lens shard files


def key(settings: LensSettings, corpus: Corpus) -> dict:
    """What a stored shard must have been computed with to be reused."""
    return {"what": "jacobian lens", "format": FORMAT, "corpus": corpus.fingerprint(),
            "passages": len(corpus.passages), "model": _model_identity(settings.model),
            "layers": list(settings.layers), "dim_batch": settings.dim_batch, "max_seq_len": settings.max_seq_len,
            "skip_first_positions": settings.skip_first_positions, "shard_size": settings.shard_size,
            "dtype": settings.dtype}


def save_sums(sums: LensSums, path: Path) -> None:
    """A shard's sums to ``path`` (.npz), whole or not at all."""
    arrays = {"meta": np.array(json.dumps({k: v for k, v in sums.plain().items() if k != "sums"}))}
    arrays.update({f"J.{layer}": s for layer, s in sums.sums.items()})
    disk.write_atomic(path, lambda f: np.savez(f, **arrays))  # type: ignore[arg-type]


def load_sums(path: Path, layers: tuple[int, ...], d: int, passages: int) -> LensSums:
    """A shard ``save_sums`` wrote of ``passages`` passages, for ``layers`` of width ``d``; ValueError (or an
    OSError, KeyError, a zip error) for anything else."""
    with disk.open_regular(path) as f, np.load(f, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        sums = {int(name[2:]): z[name] for name in z.files if name.startswith("J.")}
    out = LensSums(meta["passages"], meta["prompts"], meta["skipped"], meta["tokens"], sums)
    counts = (out.passages, out.prompts, out.skipped, out.tokens)
    if not all(type(n) is int and n >= 0 for n in counts) or out.prompts + out.skipped != out.passages:
        raise ValueError("its counts are not counts")
    if out.passages != passages:
        raise ValueError(f"it holds {out.passages} passages, not {passages}")
    if sorted(sums) != list(layers) or any(s.shape != (d, d) or s.dtype != np.float64 for s in sums.values()):
        raise ValueError("its layers or shapes are not this fit's")
    if not all(np.isfinite(s).all() for s in sums.values()):
        raise ValueError("its sums are not finite")
    return out


Runner = Callable[[LensSettings, list[tuple[int, int, tuple[str, ...]]], Callable[[int, LensSums], None]], None]


def run_in_process(settings: LensSettings, shards, on_shard, threads: int | None = None) -> None:
    """Compute ``shards`` (index, start, passages) one after another here."""
    before = torch.get_num_threads()
    try:
        worker = LensWorker(settings, threads)
        for index, start, passages in shards:
            on_shard(index, worker.shard(start, passages))
    finally:
        torch.set_num_threads(before)


class RayLensWorker(LensWorker):
    """A ``LensWorker`` as a Ray actor, ending with the Ray node that started it (``corpus.ray.RayWorker``)."""

    def __init__(self, settings, threads=None):
        from ..corpus.ray import _end_with_parent

        _end_with_parent()
        super().__init__(settings, threads)


def ray_runner(address: str, workers: int | None = None) -> Runner:
    """The census's Ray runner with lens workers: ``address`` local or HOST:PORT."""
    from ..corpus import ray

    return ray.runner(address, workers, worker=RayLensWorker, decode=LensSums.from_plain)


@dataclass(frozen=True)
class Fitted:
    """A finished fit: the lens, where it was written, the shards and how many were reused."""

    lens: Lens
    out: Path
    shards: int
    resumed: int
    manifest: dict


def fit_lens(corpus: Corpus, out: str | os.PathLike, settings: LensSettings, *, runner: Runner = run_in_process,
             progress: Callable[[Progress], None] | None = None,
             notice: Callable[[str], None] | None = None) -> Fitted:
    """Fit (or resume) the Jacobian lens of ``settings.model`` over ``corpus`` into folder ``out``: shards kept in
    out/shards, the lens in out/lens.pt, what was done in out/manifest.json. ``CorpusError`` in one line for a
    folder that holds anything else, a write that fails, or a corpus of no prompt long enough."""
    layers, d = settings.layers, settings.model_plan.facts.d_model
    resolve_device(settings.model_plan.config.device)  # a device that cannot run is refused before DIR is made
    run_key = key(settings, corpus)
    folder = RunFolder(out, run_key, what="Jacobian lens fit")
    size, n = settings.shard_size, len(corpus.passages)
    starts = range(0, n, size)

    def stored(i: int) -> LensSums:
        return load_sums(folder.path(i), layers, d, len(corpus.passages[starts[i]:starts[i] + size]))

    todo, damaged = [], []
    for i, start in enumerate(starts):
        if os.path.lexists(folder.path(i)):
            try:
                stored(i)
                continue
            except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
                damaged.append(f"{folder.path(i).name} ({type(exc).__name__})")
                folder.discard(i)
        todo.append((i, start, corpus.passages[start:start + size]))
    if damaged and notice is not None:
        notice(f"{len(damaged)} stored shard(s) could not be read and are computed again: {', '.join(damaged[:3])}")
    on_shard = ShardKeeper(folder, save_sums, n, n - sum(len(p) for _, _, p in todo), progress)

    if todo:
        runner(settings, todo, on_shard)
    totals = LensSums()
    for i in range(len(starts)):
        try:
            totals.add(stored(i))
        except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
            raise CorpusError(f"{folder.path(i)} cannot be read ({type(exc).__name__}); run the same command again "
                              f"to compute it again") from None
    if totals.prompts == 0:
        raise CorpusError(f"no passage of the corpus has more than {settings.skip_first_positions + 1} tokens: "
                          f"nothing to fit (lower --skip-first, or give longer passages)")
    lens = Lens({layer: torch.from_numpy(totals.sums[layer] / totals.prompts).float() for layer in layers},
                totals.prompts, d, _metadata(settings, corpus, totals))
    manifest = {"model": settings.model, "corpus": corpus.path, "format": corpus.format, "field": corpus.field,
                "passages": n, "prompts": totals.prompts, "skipped_short": totals.skipped, "tokens": totals.tokens,
                "shards": len(starts), "shards_resumed": len(starts) - len(todo), "shards_damaged": len(damaged),
                "seconds": round(time.perf_counter() - on_shard.began, 3), "lens": LENS_FILE, "run": run_key}
    try:
        lens.save(folder.out / f"{LENS_FILE}.part")
        os.replace(folder.out / f"{LENS_FILE}.part", folder.out / LENS_FILE)
        disk.write_atomic(folder.out / "manifest.json", json.dumps(manifest, indent=1).encode())
    except OSError as exc:
        raise CorpusError(f"cannot write the lens to {folder.out}: {exc.strerror or exc}; the shards are kept: run "
                          f"the same command again to write it") from None
    return Fitted(lens, folder.out, len(starts), len(starts) - len(todo), manifest)


def _metadata(settings: LensSettings, corpus: Corpus, totals: LensSums) -> dict:
    """TransformerLens' fit provenance keys (those a fit of ours means the same by) and ours under ``attn_gui``."""
    p = settings.model_plan
    return {"estimator": "jacobian_lens", "corpus": corpus.path, "n_prompts": totals.prompts,
            "target_layer": p.facts.layers - 1, "dim_batch": settings.dim_batch,
            "max_seq_len": settings.max_seq_len, "skip_first_positions": settings.skip_first_positions,
            "fit_dtype": settings.dtype, "hook_convention": "blocks.{layer}.hook_out",
            "attn_gui": {**identity(p), "corpus_sha256": corpus.fingerprint(), "shards": -(-len(corpus.passages)
                                                                                          // settings.shard_size)}}

"""A census's outputs: heads.parquet, examples.parquet and manifest.json, written whole and read back."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from ...base import disk
from .read import passage_limit, read_passage, CorpusError, Corpus, arrow, json_or_none
from .shards import Settings, ShardSums


OUTPUTS = ("heads.parquet", "examples.parquet")  # the manifest, written last, holds their sizes and SHA-256


def write_outputs(out: Path, corpus: Corpus, settings: Settings, totals: ShardSums, means: dict[str, np.ndarray],
                  manifest: dict) -> None:
    """heads.parquet, examples.parquet and manifest.json, each written whole or not at all."""
    pa = arrow()
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
    """heads.parquet of a census folder as {column: (L, h) array} (layer and head from 1 as written).

    ``CorpusError`` in one line for a table that is not a census's: no layer or head column, a statistic that
    is not numbers, or rows that are not every (layer, head) once."""
    pa = arrow()
    table = pa.parquet.read_table(Path(out) / "heads.parquet")
    bad = next((n for n in table.column_names if not pa.types.is_integer(table.column(n).type)
                and not pa.types.is_floating(table.column(n).type)), None)
    if "layer" not in table.column_names or "head" not in table.column_names or bad is not None:
        raise CorpusError(f"{out}: heads.parquet is not a census's table (" + (
            f"its column {bad!r:.40} holds {table.column(bad).type}, not numbers)" if bad is not None
            else "no layer or head column)"))
    layers, heads = table.column("layer").to_numpy(), table.column("head").to_numpy()
    L, h = (int(layers.max()), int(heads.max())) if table.num_rows else (0, 0)
    if L * h != table.num_rows or L < 1 or h < 1 or not np.array_equal(
            (layers - 1) * h + (heads - 1), np.arange(table.num_rows)):
        raise CorpusError(f"{out}: heads.parquet is not a census's table (its rows are not each layer's heads "
                          f"once, in order)")
    return {name: np.asarray(table.column(name).to_numpy()).reshape(L, h) for name in table.column_names}


def read_examples(out: str | os.PathLike) -> list[dict]:
    """examples.parquet of a census folder as one dict per row (layer, head, passage, query, key from 1)."""
    return arrow().parquet.read_table(Path(out) / "examples.parquet").to_pylist()


def read_manifest(out: str | os.PathLike) -> dict:
    """manifest.json of a finished census, whose outputs are those it names (their sizes and SHA-256);
    ``CorpusError`` for a folder that holds no finished census, or one whose outputs changed since."""
    manifest = json_or_none(Path(out) / "manifest.json")
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

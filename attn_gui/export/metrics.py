"""``head_metrics.csv``: one row per layer and head, a column per metric (see ``engine.analysis.metrics``). No Qt."""

from __future__ import annotations

import os
from pathlib import Path

from ..engine import AttentionResult
from ..present.insight import metrics_table
from .files import ExportError, atomic_write

METRICS_FILE = "head_metrics.csv"


def write_head_metrics(result: AttentionResult, folder: str | os.PathLike) -> Path:
    """Write the head metrics of ``result`` to ``folder/head_metrics.csv`` and return its path.

    A header names the columns: layer (empty with random weights) and head, both counted
    from 1 (as ``weights_head<i>.csv`` and the window), then each metric.
    """
    path = Path(folder) / METRICS_FILE
    table = metrics_table(result)
    if table is None:  # a streamed result with random weights keeps its weights pooled only: ``result.full()``
        raise ExportError("the head metrics need the whole result; nothing was written")
    atomic_write(path, table.csv().encode("ascii"))
    return path

"""``head_metrics.csv``: one row per layer and head, a column per metric (see ``engine.analysis.metrics``). No Qt."""

from __future__ import annotations

import os
from pathlib import Path

from ..engine import AttentionResult
from ..present.insight import metrics_table
from .files import atomic_write

METRICS_FILE = "head_metrics.csv"


def write_head_metrics(result: AttentionResult, folder: str | os.PathLike) -> Path:
    """Write the head metrics of ``result`` to ``folder/head_metrics.csv`` and return its path.

    A header names the columns: layer (empty with random weights) and head, both counted
    from 1 (as ``weights_head<i>.csv`` and the window), then each metric.
    """
    path = Path(folder) / METRICS_FILE
    atomic_write(path, metrics_table(result).csv().encode("ascii"))
    return path

"""Exports carry head_metrics.csv: a header, one row per head, values that read back."""

import csv

import pytest

from attn_gui.engine import AttentionConfig, compute
from attn_gui.export.arrays import array_files, write_arrays


def test_head_metrics_csv_is_written_with_the_arrays(tmp_path):
    result = compute(AttentionConfig(heads=3, sentence="one two three four"))
    written = write_arrays(result, tmp_path, ["csv"])
    assert [p.name for p in written] == array_files(result, ["csv"])
    assert written[-1].name == "head_metrics.csv"
    rows = list(csv.DictReader((tmp_path / "head_metrics.csv").read_text().splitlines()))
    assert [r["head"] for r in rows] == ["1", "2", "3"] and all(r["layer"] == "" for r in rows)  # from 1
    alpha = result.weights
    for h, row in enumerate(rows):  # the weight on the previous token, by hand: rows 2..4
        by_hand = sum(float(alpha[h, i, i - 1]) for i in range(1, 4)) / 3
        assert float(row["previous"]) == pytest.approx(by_hand, rel=1e-6)
        assert float(row["max_weight"]) == pytest.approx(float(alpha[h].max(-1).values.mean()), rel=1e-6)
    assert "head_metrics.csv" not in array_files(result, ["npy"])

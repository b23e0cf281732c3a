"""The saturation note: when at least half the rows of alpha are one-hot, say so in plain words.

Computed once per frame (``present.frame.make_frame``); the alpha map's title, the status
bar and the Why-scaling panel all read the same note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..engine import AttentionResult, causal_visible, saturation
from ..engine.analysis.scaling import ONE_HOT, Saturation, finite_span
from .formats import nice_ceil


def visible_keys(result: AttentionResult) -> torch.Tensor | None:
    """The visible keys of the shown layer's alpha: the causal mask, or None (every key)."""
    if not result.resolved.causal:
        return None
    return causal_visible(result.seq_len, result.device)


def streamed_saturation(result: AttentionResult) -> Saturation:
    """``saturation`` of a streamed result, from each row's largest alpha kept while streaming."""
    pooled = result.pooled
    assert pooled is not None and pooled.row_max is not None  # streamed by attend
    row_max = pooled.row_max  # (h, T)
    counted = torch.ones_like(row_max, dtype=torch.bool)
    if result.resolved.causal or result.key_len == 1:
        counted[:, 0 if result.key_len > 1 else slice(None)] = False  # rows that see one key: one-hot anyway
    one_hot = (row_max >= ONE_HOT) & counted
    rows = int(counted.sum())
    return Saturation(float(one_hot.sum()) / rows if rows else 0.0, rows, finite_span(pooled.maps["scaled"]))


@dataclass(frozen=True)
class SaturationNote:
    """The plain-words warning that alpha is nearly one-hot, and the one-click fix.

    Attributes
    ----------
    text : str
        For the status bar and the Why-scaling panel.
    short : str
        For the alpha map's title.
    fix : dict
        The config change that keeps the softmax soft (for ``window.edit_config``).
    fix_label : str
        What the fix button says.
    """

    text: str
    short: str
    fix: dict[str, Any]
    fix_label: str


def saturation_note(result: AttentionResult) -> SaturationNote | None:
    """A note when at least half the rows of the shown alpha are one-hot (max >= 0.99), else None.

    A streamed result (a long input) has each row's largest alpha and the pooled ω′, whose
    extremes are the full ω′'s, so the note reads the same as for the full tensors.
    """
    if result.scaled is None and not result.streamed:  # a model read through transformers: no ω′ captured
        return None
    if result.streamed:
        sat = streamed_saturation(result)
    else:
        assert result.weights is not None  # kept in full when not streamed
        sat = saturation(result.weights, result.scaled, visible_keys(result))
    if not sat.saturated:
        return None
    cfg = result.config
    span = f"{sat.span:.3g}" if sat.span < 1000 else f"{sat.span:,.0f}"
    fix: dict[str, Any] = {}
    words = []
    if not cfg.scale:
        fix["scale"], words = True, ["divide by √d_k"]
    if cfg.model is None and cfg.projections and cfg.drawn_init == "uniform":  # scaling alone cannot undo its mean
        fix["init"] = "scaled_normal"
        words.append("scaled-normal weights")
    if not fix:
        fix["temperature"] = min(100.0, nice_ceil(cfg.temperature * sat.span / 4))
        words.append(f"temperature {fix['temperature']:g}")
    label = "Fix: " + ", ".join(words)
    share = f"{sat.one_hot:.0%}"
    text = (f"{share} of α rows are one-hot (max ≥ 0.99): the scores ω′ span ±{span}, so the softmax acts "
            f"as an argmax; scaling by √d_k, a higher temperature or scaled-normal weights keep it soft.")
    short = f"⚠ {share} of rows one-hot: ω′ spans ±{span}"
    return SaturationNote(text, short, fix, label)

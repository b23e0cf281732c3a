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

    The fix reads the plan: scaling on where this compute turned it off; for a model whose own forward does not
    scale (GPT-2's ``scale_attn_weights`` off), which no switch changes, a temperature of √d_k, labelled a
    what-if, as is any higher temperature of a model.
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
    cfg, planned = result.config, result.resolved
    span = f"{sat.span:.3g}" if sat.span < 1000 else f"{sat.span:,.0f}"
    share = f"{sat.one_hot:.0%}"
    text = (f"{share} of α rows are one-hot (max ≥ 0.99): the scores ω′ span ±{span}, so the softmax acts "
            f"as an argmax; ")
    short = f"⚠ {share} of rows one-hot: ω′ spans ±{span}"
    shown = planned.shown  # the shown layer as this compute ran it (the model's own options and the what-ifs)
    if not shown.scale and planned.spec is not None and not planned.own[planned.layer].scale:
        return _unscaled_model_note(result, sat.span, text, short)
    fix: dict[str, Any] = {}
    words = []
    if not shown.scale:  # scaling turned off (random weights, or a model's what-if): on again
        fix["scale"], words = True, ["divide by √d_k"]
    if cfg.model is None and cfg.projections and cfg.drawn_init == "uniform":  # scaling alone cannot undo its mean
        fix["init"] = "scaled_normal"
        words.append("scaled-normal weights")
    if not fix:
        fix["temperature"] = min(100.0, nice_ceil(cfg.temperature * sat.span / 4))
        words.append(f"temperature {fix['temperature']:g}")
    # a model's higher temperature is not its own computation: the button says so
    label = ("What-if: " if planned.spec is not None and "temperature" in fix else "Fix: ") + ", ".join(words)
    text += "scaling by √d_k, a higher temperature or scaled-normal weights keep it soft."
    return SaturationNote(text, short, fix, label)


def _unscaled_model_note(result: AttentionResult, span: float, text: str, short: str) -> SaturationNote:
    """The note of a model whose own forward does not divide its scores by √d_k (GPT-2's ``scale_attn_weights``
    off): no switch brings √d_k back, but a temperature of √d_k divides the scores as a scaled model would, a
    what-if of its computation; once the temperature is that high, a higher one."""
    cfg, planned = result.config, result.resolved
    assert planned.spec is not None  # a model's note
    scaled, d_k = planned.shown.replace(scale=True), planned.dims.d_k
    root = round(scaled.root(d_k), 4)
    text += f"{planned.spec.label.split(' (')[0]} itself does not divide its scores by √d_k (its own computation); "
    if cfg.temperature < root:
        fix = {"temperature": min(100.0, root)}
        label = f"What-if: temperature {fix['temperature']:g} (÷ {scaled.root_text(d_k)})"
        text += f"a temperature of {fix['temperature']:g} divides them as a scaled model would, a what-if."
    else:
        fix = {"temperature": min(100.0, nice_ceil(cfg.temperature * span / 4))}
        label = f"What-if: temperature {fix['temperature']:g}"
        text += "a higher temperature keeps the softmax soft, a what-if."
    return SaturationNote(text, short, fix, label)

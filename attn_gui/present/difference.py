"""Difference maps: what a change does, as current minus pinned, head minus head, layer minus layer.

Differences are taken on the compute device at full size and reduced there (each shown
cell keeps its block's value of largest magnitude), so only what the screen shows
reaches the host. Every difference is signed: a diverging scale centred on 0.
"""

from __future__ import annotations

import numpy as np
import torch

from ..engine import FIELDS, OPTIONS, AttentionConfig, AttentionResult, format_heads
from ..engine.kernel.reduce import reduce_matrix
from .frame import DISPLAY_MAX, Frame
from .insight import as_map
from .maps import MapData


def _reduced(diff: torch.Tensor, max_side: int = DISPLAY_MAX) -> np.ndarray:
    return reduce_matrix(diff, max_side, max_side, "signed").detach().cpu().numpy()


def comparable_fields(current: AttentionResult, pinned: AttentionResult) -> list[str]:
    """The fields both results have with the same shape, in data-flow order."""
    if current.seq_len != pinned.seq_len:
        return []
    return [n for n in current.fields()  # a long input's streamed fields are kept only pooled: none to subtract
            if getattr(current, n, None) is not None and getattr(pinned, n, None) is not None
            and getattr(pinned, n).shape == getattr(current, n).shape]


def config_changes(pinned: AttentionConfig, current: AttentionConfig, limit: int = 4) -> str:
    """The pinned config named by what differs from the current one: 'seed 123, temperature 1'."""
    parts = []
    for name, opt in OPTIONS.items():
        old = getattr(pinned, name)
        if old == getattr(current, name):
            continue
        if name == "sentence":
            parts.append(f"“{old if len(old) <= 32 else old[:31] + '…'}”")
        elif opt.kind == "bool":
            parts.append(f"{opt.label} {'on' if old else 'off'}")
        elif opt.kind in ("choice", "model"):
            parts.append(f"{opt.label} {dict(opt.choices).get(old, old)}")
        elif opt.kind == "heads":
            parts.append(f"{opt.label} {format_heads(old) or 'none'}")
        else:
            shown = "none" if old is None else format(old, "g") if isinstance(old, float) else old
            parts.append(f"{opt.label} {shown}")
    if not parts:
        return "the same config"
    return ", ".join(parts[:limit]) + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


def _per_head_text(result: AttentionResult, name: str, head: int | None) -> str:
    if head is None or not FIELDS[name].per_head or result.heads <= 1:
        return ""
    return f", head {head + 1}/{result.heads}"


def pinned_difference(current: Frame, pinned: Frame, name: str, head: int | None = None,
                      hidden: tuple[int, ...] = ()) -> MapData:
    """Field ``name`` of ``current`` minus the same field of ``pinned`` (same shape), as a signed map."""
    cur, pin = current.result, pinned.result
    a = getattr(cur, name)
    b = getattr(pin, name).to(device=a.device, dtype=a.dtype)
    info = FIELDS[name]
    head = head if info.per_head else None
    R, C = a.shape[-2:]
    title = (f"Δ{info.symbol} = now − pinned  ({R} × {C}{_per_head_text(cur, name, head)}); "
             f"pinned: {config_changes(pin.config, cur.config)}")
    return as_map(current, name, _reduced(a - b), head, hidden, title=title, kind="signed",
                  symbol=f"Δ{info.symbol}", field=f"{name}_minus_pinned")


def head_difference(frame: Frame, name: str, head_a: int, head_b: int, hidden: tuple[int, ...] = ()) -> MapData:
    """Head ``head_a`` minus head ``head_b`` (0-based) of per-head field ``name``."""
    result, info = frame.result, FIELDS[name]
    t = getattr(result, name)
    R, C = t.shape[-2:]
    layer = f"layer {result.config.layer + 1}: " if result.config.model is not None else ""
    title = f"{layer}{info.symbol} of head {head_a + 1} − head {head_b + 1}  ({R} × {C})"
    a, b = result.head_index(name, head_a), result.head_index(name, head_b)  # grouped-query K, V: their K/V heads
    return as_map(frame, name, _reduced(t[a] - t[b])[None], 0, hidden, title=title, kind="signed",
                  symbol=f"Δ{info.symbol}", head=None, field=f"{name}_head{head_a + 1}_minus_head{head_b + 1}")


def layer_difference(frame: Frame, layer_a: int, layer_b: int, head: int, hidden: tuple[int, ...] = ()) -> MapData:
    """alpha of layer ``layer_a`` minus layer ``layer_b`` (0-based), head ``head``, of a model-mode frame.

    The title and file name count layers and heads from 1.
    """
    result = frame.result
    lw = result.layer_weights
    if lw is None:
        raise ValueError("a layer difference needs every layer's weights: a model-mode frame")
    T = result.seq_len
    title = f"α of layer {layer_a + 1} − layer {layer_b + 1}, head {head + 1}/{result.heads}  ({T} × {T})"
    return as_map(frame, "weights", _reduced(lw[layer_a, head] - lw[layer_b, head])[None], 0, hidden,
                  title=title, kind="signed", symbol="Δα", head=None,
                  field=f"weights_layer{layer_a + 1}_minus_layer{layer_b + 1}_head{head + 1}",
                  masked=None)  # two other layers: the shown layer's mask is neither's


def per_head_fields(result: AttentionResult) -> list[str]:
    """The per-head fields of ``result`` (those a head − head difference exists for); a long
    input's streamed T x T fields are kept only pooled, and a difference of pooled maps is not
    the pooled difference, so they are left out."""
    return [n for n in result.fields() if FIELDS[n].per_head and getattr(result, n) is not None]


# What a shift of the whole sentence does, per kind of positions (see ``shift_note``).
SHIFT_WHY = {
    "rope": "RoPE turns q_i and k_j by angles of their positions, so q_i · k_j depends on i − j only: "
            "Q and K change, ω, α and the output do not (beyond rounding)",
    "alibi": "ALiBi adds −m (i − j) to the scores: nothing depends on where the sentence starts",
    "sinusoidal": "sinusoidal positions are added to X, so X, Q, K, V, the scores and α all change",
    "none": "without positions nothing depends on where the sentence starts",
}


def shift_note(pinned: AttentionConfig, current: AttentionConfig, data: MapData) -> str | None:
    """The note under a now − pinned map when the two differ by ``position_offset`` alone, else None.

    It names the shift, the largest difference in ``data`` and why it is (or is not) zero.
    """
    if pinned.position_offset == current.position_offset or \
            pinned.replace(position_offset=current.position_offset) != current:
        return None
    finite = np.abs(data.matrix[np.isfinite(data.matrix)])
    largest = float(finite.max()) if finite.size else 0.0
    return (f"The sentence moved from position {pinned.position_offset} to {current.position_offset}: "
            f"the largest |{data.symbol}| is {largest:.3g}. {SHIFT_WHY[current.positional]}.")

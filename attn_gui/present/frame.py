"""A frame: one computed request with its fields reduced for the screen and copied to the host."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine import AttentionResult
from ..engine.kernel.reduce import reduce_matrix
from .heads import sink_mass
from .saturation import SaturationNote, saturation_note

DISPLAY_MAX = 384  # cells per side sent to the screen: at least the pixels a map has here
THUMB_MAX = 48  # cells per side of each head in the model view


@dataclass(frozen=True)
class Frame:
    """One computed request: its id, the result, and the host arrays to draw.

    Attributes
    ----------
    request_id : int
    result : AttentionResult (tensors stay on the compute device; streamed past DISPLAY_MAX tokens)
    arrays : field name -> numpy array, each matrix reduced to at most DISPLAY_MAX per side
    saturation : the note when alpha is nearly one-hot (see ``present.saturation``), else None
    """

    request_id: int
    result: AttentionResult
    arrays: dict[str, np.ndarray]
    saturation: SaturationNote | None = None


def make_frame(request_id: int, result: AttentionResult, max_side: int = DISPLAY_MAX) -> Frame:
    """Reduce every field on its device, then copy only the reduced arrays to the host.

    A streamed result's T x T fields arrive reduced already (computed for ``max_side``).
    """
    arrays = {name: result.display(name, max_side, max_side) for name in result.fields()}
    every = result.layer_weights if result.layer_weights is not None else (
        result.summaries.maps if result.summaries is not None else None)  # streamed: each layer's alpha, pooled
    if every is not None:  # the model view: every layer's and head's alpha, small
        arrays["layer_weights"] = reduce_matrix(every, THUMB_MAX, THUMB_MAX, "weights").cpu().numpy()
    if result.summaries is not None:  # (L, h) each, from the whole maps (engine.kernel.summaries)
        arrays["sink_mass"] = result.summaries.sink.cpu().numpy()
        arrays["mean_distance"] = result.summaries.distance.cpu().numpy()
    elif result.layer_weights is not None:
        arrays["sink_mass"] = sink_mass(result.layer_weights).cpu().numpy()
    return Frame(request_id, result, arrays, saturation_note(result))


def held_text(result: AttentionResult) -> str:
    """What the result holds of X and α, for the status bar: "X 5×16, alpha 2×5×5", or, streamed,
    "X 1,500×576, alpha 9×384×384 pooled from 1,500×1,500" (only the pooled α is kept)."""
    T, T_k = result.seq_len, result.key_len
    x = f"X {T:,}×{result.config.dims.d_model}"
    if result.shown is None:
        return f"{x}, alpha {result.heads}×{T:,}×{T_k:,}"
    h, rows, cols = result.shown["weights"].shape
    return f"{x}, alpha {h}×{rows:,}×{cols:,} pooled from {T:,}×{T_k:,}"

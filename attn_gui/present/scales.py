"""Colour scales: which numbers a map's colours span, and what its title says about it.

Attention weights are drawn on the fixed 0 to 1 scale by default, so maps of different
sizes compare at a glance. With T in the hundreds every weight is near 1/T and that scale
shows a uniform block; the automatic scale then spans 0 to the map's max and says so.
A person can choose per map: fixed 0 to 1, 0 to the map's max, or each row to its own max
(a query's strongest key is always the brightest colour, whatever the row's spread).
Signed maps (scores, Q, K, V, ...) are centred on 0: the map's largest magnitude, or each
row's. RoPE's angles are never negative: 0 to the map's max, or each row's. Only the colours
change: cell values and read-outs stay the real numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formats import nice_ceil

FAINT_ALPHA = 0.1  # alpha whose largest shown weight is below this is drawn on 0 to its max, and says so

# mode -> what the map's menu calls it
SCALES: dict[str, str] = {
    "auto": "Automatic",
    "fixed": "Fixed 0 to 1",
    "max": "0 to the map's max",
    "row": "Each row to its own max",
}
WEIGHT_SCALES = ("auto", "fixed", "max", "row")
SIGNED_SCALES = ("auto", "row")  # centred on 0: the map's largest |value| (auto) or each row's


def scale_choices(kind: str) -> tuple[str, ...]:
    """The scale modes a map of ``kind`` ("weights", "signed" or "angle") offers."""
    return WEIGHT_SCALES if kind == "weights" else SIGNED_SCALES  # an angle's: 0 to the map's max, or each row's


@dataclass(frozen=True)
class ColourScale:
    """How one map is coloured.

    Attributes
    ----------
    image : (R, C) array the colours are looked up from (non-finite cells replaced; in the
        per-row mode each row divided by its own largest value or magnitude)
    levels : (low, high) of the colour map, in ``image``'s units
    note : a line for the title saying which scale is used, or "" for the default one
    per_row : the colour bar reads fractions of each row's max, not values
    """

    image: np.ndarray
    levels: tuple[float, float]
    note: str = ""
    per_row: bool = False

    def ticks(self, n: int) -> list[tuple[float, str]]:
        """``n`` evenly spaced colour-bar ticks (value, label), labels at most 6 characters."""
        lo, hi = self.levels
        values = np.linspace(lo, hi, n)
        if self.per_row:
            return [(float(v), {1.0: "max", -1.0: "-max", 0.0: "0"}.get(float(v), f"{v:.2g}")) for v in values]
        return [(float(v), _short(float(v))) for v in values]


def _short(v: float) -> str:
    """A tick label: ``v`` as written, or to two significant digits when that is long ("0.011")."""
    text = f"{v:g}"
    return text if len(text.lstrip("-")) <= 6 else f"{v:.2g}"


def colour_scale(matrix: np.ndarray, kind: str, mode: str = "auto", keys: int | None = None,
                 faint: bool = True) -> ColourScale:
    """The colour scale of ``matrix`` (R, C) for a map of ``kind`` in scale ``mode``.

    Parameters
    ----------
    matrix : (R, C) array, may hold -inf (masked scores) or nan
    kind : "weights" (0 to 1), "signed" (centred on 0) or "angle" (0 to the map's max: never negative)
    mode : one of ``scale_choices(kind)``; another mode counts as "auto"
    keys : the number of keys (T), for the title's "mean α = 1/T"; default C
    faint : the automatic scale of faint weights may span 0 to their max (thumbnails keep 0 to 1)
    """
    m = np.asarray(matrix)
    finite = np.isfinite(m)
    if mode not in scale_choices(kind):
        mode = "auto"
    if mode == "row":
        image, levels = _per_row(m, finite, signed=kind == "signed")
        where = "± its largest |value|" if kind == "signed" else "0 to its max"
        return ColourScale(image, levels, f"colour: each row {where}", per_row=True)
    note = ""
    if kind == "weights":
        top = float(np.max(m[finite])) if finite.any() else 1.0
        levels = (0.0, 1.0)
        if mode == "max" or mode == "auto" and faint and top < FAINT_ALPHA:
            levels = (0.0, nice_ceil(top))
            note = f"colour scale 0 to max ({levels[1]:g})"
            if mode == "auto":  # a long input: every weight is near 1/T on the 0-1 scale
                note = f"mean α = 1/T = {1 / (keys or m.shape[1]):.2g}; " + note
    elif kind == "angle":
        top = float(np.max(m[finite])) if finite.any() else 0.0
        levels = (0.0, nice_ceil(top) if top > 0 else 1.0)
    else:
        big = float(np.max(np.abs(m[finite]))) if finite.any() else 1.0
        top = nice_ceil(big)
        levels = (-top, top)
    image = m if finite.all() else np.where(finite, m, 0.0 if kind == "signed" else levels[0])
    return ColourScale(image, levels, note)


def _per_row(m: np.ndarray, finite: np.ndarray, signed: bool) -> tuple[np.ndarray, tuple[float, float]]:
    """``m`` with each row divided by its largest finite value (magnitude when ``signed``);
    non-finite cells 0 (the mask hatching shows them), all-zero rows stay 0."""
    values = np.where(finite, np.abs(m) if signed else m, 0.0)
    top = values.max(axis=1, keepdims=True) if m.size else values
    safe = np.where(top > 0, top, 1.0)
    image = np.where(finite, m, 0.0) / safe
    return image.astype(m.dtype if m.dtype.kind == "f" else np.float32), ((-1.0, 1.0) if signed else (0.0, 1.0))

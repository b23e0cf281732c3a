"""How numbers are written in cells, read-outs and colour-bar ends."""

from __future__ import annotations

import functools
import math

import numpy as np

NICE_STEPS = (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def format_value(v: float) -> str:
    """Compact cell text: 3 significant figures, -inf and NaN spelled out."""
    if math.isnan(v):  # math, not numpy: this runs once per cell per update
        return "NaN"
    if math.isinf(v):
        return "-∞" if v < 0 else "∞"
    a = abs(v)
    if a >= 1000:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def format_compact(v: float) -> str:
    """Shorter cell text for narrow cells: 2 significant figures, no leading zero."""
    if not math.isfinite(v) or abs(v) >= 100:
        return format_value(v)
    if abs(v) >= 9.95:
        return f"{v:.0f}"
    text = f"{v:.1f}"
    if text in ("0.0", "-0.0"):
        return "0"
    return text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text


CELL_FORMATS = (format_value, format_compact)  # tried in order until the widest value fits a cell


def cell_formats(top: float) -> tuple:
    """The cell formats for a map whose largest magnitude is ``top``, tried in order until the widest fits.

    Past 1 they are ``CELL_FORMATS``. Below, each prints the digits the scale needs: the full one two significant
    digits of ``top`` (at least two decimals: 0.041, 0.0043), the compact one one (.04, -.004); a map of
    values about ±0.04 (ω′ of ModernBERT and Phi-3) read "0" in every cell.
    """
    if not math.isfinite(top) or top >= 1 or top <= 0:
        return CELL_FORMATS
    magnitude = math.floor(math.log10(top))  # 0.04: -2
    return _decimals(max(2, 1 - magnitude), compact=False), _decimals(max(1, -magnitude), compact=True)


@functools.lru_cache(maxsize=32)  # one function per precision: cells cache their texts by format
def _decimals(places: int, compact: bool):
    def fmt(v: float) -> str:
        if not math.isfinite(v):
            return format_value(v)
        text = f"{v:.{places}f}"
        if not compact:
            return text
        if float(text) == 0:
            return "0"
        return text.replace("0.", ".", 1) if text.startswith(("0.", "-0.")) else text
    return fmt


def nice_ceil(x: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 times a power of ten that is >= x.

    Colour bars end on round numbers, and small changes of the data do not move them.
    """
    if not np.isfinite(x) or x <= 0:
        return 1.0
    power = 10.0 ** np.floor(np.log10(x))
    for step in NICE_STEPS:
        if step * power >= x * (1 - 1e-9):
            return float(step * power)
    return float(10 * power)


def visible_label(label: str, max_chars: int = 14) -> str:
    """Make a whitespace token visible on an axis and keep a long token short."""
    if label == " ":
        return "␣"
    return label if len(label) <= max_chars else label[: max_chars - 1] + "…"


def time_left(elapsed: float, done: int, total: int) -> str:
    """At ``elapsed`` seconds for ``done`` of ``total`` steps, the rest at the same pace: "about 3 min 20 s left"."""
    if done >= total:
        return "done"
    if done <= 0:
        return "time left after the first step"
    minutes, seconds = divmod(max(1, round(elapsed / done * (total - done))), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"about {hours} h {minutes} min left"
    return f"about {minutes} min {seconds} s left" if minutes else f"about {seconds} s left"

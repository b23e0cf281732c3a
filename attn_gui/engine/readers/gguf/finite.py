"""The block scales of a quantized GGUF, checked finite once, as the file is first opened.

A NaN or an infinity in one block's float16 scale (``d``, or ``dmin`` where the type has one) makes
every weight of that block, and through them every α and logit of the model, NaN: nothing downstream
could say why. ``first_non_finite`` reads the scales only (2 bytes of every 18 to 210), vectorised,
a tensor at a time from the mapped file, and the 1-D float32 and float16 tensors (norm gains, biases)
whole; it names the first tensor and block that holds one. ``load`` runs it when it builds the cache
(once per file: the cache is keyed by the file's size and modification time).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .format import Header

# the byte offsets of each block's float16 scales (ggml's block_* structs: ggml-common.h): d, and dmin where the
# type has one; a type not named here (IQ1_M's scales are packed) is not checked
SCALES = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q5_1": (0, 2), "Q8_0": (0,), "Q2_K": (80, 82),
          "Q3_K": (108,), "Q4_K": (0, 2), "Q5_K": (0, 2), "Q6_K": (208,), "IQ4_NL": (0,), "IQ4_XS": (0,),
          "IQ2_XXS": (0,), "IQ2_XS": (0,), "IQ2_S": (0,), "IQ3_XXS": (0,), "IQ3_S": (0,), "IQ1_S": (0,)}
FLOATS = {0: np.float32, 1: np.float16}  # 1-D tensors of these ggml types are read whole (they are small)


def first_non_finite(header: Header) -> str | None:
    """Where the first NaN or infinite block scale (or 1-D float value) of ``header``'s file is, in words; None
    where there is none."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    data = np.memmap(header.path, np.uint8, mode="r")
    for t in header.tensors.values():
        if t.nbytes is None or t.start + t.nbytes > data.size:
            continue  # the header's own checks refuse a truncated file
        raw = data[t.start:t.start + t.nbytes]
        if len(t.shape) == 1 and t.kind in FLOATS:
            bad = np.flatnonzero(~np.isfinite(raw.view(FLOATS[t.kind])))
            if bad.size:
                return f"tensor {t.name} holds {_value(raw.view(FLOATS[t.kind])[bad[0]])} at index {bad[0]:,}"
            continue
        try:
            kind = GGMLQuantizationType(t.kind)
        except ValueError:
            continue
        if kind.name not in SCALES:
            continue
        size = GGML_QUANT_SIZES[kind][1]
        blocks = raw[:len(raw) - len(raw) % size].reshape(-1, size)
        for at in SCALES[kind.name]:
            scales = np.ascontiguousarray(blocks[:, at:at + 2]).view(np.float16).ravel()
            bad = np.flatnonzero(~np.isfinite(scales))
            if bad.size:
                which = "scale" if at == SCALES[kind.name][0] else "minimum's scale"
                return (f"tensor {t.name} ({kind.name}) has {_value(scales[bad[0]])} as the {which} of block "
                        f"{bad[0]:,} of {len(scales):,}")
    return None


def _value(x) -> str:
    return "NaN" if np.isnan(x) else ("inf" if x > 0 else "-inf")


def check_finite(path: Path, header: Header) -> None:
    """``ConfigError`` in one line where a block scale of the file is not finite (``first_non_finite``)."""
    from ...base.errors import ConfigError

    where = first_non_finite(header)
    if where is not None:
        raise ConfigError(f"{path.name} is damaged: {where}; every α of the model would be NaN (nothing was "
                          f"loaded)")

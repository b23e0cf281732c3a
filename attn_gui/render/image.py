"""An ImageItem that colours a matrix through a colour table made once per colour map."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtGui

_TABLES: dict[bytes, list[int]] = {}  # a lookup table's bytes -> its QImage colour table


def _colour_table(lut: np.ndarray) -> list[int]:
    key = lut.tobytes() + bytes(lut.shape[1:])
    table = _TABLES.get(key)
    if table is None:
        rgb = lut.tolist()
        table = [QtGui.qRgba(*c) for c in rgb] if lut.shape[1] == 4 else [QtGui.qRgb(*c[:3]) for c in rgb]
        _TABLES[key] = table
    return table


class LutImage(pg.ImageItem):
    """A ``pg.ImageItem`` whose ``image`` holds the matrix shown, coloured by its lookup table.

    pyqtgraph turns a float image with a lookup table into an 8-bit indexed QImage, and
    builds the 256-entry colour table again on every render, one Python call per entry.
    Here the table is built once per colour map and the indices are one numpy expression,
    the same ones pyqtgraph computes (``floor((x - lo) * n / (hi - lo))``, clipped to the
    table). Anything else (NaNs, no table, colour images) renders as pyqtgraph does.
    """

    def render(self):
        image, lut, levels = self.image, self.lut, self.levels
        plain = (image is not None and image.ndim == 2 and image.size and image.dtype.kind == "f"
                 and isinstance(lut, np.ndarray) and lut.dtype == np.uint8 and lut.ndim == 2
                 and 0 < len(lut) <= 256 and levels is not None and np.ndim(levels) == 1
                 and not self.autoDownsample and self.axisOrder == "row-major")
        if not plain or not np.isfinite(image).all():
            return super().render()
        lo, hi = float(levels[0]), float(levels[1])
        n = len(lut)
        scale = n / (hi - lo) if hi != lo else 0.0
        R, C = image.shape
        index = np.zeros((R, C + (-C) % 4), dtype=np.uint8)  # C order, rows padded to 4 bytes as QImage's are
        # numpy keeps a transposed (column-major) input's layout; writing into ``index`` fixes the order
        index[:, :C] = np.clip((image - lo) * scale, 0, n - 1)
        qimage = QtGui.QImage(index.data, C, R, index.strides[0], QtGui.QImage.Format.Format_Indexed8)
        qimage = qimage.copy()  # owns its pixels: a QImage over numpy memory must not outlive it
        qimage.setColorTable(_colour_table(lut))
        self.qimage = qimage
        self._renderRequired = False
        self._unrenderable = False

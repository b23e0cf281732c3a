"""Seed 004's "why scaling", drawn: one query's softmax with and without 1/sqrt(d_k), and entropy against d_k."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import EntropySweep
from ..present.formats import visible_label
from ..present.insight import QuerySoftmax

SCALED = QtGui.QColor(31, 119, 180)  # blue: divided by sqrt(d_k)
UNSCALED = QtGui.QColor(214, 39, 40)  # red: raw scores
MARK = QtGui.QColor(255, 140, 0)


class ScalingPlot(pg.GraphicsLayoutWidget):
    """Two plots side by side: the selected query's alpha both ways, and mean normalised entropy vs d_k."""

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent=parent)
        self.setObjectName("scalingPlot")
        self.setMinimumSize(300, 130)
        self.legend = self.addLabel(
            f"<span style='color:{SCALED.name()}'>■ ÷ √d_k</span> &nbsp; "
            f"<span style='color:{UNSCALED.name()}'>■ no scaling</span> &nbsp; "
            f"<span style='color:{SCALED.name()}'>– – ÷ √d_k with scaled-normal W</span> &nbsp; "
            f"<span style='color:{MARK.name()}'>★ now</span>", row=0, col=0, colspan=2, size="9pt")
        self.bars = self.addPlot(row=1, col=0)
        self.curve = self.addPlot(row=1, col=1)
        for plot in (self.bars, self.curve):
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setMouseEnabled(x=False, y=False)
            plot.showGrid(y=True, alpha=0.2)
        self.bars.setYRange(0, 1, padding=0.02)
        self.bars.setLabel("left", "α")
        self.scaled_bars = pg.BarGraphItem(x=[], height=[], width=0.4, brush=SCALED, pen=None, name="÷ √d_k")
        self.unscaled_bars = pg.BarGraphItem(x=[], height=[], width=0.4, brush=UNSCALED, pen=None,
                                             name="no scaling")
        self.bars.addItem(self.scaled_bars)
        self.bars.addItem(self.unscaled_bars)
        self.curve.setLogMode(x=True, y=False)
        self.curve.setYRange(-0.04, 1.04, padding=0)
        self.curve.setLabel("bottom", "d_k")
        self.curve.setLabel("left", "mean entropy / ln(keys)")
        self.scaled_line = self.curve.plot([], [], pen=pg.mkPen(SCALED, width=2), symbol="o", symbolSize=5,
                                           symbolBrush=SCALED, symbolPen=None, name="÷ √d_k")
        self.unscaled_line = self.curve.plot([], [], pen=pg.mkPen(UNSCALED, width=2), symbol="o", symbolSize=5,
                                             symbolBrush=UNSCALED, symbolPen=None, name="no scaling")
        dashed = pg.mkPen(SCALED, width=1.5, style=QtCore.Qt.PenStyle.DashLine)
        self.reference_line = self.curve.plot([], [], pen=dashed,
                                              name="÷ √d_k, scaled-normal W")
        self.marker = pg.ScatterPlotItem(size=14, symbol="star", brush=MARK, pen=pg.mkPen("k"))
        self.curve.addItem(self.marker)
        self.note = pg.TextItem("", color="k", anchor=(0, 0))
        self.curve.addItem(self.note)

    def set_query(self, q: QuerySoftmax, head: int) -> None:
        """The bars of query ``q`` (head ``head``, 0-based)."""
        x = np.arange(len(q.keys), dtype=float)
        self.scaled_bars.setOpts(x=x - 0.2, height=q.scaled)
        self.unscaled_bars.setOpts(x=x + 0.2, height=q.unscaled)
        step = max(1, int(np.ceil(len(q.keys) / 24)))
        self.bars.getAxis("bottom").setTicks([[(i, visible_label(q.keys[i], 8)) for i in range(0, len(q.keys), step)]])
        self.bars.setXRange(-0.6, len(q.keys) - 0.4, padding=0)
        divisor = q.divisor or f"√{q.d_k}"
        cap = (lambda x: f"{q.softcap:g}·tanh({x} / {q.softcap:g})") if q.softcap is not None else (lambda x: x)
        self.bars.setTitle(f"α of “{visible_label(q.query)}”, head {head + 1}: "
                           f"softmax({cap(f'ω / {divisor}')}) vs softmax({cap('ω')})", size="9pt")

    def set_sweep(self, sweep: EntropySweep | None, d_k: int, scale: bool, current: float | None,
                  message: str = "", reference: EntropySweep | None = None) -> None:
        """The two curves of ``sweep``, a star at the current config (d_k, its entropy), and
        optionally the scaled curve of ``reference`` (the same config with scaled-normal weights)."""
        if sweep is None:
            self.scaled_line.setData([], [])
            self.unscaled_line.setData([], [])
        else:
            self.scaled_line.setData(sweep.d_ks, sweep.scaled)
            self.unscaled_line.setData(sweep.d_ks, sweep.unscaled)
        if reference is None:
            self.reference_line.setData([], [])
        else:
            self.reference_line.setData(reference.d_ks, reference.scaled)
        d_ks = sweep.d_ks if sweep is not None else (d_k,)
        self.curve.getAxis("bottom").setTicks([[(np.log10(v), str(v)) for v in d_ks
                                                 if v == d_k or (v & (v - 1)) == 0 and v not in (2, 8, 32, 128)]])
        self.curve.setXRange(np.log10(min(d_ks)) - 0.1, np.log10(max(d_ks)) + 0.1, padding=0)
        self.marker.setData([np.log10(d_k)] if current is not None else [],
                            [current] if current is not None else [])
        self.note.setText(message)
        self.note.setPos(np.log10(max(1, d_k)) if sweep is None else 0, 0.98)
        way = "÷ √d_k" if scale else "no scaling"
        self.curve.setTitle(f"Entropy of α against d_k (★ = now: d_k {d_k}, {way})", size="9pt")

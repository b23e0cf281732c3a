"""The cover over the maps while a newer input is computed: the old maps greyed, what is computed, how far.

A long input (1,500 words into SmolLM2) takes tens of seconds. Until its frame comes the maps show the
previous text: the cover greys them at once and says so, with a bar counted in the model's layers
(``engine.base.progress``) and the way to stop (Esc, or its Stop button).
"""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets


class StaleCover(QtWidgets.QFrame):
    """A translucent cover over ``host`` (the canvas) with a message, a progress bar and Stop.

    Signals
    -------
    stopRequested()
        Stop was clicked.
    """

    stopRequested = QtCore.Signal()

    def __init__(self, host: QtWidgets.QWidget):
        super().__init__(host)
        self.setObjectName("staleCover")
        self.setAutoFillBackground(False)
        self.setAttribute(QtCore.Qt.WidgetAttribute.WA_StyledBackground, True)
        self.setStyleSheet("#staleCover { background: rgba(235, 235, 240, 185); }"
                           "#staleBox { background: white; border: 1px solid #99a; border-radius: 6px; }")
        box = QtWidgets.QFrame(self)
        box.setObjectName("staleBox")
        self.label = QtWidgets.QLabel()
        self.label.setObjectName("staleLabel")
        self.label.setWordWrap(True)
        self.label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        font = self.label.font()
        font.setPointSizeF(font.pointSizeF() * 1.15)
        self.label.setFont(font)
        self.bar = QtWidgets.QProgressBar()
        self.bar.setObjectName("staleBar")
        self.bar.setRange(0, 0)  # busy until the first layer is counted
        self.bar.setMinimumWidth(320)
        self.stopButton = QtWidgets.QPushButton("Stop (Esc)")
        self.stopButton.setObjectName("staleStopButton")
        self.stopButton.setToolTip("Stop computing: the maps keep the previous result")
        self.stopButton.clicked.connect(self.stopRequested)
        inner = QtWidgets.QVBoxLayout(box)
        inner.setContentsMargins(18, 12, 18, 12)
        inner.addWidget(self.label)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.bar, 1)
        row.addWidget(self.stopButton)
        inner.addLayout(row)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addStretch(1)
        middle = QtWidgets.QHBoxLayout()
        middle.addStretch(1)
        middle.addWidget(box, 0)
        middle.addStretch(1)
        layout.addLayout(middle)
        layout.addStretch(2)  # a little above the middle: above the fold of a short view
        box.setMaximumWidth(560)
        self.what = ""
        self.hide()
        host.installEventFilter(self)

    def cover(self, what: str, previous: bool) -> None:
        """Grey the maps and say ``what`` is computed ("computing T = 1,730 tokens with SmolLM2-135M");
        ``previous``: the maps show an older result (else there is none yet)."""
        self.what = what
        self.bar.setRange(0, 0)
        self.bar.setFormat("")
        after = ("the maps show the previous result until it is done" if previous
                 else "the maps appear when it is done")
        self.label.setText(f"<b>{what}…</b><br>{after}")
        self.setGeometry(self.parentWidget().rect())
        self.raise_()
        self.show()

    def set_progress(self, done: int, total: int, unit: str = "layer") -> None:
        """``done`` of ``total`` ``unit``s (a model's layers)."""
        if total <= 0:
            return
        self.bar.setRange(0, total)
        self.bar.setValue(done)
        self.bar.setFormat(f"{unit} {min(done + 1, total)} of {total}" if done < total else f"{total} {unit}s done")

    @property
    def covering(self) -> bool:
        return self.isVisible()

    def uncover(self) -> None:
        self.hide()

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.Resize and watched is self.parentWidget():
            self.setGeometry(self.parentWidget().rect())
        return False

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # the style sheet's translucent grey
        option = QtWidgets.QStyleOption()
        option.initFrom(self)
        painter = QtGui.QPainter(self)
        self.style().drawPrimitive(QtWidgets.QStyle.PrimitiveElement.PE_Widget, option, painter, self)

"""A decoder's extras under the sentence: its top next tokens as bars, and the Generate control."""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

TOP = 5
MAX_STEPS = 64  # per click; each step is a new frame


class DecoderPanel(QtWidgets.QWidget):
    """The model's most likely next tokens with their probabilities, and Generate / Stop.

    Signals
    -------
    generateRequested(int)
        Generate was clicked: append this many tokens, one step (and one frame) at a time.
    stopRequested()
        Stop was clicked during a generation.
    """

    generateRequested = QtCore.Signal(int)
    stopRequested = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("decoderPanel")
        layout = QtWidgets.QGridLayout(self)
        layout.setContentsMargins(0, 4, 0, 0)
        layout.setHorizontalSpacing(6)
        layout.setVerticalSpacing(2)
        self.title = title = QtWidgets.QLabel()
        title.setObjectName("nextTokensTitle")
        title.setWordWrap(True)
        title.setStyleSheet("color:#445;")
        self.set_quantised(True)
        layout.addWidget(title, 0, 0, 1, 3)
        self.tokenLabels: list[QtWidgets.QLabel] = []
        self.bars: list[QtWidgets.QProgressBar] = []
        for i in range(TOP):
            label = QtWidgets.QLabel()
            label.setObjectName(f"nextToken{i}")
            label.setStyleSheet("font-family: monospace; background:#e8eefc; color:#1a2b4c; padding: 0 3px;")
            bar = QtWidgets.QProgressBar()
            bar.setObjectName(f"nextTokenBar{i}")
            bar.setRange(0, 1000)
            bar.setTextVisible(True)
            bar.setMaximumHeight(16)
            bar.setMinimumWidth(40)
            layout.addWidget(label, i + 1, 0)
            layout.addWidget(bar, i + 1, 1, 1, 2)
            self.tokenLabels.append(label)
            self.bars.append(bar)
        layout.setColumnStretch(1, 1)
        self.stepsSpin = QtWidgets.QSpinBox()
        self.stepsSpin.setObjectName("generateStepsSpin")
        self.stepsSpin.setRange(1, MAX_STEPS)
        self.stepsSpin.setValue(1)
        self.stepsSpin.setPrefix("× ")
        self.stepsSpin.setToolTip(f"how many tokens one click appends (1 to {MAX_STEPS}), one frame each")
        self.generateButton = QtWidgets.QPushButton("Generate")
        self.generateButton.setObjectName("generateButton")
        self.generateButton.setToolTip("Append the most likely next token to the sentence (greedy), "
                                       "one step at a time; click again to stop")
        self.generateButton.clicked.connect(self._on_click)
        self.stepsSpin.setMaximumWidth(80)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.generateButton, 1)
        row.addWidget(self.stepsSpin)
        layout.addLayout(row, TOP + 1, 0, 1, 3)
        self.running = False
        self.pairs: tuple[tuple[str, float], ...] = ()
        # never squeezed: five bars and Generate, whole, however tall the sentence box above wants to be
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(self.sizeHint().height())

    def set_quantised(self, quantised: bool) -> None:
        """Name the 4-bit weights in the title (the bundled SmolLM2), or not (a model folder's own weights)."""
        note = " <span style='color:#8a5a00;'>(its weights are 4-bit approximations)</span>" if quantised else ""
        self.title.setText(f"next token, the model's top 5{note}")
        self.title.setToolTip("softmax of the model's logits at the last position, highest first"
                              + ("; the weights are the 4-bit (Q4_1) file's, close to but not equal to the "
                                 "published model's" if quantised else ""))

    def show_next_tokens(self, pairs: tuple[tuple[str, float], ...] | None, pending: bool = False) -> None:
        """Show ``pairs`` (token text, probability), highest first; None hides the panel (an encoder).
        ``pending``: a decoder's first maps are shown, its next tokens come with the rest of its run (said so,
        no bar drawn)."""
        self.setVisible(pairs is not None or pending)
        self.pairs = tuple(pairs or ())
        for i, (label, bar) in enumerate(zip(self.tokenLabels, self.bars, strict=True)):
            token, p = self.pairs[i] if i < len(self.pairs) else ("", 0.0)
            label.setText(token)
            label.setToolTip(f"{token!r}: p = {p:.6f}" if not pending else "")
            bar.setValue(round(p * 1000))
            bar.setFormat("computing the rest of the run…" if pending and i == 0 else "" if pending else f"{p:.1%}")

    def set_stale(self, stale: bool) -> None:
        """Grey the next tokens while a newer text is computed: they are the previous text's."""
        for widget in (*self.tokenLabels, *self.bars):
            widget.setEnabled(not stale)

    def set_running(self, running: bool, done: int = 0, total: int = 0) -> None:
        """Show whether a generation runs (the button stops it then) and how far it is."""
        self.running = running
        self.generateButton.setText(f"Stop ({done}/{total})" if running else "Generate")
        self.stepsSpin.setEnabled(not running)

    def _on_click(self) -> None:
        if self.running:
            self.stopRequested.emit()
        else:
            self.generateRequested.emit(self.stepsSpin.value())

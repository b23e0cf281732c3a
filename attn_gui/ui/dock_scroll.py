"""A dock's scroll area: its panel as wide as the dock and as tall as the dock, or as its least height.

Qt's ``widgetResizable`` gives a panel whose layout holds a word-wrapped label its *preferred* height for the
width: the KV cache's panel was 660 px tall in a 250 px dock, and a button disabled during Prefill passed the
focus on, which scrolled the dock to its bottom, the buttons out of sight. Here the panel is as tall as the dock
shows, taller only where its minimum needs it (then the dock scrolls).
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets


GRID_ROW = 17  # a layer x head grid's row height in a dock: every layer labelled, a value in every cell
GRID_MARGIN = 110  # its title, head labels and margins


def grid_height(layers: int) -> int:
    """The least height of a dock's layer x head grid of ``layers`` rows, each labelled (the dock scrolls)."""
    return layers * GRID_ROW + GRID_MARGIN


class DockScroll(QtWidgets.QScrollArea):
    """Scrolls ``panel`` only where the dock is smaller than the panel's least size."""

    def __init__(self, panel: QtWidgets.QWidget, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.setWidget(panel)
        self.setWidgetResizable(False)
        self.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        panel.installEventFilter(self)

    def least(self, width: int) -> QtCore.QSize:
        """The panel's least size at ``width``: its minimum, the height of its wrapped labels counted."""
        panel = self.widget()
        hint = panel.minimumSizeHint().expandedTo(panel.minimumSize())
        layout = panel.layout()
        width = max(width, hint.width())
        height = hint.height()
        if layout is not None and layout.hasHeightForWidth():
            height = max(height, layout.totalMinimumHeightForWidth(width))
        return QtCore.QSize(width, height)

    def fit(self) -> None:
        panel = self.widget()
        if panel is None:
            return
        bar = self.verticalScrollBar().sizeHint().width()
        view = self.maximumViewportSize()  # the viewport without scroll bars
        least = self.least(view.width())
        if least.height() > view.height():  # it scrolls: the vertical bar takes its width
            least = self.least(view.width() - bar)
        size = least.expandedTo(QtCore.QSize(least.width(), view.height())).boundedTo(panel.maximumSize())
        if panel.size() != size:
            panel.resize(size)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.fit()

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if watched is self.widget() and event.type() == QtCore.QEvent.Type.LayoutRequest:
            QtCore.QTimer.singleShot(0, self, self.fit)  # after the layout has its new minimum
        return False

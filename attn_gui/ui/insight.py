"""The insight docks: head metrics, difference maps, rollout, why scaling.

``InsightDocks`` holds the four panels and knows nothing of the window, as every dock does
(docs/architecture.md, "How a dock talks to the window"): the window makes a dock for each
panel (``panels``, then ``attach``), puts ``fixButton`` in its status bar, connects its
``stateChanged`` to ``follow`` and its ``frameShown`` to ``show_frame``, and connects
``editRequested`` and ``headPicked`` to ``edit_config`` and its own head picking. A dock computes
only while it is in sight; the saturation note comes with each frame (``Frame.saturation``).
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ..present.frame import Frame
from ..present.maps import special_tokens
from ..present.saturation import SaturationNote
from ..present.state import ViewState
from .difference_panel import DifferencePanel
from .insight_panels import MetricsPanel, RolloutPanel
from .scaling_panel import ScalingPanel
from .sight import in_sight


class InsightDocks(QtCore.QObject):
    """The four insight panels, following the window's view state and frames.

    Attributes
    ----------
    metrics, difference, rollout, scaling : the panels
    docks : dict of str to QDockWidget
        Each panel's dock, by key (``attach``).
    fixButton : QPushButton
        The saturation note's one-click fix, for the window's status bar.
    note : SaturationNote or None
        The saturation note of the frame shown now.

    Signals
    -------
    editRequested(dict)
        A config change: the saturation note's fix, or the sentence shifted one position on.
    headPicked(object, int)
        A head was clicked in the metrics grid: its layer (None with random weights) and head, 0-based.
    """

    editRequested = QtCore.Signal(dict)
    headPicked = QtCore.Signal(object, int)

    def __init__(self, parent: QtCore.QObject | None = None):
        super().__init__(parent)
        self.state = ViewState()  # the window's, as followed
        self.frame: Frame | None = None  # the frame the window shows
        self.note: SaturationNote | None = None
        self.metrics = MetricsPanel()
        self.difference = DifferencePanel()
        self.rollout = RolloutPanel()
        self.scaling = ScalingPanel()
        self.docks: dict[str, QtWidgets.QDockWidget] = {}
        self.fixButton = QtWidgets.QPushButton()
        self.fixButton.setObjectName("saturationFixButton")
        self.fixButton.hide()
        self.fixButton.clicked.connect(self.apply_fix)
        self.metrics.headPicked.connect(self.headPicked)
        self.scaling.fixRequested.connect(self.editRequested)
        self.difference.shiftRequested.connect(self.shift_positions)

    def panels(self) -> tuple[tuple[str, str, QtWidgets.QWidget], ...]:
        """(key, dock title, panel) of each panel, in the View menu's order."""
        return (("metrics", "Head metrics", self.metrics), ("difference", "Difference maps", self.difference),
                ("rollout", "Attention rollout", self.rollout), ("scaling", "Why scaling", self.scaling))

    def attach(self, key: str, dock: QtWidgets.QDockWidget) -> None:
        """``dock`` holds panel ``key``: the panel computes when the dock comes into sight."""
        self.docks[key] = dock
        dock.visibilityChanged.connect(lambda visible: visible and self.refresh(key))

    # following the window ----------------------------------------------------------------------

    def show_frame(self, frame: Frame) -> None:
        """The window shows ``frame``: the fix button and every dock in sight follow."""
        self.frame = frame
        self.note = frame.saturation
        self.fixButton.setVisible(self.note is not None)
        if self.note is not None:
            self.fixButton.setText(self.note.fix_label)
            self.fixButton.setToolTip(self.note.text)
        self.refresh()

    def follow(self, state: ViewState) -> None:
        """The window's view state changed (its head, token, hidden tokens...)."""
        self.state = state
        if self.frame is not None:
            QtCore.QTimer.singleShot(0, self.refresh)  # after the window has drawn the new state

    def refresh(self, key: str | None = None) -> None:
        """Show the frame in every dock in sight (or in dock ``key``)."""
        frame, state = self.frame, self.state
        if frame is None:
            return
        hidden = special_tokens(frame.result) if state.hide_special else ()
        for name, dock in self.docks.items():
            if key not in (None, name) or (key is None and not in_sight(dock)):
                continue  # a dock out of sight computes when it comes into sight
            if name == "metrics":
                self.metrics.show_frame(frame, state)
            elif name == "difference":
                self.difference.show_frame(frame, state, hidden)
            elif name == "rollout":
                self.rollout.show_frame(frame, state, hidden)
            else:
                self.scaling.show_frame(frame, state, self.note)

    # requests to the window ---------------------------------------------------------------------

    def apply_fix(self) -> None:
        """The saturation note's one-click fix, as a config edit."""
        if self.note is not None:
            self.editRequested.emit(dict(self.note.fix))

    def shift_positions(self) -> None:
        """Pin the result shown now and move the sentence one position on: the difference dock then shows
        what depends on absolute positions (sinusoidal) and what on i − j only (RoPE, ALiBi)."""
        self.difference.pin()
        self.difference.show_field("scores")
        self.editRequested.emit({"position_offset": self.state.config.position_offset + 1})
        if "difference" in self.docks:
            self.docks["difference"].show()
            self.docks["difference"].raise_()

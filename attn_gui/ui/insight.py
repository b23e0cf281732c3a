"""The insight docks on the window: head metrics, difference maps, rollout, why scaling.

``InsightDocks(window)`` adds the docks and follows the window: it listens to
``frameShown`` and ``stateChanged`` and asks for changes only through the window's
``select_head``, ``set_state`` and ``edit_config``. A dock computes only while it is
in sight; the saturation note comes with each frame (``Frame.saturation``).
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from ..present.frame import Frame
from ..present.saturation import SaturationNote
from .difference_panel import DifferencePanel
from .insight_panels import MetricsPanel, RolloutPanel
from .scaling_panel import ScalingPanel
from .sight import in_sight


class InsightDocks(QtCore.QObject):
    """The four insight docks of ``window`` (a ``ui.MainWindow``), their toggles in its ``view_menu``.

    Attributes
    ----------
    metrics, difference, rollout, scaling : the panels
    note : SaturationNote or None
        The saturation note of the frame shown now.
    """

    def __init__(self, window: QtWidgets.QMainWindow, view_menu: QtWidgets.QMenu):
        super().__init__(window)
        self.window = window
        self.note: SaturationNote | None = None
        self.metrics = MetricsPanel()
        self.difference = DifferencePanel()
        self.rollout = RolloutPanel()
        self.scaling = ScalingPanel()
        self.docks: dict[str, QtWidgets.QDockWidget] = {}
        for key, title, panel in (
                ("metrics", "Head metrics", self.metrics),
                ("difference", "Difference maps", self.difference),
                ("rollout", "Attention rollout", self.rollout),
                ("scaling", "Why scaling", self.scaling)):
            dock = window.add_dock(title, f"{key}Dock", panel)
            dock.visibilityChanged.connect(lambda visible, key=key: visible and self.refresh(key))
            self.docks[key] = dock
        window.focusDock.raise_()
        view_menu.addSeparator()
        for dock in self.docks.values():
            view_menu.addAction(dock.toggleViewAction())

        self.fixButton = QtWidgets.QPushButton()
        self.fixButton.setObjectName("saturationFixButton")
        self.fixButton.hide()
        self.fixButton.clicked.connect(self.apply_fix)
        window.statusBar().addPermanentWidget(self.fixButton)
        self.metrics.headPicked.connect(self._on_head_picked)
        self.scaling.fixRequested.connect(window.edit_config)
        self.difference.shiftRequested.connect(self.shift_positions)
        window.frameShown.connect(self._on_frame)
        window.stateChanged.connect(self._on_state)

    # following the window ----------------------------------------------------------------------

    def _on_frame(self, frame: Frame) -> None:
        self.note = frame.saturation
        self.fixButton.setVisible(self.note is not None)
        if self.note is not None:
            self.fixButton.setText(self.note.fix_label)
            self.fixButton.setToolTip(self.note.text)
            label = self.window.statusLabel
            label.setText(f"⚠ {self.note.text}  ·  {label.text()}")
        self.refresh()

    def _on_state(self, _state) -> None:
        if self.window.frame is not None:
            QtCore.QTimer.singleShot(0, self.refresh)  # after the window has drawn the new state

    def refresh(self, key: str | None = None) -> None:
        """Show the window's frame in every dock in sight (or in dock ``key``)."""
        win = self.window
        frame, state = win.frame, win.state
        if frame is None:
            return
        hidden = win.hidden_tokens()
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
            self.window.edit_config(dict(self.note.fix))

    def shift_positions(self) -> None:
        """Pin the result shown now and move the sentence one position on: the difference dock then shows
        what depends on absolute positions (sinusoidal) and what on i − j only (RoPE, ALiBi)."""
        win = self.window
        self.difference.pin()
        self.difference.show_field("scores")
        if win.edit_config({"position_offset": win.state.config.position_offset + 1}):
            self.docks["difference"].show()
            self.docks["difference"].raise_()

    def _on_head_picked(self, layer: int | None, head: int) -> None:
        win = self.window
        if layer is None or layer == win.state.config.layer:
            win.select_head(head)
        else:  # the new layer's frame shows this head
            win.set_state(win.state.with_config(layer=layer).replace(head=head))

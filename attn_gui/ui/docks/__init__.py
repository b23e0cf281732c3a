"""The docks below the maps: one panel per dock, built from the dock table (``present.docks.DOCK_ROWS``).

Every panel follows one protocol (``Dock``): the window hands it its view state (``follow``) and the frame
it shows (``show_frame``), as the panel's row says, and stops its thread on close (``shutdown``). A panel
asks for changes with signals (``editRequested``, ``stateRequested``, ``headPicked``) and knows nothing of
the window (an import-linter contract says so). ``FACTORIES`` maps each row's name to its panel, as
napari's ``layer_to_controls`` maps a layer type to its controls; ``host.DockHost`` makes the docks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6 import QtWidgets

from ...present.frame import Frame
from ...present.state import ViewState
from ...render.model_view import ModelView
from ..settings import Settings


class Dock(Protocol):
    """What the window calls on every panel (the request signals are the panel's own, where it has them)."""

    def follow(self, state: ViewState) -> None: ...
    def show_frame(self, frame: Frame, state: ViewState) -> None: ...
    def shutdown(self) -> None: ...


class DockPanel:
    """The protocol's defaults, for a panel that follows less than all of it (a mixin before the Qt class)."""

    def follow(self, state: ViewState) -> None:
        """The window's view state changed (while the dock is in sight, or it came into sight)."""

    def behind(self, state: ViewState) -> None:
        """The window's view state changed while the dock is out of sight (it computes nothing then)."""

    def show_frame(self, frame: Frame, state: ViewState) -> None:
        """The window shows ``frame`` with ``state``."""

    def shutdown(self) -> None:
        """Stop the panel's thread, if it has one (the window closes)."""


def _factories() -> dict[str, Callable[[Settings], QtWidgets.QWidget]]:
    from .circuit import CircuitPanel
    from .corpus import CorpusPanel
    from .difference import DifferencePanel
    from .interventions import InterventionsPanel
    from .kv_cache import KVCachePanel
    from .lessons import LessonsPanel
    from .metrics import MetricsPanel
    from .rollout import RolloutPanel
    from .scaling import ScalingPanel
    from .train import TrainPanel
    from .walk import TokenFocus
    from .why import WhyPanel

    return {"walk": lambda _: TokenFocus(), "model-view": lambda _: ModelView(), "kv-cache": lambda _: KVCachePanel(),
            "interventions": lambda _: InterventionsPanel(), "why": lambda _: WhyPanel(),
            "circuit": lambda _: CircuitPanel(), "train": lambda _: TrainPanel(), "corpus": lambda _: CorpusPanel(),
            "metrics": lambda _: MetricsPanel(), "difference": lambda _: DifferencePanel(),
            "rollout": lambda _: RolloutPanel(), "why-scaling": lambda _: ScalingPanel(), "lessons": LessonsPanel}


# each row's name -> its panel, made with the window's settings (napari's layer_to_controls)
FACTORIES: dict[str, Callable[[Settings], QtWidgets.QWidget]] = _factories()

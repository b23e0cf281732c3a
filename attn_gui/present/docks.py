"""The dock table: one row per dock below the maps (no Qt: the CLI's ``--dock`` and the tests read it).

The window builds every dock from these rows (``ui.docks.host.DockHost``): the dock itself, its View-menu
entry, its ``--dock`` choice, ``show_dock``'s entry, what it follows and its shutdown. A new dock is one row
here, one entry of ``ui.docks.FACTORIES`` and its module in ``ui/docks/``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DockRow:
    """One dock, as the window makes it.

    Attributes
    ----------
    name : str
        The ``--dock`` choice ("circuit") and the key of ``ui.docks.FACTORIES``.
    title : str
        The dock's title and its View-menu entry's text.
    object_name : str
        The QDockWidget's object name: the saved window state and the tests find it by it.
    follows : frozenset of str
        What the window hands its panel: "state" (``follow(state)``), "frame" (``show_frame(frame, state)``);
        empty for the views the window draws itself with the maps (the walk, the model view).
    sight : bool
        Whether the panel follows only while it is in sight (it computes: a tab behind another waits until it
        is shown); False for a panel that follows every state and frame (Lessons).
    needs : str
        The capability of the model's plan the dock needs (a ``Plan.can`` field: "intervene"), "" for none.
    view_menu : str
        Where its entry is in the View menu (it brings the dock in front): "docks" (at the top), "insight"
        (after the view actions), or "" for none.
    lazy : bool
        Made on first use (Lessons), not when the window opens.
    worker : bool
        Its panel runs a thread: shut down when the window closes.
    """

    name: str
    title: str
    object_name: str
    follows: frozenset[str] = frozenset()
    sight: bool = True
    needs: str = ""
    view_menu: str = "docks"
    lazy: bool = False
    worker: bool = False


_STATE, _FRAME = frozenset({"state"}), frozenset({"frame"})

# in the order the window makes them (their tabs' order) and the View menu lists them
DOCK_ROWS: tuple[DockRow, ...] = (
    DockRow("walk", "Follow one token", "tokenFocusDock"),
    DockRow("model-view", "Model view", "modelViewDock"),
    DockRow("kv-cache", "KV cache (decoding)", "kvCacheDock", _STATE, needs="generate", worker=True),
    DockRow("interventions", "Interventions", "interventionsDock", _STATE, needs="intervene", worker=True),
    DockRow("why", "Why", "whyDock", _STATE, needs="attribute", worker=True),
    DockRow("circuit", "Circuit", "circuitDock", _STATE, needs="attribute", worker=True),
    DockRow("train", "Train", "trainDock", worker=True),
    DockRow("corpus", "Corpus", "corpusDock"),
    DockRow("metrics", "Head metrics", "metricsDock", _FRAME, view_menu="insight"),
    DockRow("difference", "Difference maps", "differenceDock", _FRAME, view_menu="insight"),
    DockRow("rollout", "Attention rollout", "rolloutDock", _FRAME, view_menu="insight"),
    DockRow("why-scaling", "Why scaling", "scalingDock", _FRAME, view_menu="insight"),
    DockRow("lessons", "Lessons", "lessonsDock", _STATE | _FRAME, sight=False, lazy=True),
)

ROWS: dict[str, DockRow] = {row.name: row for row in DOCK_ROWS}

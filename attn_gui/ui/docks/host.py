"""The window's docks, built from the dock table: ``DockHost``.

For each row of ``present.docks.DOCK_ROWS`` the host makes the panel (``FACTORIES``) and its QDockWidget, keeps
it following the window's state and frames while in sight, brings it in front (``show_dock``, ``--dock``), gives
it room when it comes in front, and shuts its thread down when the window closes. The window's menus put each
row's entry in View (``view_actions``): it brings the dock in front, never hides it (Qt's own toggle hid a dock
that was a tab behind another, and a second click brought it back still behind). A panel's requests
(``editRequested``, ``stateRequested``, ``headPicked``) reach the window through the ``Requests`` it hands the
host; the host does not import the window.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from ...present.docks import DOCK_ROWS, ROWS, DockRow
from ...present.frame import Frame
from ...present.state import ViewState
from ..dock_scroll import DockScroll
from ..settings import Settings
from ..sight import in_sight
from . import FACTORIES
from .scaling import SaturationFix

DOCK_OPEN_H = 250  # a dock brought in front is at least this tall: its main control in view at 1366 x 768
DOCK_MOST = 0.45  # ... and at most this share of the window's height, so that the maps keep theirs
Vertical = QtCore.Qt.Orientation.Vertical


@dataclass(frozen=True)
class Requests:
    """What the window does for its docks: the answers to their request signals."""

    state: Callable[[], ViewState]  # the state the window shows now
    frame: Callable[[], Frame | None]  # the frame it shows
    edit_config: Callable[[dict], Any]  # editRequested
    set_state: Callable[[ViewState], None]  # stateRequested (a lesson's state)
    head_picked: Callable[[Any, int], None]  # headPicked: (layer or None, head)
    open_example: Callable[..., None]  # the Corpus dock's example
    canvas: Any  # the maps (render.canvas.Canvas): a lesson's outlines (set_marks) and the cells clicked


class DockHost(QtCore.QObject):
    """Every dock of ``window`` (a QMainWindow), made from the rows; ``panels`` and ``docks`` by row name.

    ``asked`` is the dock the command line put in front (kept in front until the first frame is drawn,
    ``settle``); ``front`` the dock that came in front last (the room it gets, ``_give_room``).
    """

    def __init__(self, window: QtWidgets.QMainWindow, settings: Settings, requests: Requests):
        super().__init__(window)
        self.window, self.settings, self.requests = window, settings, requests
        self.panels: dict[str, Any] = {}
        self.docks: dict[str, QtWidgets.QDockWidget] = {}
        self.asked: QtWidgets.QDockWidget | None = None
        self.front: QtWidgets.QDockWidget | None = None
        self.settled = False  # the first frame is drawn (a lesson asked for before it stays in front)
        self.model_room = False  # whether the model view had its room since the window entered model mode
        self.fixButton = SaturationFix()  # the saturation note's fix, for the window's status bar
        self.fixButton.editRequested.connect(requests.edit_config)
        self.entries: dict[str, QtGui.QAction] = {}  # the View menu's entry of each row with one, made or not
        for row in DOCK_ROWS:
            if row.view_menu:
                entry = self.entries[row.name] = QtGui.QAction(row.title, self)
                entry.setObjectName(f"view-{row.name}")
                entry.setToolTip(f"Bring the {row.title} dock in front")
                entry.triggered.connect(lambda _=False, name=row.name: self.show_dock(name))
        for row in DOCK_ROWS:
            if not row.lazy:
                self.make(row)
        self.panels["why"].modelColours.connect(self.panels["model-view"].set_side)
        self.panels["circuit"].circuitDone.connect(self._give_circuit_room)
        self.docks["walk"].visibilityChanged.connect(self.panels["walk"].came_into_sight)
        self.docks["walk"].raise_()
        self.docks["model-view"].hide()

    def panel(self, name: str) -> Any:
        """Row ``name``'s panel (None for a lazy dock not made yet)."""
        return self.panels.get(name)

    def dock(self, name: str) -> QtWidgets.QDockWidget | None:
        """Row ``name``'s dock (None for a lazy dock not made yet)."""
        return self.docks.get(name)

    def view_actions(self, section: str) -> list[QtGui.QAction]:
        """The View menu's entries of the docks in ``section`` ("docks", "insight"), in the rows' order: each
        shows its dock and brings its tab in front (a lazy dock is made then)."""
        return [self.entries[r.name] for r in DOCK_ROWS if r.view_menu == section]

    # making a dock ------------------------------------------------------------------------------

    def make(self, row: DockRow) -> QtWidgets.QDockWidget:
        """Row ``row``'s panel and dock, below the maps as a tab beside the walk; its requests connected."""
        panel = self.panels[row.name] = FACTORIES[row.name](self.settings)
        dock = self.docks[row.name] = self.add_dock(row.title, row.object_name, panel)
        asks = self.requests
        slot: Callable[..., Any]
        for signal, slot in (("editRequested", asks.edit_config), ("stateRequested", asks.set_state),
                             ("headPicked", asks.head_picked)):
            if hasattr(panel, signal):
                getattr(panel, signal).connect(slot)
        named: dict[str, tuple[str, Callable[..., Any]]] = {
            "interventions": ("ablateRequested", lambda heads: asks.edit_config({"ablate": heads})),
            "train": ("openRequested", lambda folder, text: asks.edit_config({"model": folder, "sentence": text})),
            "corpus": ("exampleOpened", asks.open_example)}
        if row.name in named:  # the requests with arguments of their own: said here, by name
            signal, slot = named[row.name]
            getattr(panel, signal).connect(slot)
        if row.follows and row.sight:  # a dock out of sight computes nothing; it follows when it comes into sight
            dock.visibilityChanged.connect(lambda visible: self.refresh(row.name) if visible else None)
        return dock

    def add_dock(self, title: str, name: str, widget: QtWidgets.QWidget) -> QtWidgets.QDockWidget:
        """A dock below the maps, as a tab beside the walk: the maps keep the window's full width.

        Its widget scrolls inside it: no dock's minimum size (the KV cache's 230 px, the Train
        dock's curves) makes every bottom tab that tall and takes the maps' room.
        """
        win = self.window
        dock = QtWidgets.QDockWidget(title, win)
        dock.setObjectName(name)
        # closable and movable, never floated: a drag that missed the separator undocked it into a window
        dock.setFeatures(QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetMovable)
        # a tab shown behind another says it is visible for a moment: the room waits until it is in sight
        dock.visibilityChanged.connect(
            lambda visible: visible and QtCore.QTimer.singleShot(0, win, lambda: self._give_room(dock)))
        dock.setWidget(DockScroll(widget))
        win.addDockWidget(QtCore.Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        if name != ROWS["walk"].object_name:
            win.tabifyDockWidget(self.docks["walk"], dock)
        return dock

    def make_lazy(self, name: str) -> tuple[Any, bool]:
        """Row ``name``'s panel, made now if it was not yet (and whether it was made now)."""
        if name in self.panels:
            return self.panels[name], False
        self.make(ROWS[name])
        return self.panels[name], True

    # following the window ------------------------------------------------------------------------

    def follow(self, state: ViewState) -> None:
        """The window asked for a new state: the docks that compute from it follow while in sight (a dock out of
        sight follows when it comes into sight; it hears of the change through ``behind``)."""
        for row in DOCK_ROWS:
            panel, dock = self.panels.get(row.name), self.docks.get(row.name)
            if panel is None or dock is None or "state" not in row.follows or not row.sight:
                continue
            if in_sight(dock):
                panel.follow(state)
            else:
                panel.behind(state)

    def state_changed(self, state: ViewState) -> None:
        """The window's state changed (``stateChanged``: asked for, or fitted to a frame): the docks that follow
        out of sight follow; the frame docks in sight redraw after the window has drawn the state."""
        for row in DOCK_ROWS:
            if not row.sight and "state" in row.follows and row.name in self.panels:
                self.panels[row.name].follow(state)
        if self.requests.frame() is not None:
            QtCore.QTimer.singleShot(0, self.window, lambda: self.refresh())

    def show_frame(self, frame: Frame) -> None:
        """The window shows ``frame``: the fix button and every frame dock in sight (or following unseen) follow."""
        self.fixButton.show_frame(frame)
        self.refresh(unseen=True)

    def refresh(self, name: str | None = None, unseen: bool = False) -> None:
        """Hand the window's state and frame to dock ``name`` (None: every dock in sight that follows frames;
        ``unseen``: and those that follow out of sight)."""
        state, frame = self.requests.state(), self.requests.frame()
        for row in DOCK_ROWS:
            panel = self.panels.get(row.name)
            if panel is None or name not in (None, row.name):
                continue
            if name is None and (row.sight and not in_sight(self.docks[row.name])
                                 or not row.sight and not unseen):
                continue
            if "state" in row.follows and name is not None:
                panel.follow(state)
            if "frame" in row.follows and frame is not None:
                panel.show_frame(frame, state)

    def shutdown(self) -> None:
        """Stop every dock's thread (each waits for its task)."""
        for row in DOCK_ROWS:
            if row.worker and row.name in self.panels:
                self.panels[row.name].shutdown()

    # in front -------------------------------------------------------------------------------------

    def show_dock(self, name: str, keep: bool = False) -> QtWidgets.QDockWidget:
        """Bring dock ``name`` in front; with ``keep`` (the command line's ``--dock``) it stays in front when
        the first model frame comes (the model view would)."""
        if name == "lessons":
            self.open_lessons()
        dock = self.docks[name]
        dock.show()
        dock.raise_()
        if keep:
            self.asked = dock
        return dock

    def open_lessons(self, name: str | None = None, step: int | None = None) -> Any:
        """Show the Lessons dock (made on first use), at ``name`` and ``step`` or where the learner left off."""
        lessons, made = self.make_lazy("lessons")
        dock, canvas = self.docks["lessons"], self.requests.canvas
        if made:
            lessons.marksChanged.connect(canvas.set_marks)
            dock.visibilityChanged.connect(self._lessons_closed)
            canvas.cellClicked.connect(lessons.cell_clicked)  # a click on the question's row answers it
            lessons.follow(self.requests.state())
            frame = self.requests.frame()
            if frame is not None:
                lessons.show_frame(frame, self.requests.state())
        dock.show()
        dock.raise_()
        if not self.settled:  # asked for at the start (attn-gui lesson): no first frame puts another in front
            self.asked = dock
        note = lessons.resume(name, step)
        if note:
            self.window.statusBar().showMessage(f"⚠ {note}", 20000)
        return lessons

    def _lessons_closed(self, visible: bool) -> None:
        """Closed (not behind another tab, nor the window closing), the lesson leaves no outline on the maps."""
        dock = self.docks["lessons"]
        if not visible and self.window.isVisible() and dock.isHidden():
            self.requests.canvas.set_marks({})

    def settle(self) -> None:
        """The first frame is drawn: the docks are the person's from here on."""
        self.asked = None
        self.settled = True

    def show_model_dock(self, show: bool, result) -> None:
        """Entering model mode: the grid of every head, in front (behind the dock the command line
        asked for, or an open lesson, if any); leaving it: the walk comes back (or the lesson stays in front).

        A lesson open is a step in progress: Help → Lessons on a model computes the lesson's random weights,
        lesson 7's "Open in the explorer" a model, and either put the walk or the grid over the step's text."""
        asked, model, walk, win = self.asked, self.docks["model-view"], self.docks["walk"], self.window
        lesson = self.docks.get("lessons")
        lesson = lesson if lesson is not None and not lesson.isHidden() and asked is None else None
        if not show:  # the grid, opened by hand or by --dock, stays while the weights are random
            if asked is model or model.isHidden():
                return
            model.hide()
            if lesson is not None:
                lesson.raise_()
                return
            self.front = None  # the walk comes back as at the opening: its fifth, not a dock's room
            (asked or walk).raise_()
            win.resizeDocks([walk], [max(150, win.height() // 5)], Vertical)
            return
        self.model_room = False
        model.show()
        keep = asked or lesson
        if keep is not None and keep is not model:
            keep.raise_()
            return
        model.raise_()
        self._give_model_view_room(result)

    # room -----------------------------------------------------------------------------------------

    def draw_model_view(self, frame: Frame, state: ViewState, hidden: tuple[int, ...]) -> None:
        """The model view's grid: every layer's and head's alpha of ``frame`` (model mode), ``hidden`` tokens left
        out."""
        if "layer_weights" not in frame.arrays:
            return
        result, view = frame.result, self.panels["model-view"]
        # every layer ran with the plan's options (a what-if in all of them); the other layers' masks are drawn
        # causal where the run is causal (their windows are in their weights, 0 outside)
        scaled = frame.arrays.get("scaled")
        masked = np.isneginf(scaled).all(axis=0) if scaled is not None else None  # the same in every head
        t = frame.arrays["layer_weights"].shape[-1]
        model_mask = np.triu(np.ones((t, t), dtype=bool), 1) if result.resolved.causal else None
        view.set_weights(frame.arrays["layer_weights"], result.config.layer, state.head, hidden, result.seq_len,
                         masked, other_layers=model_mask, kv_heads=result.resolved.dims.kv_heads,
                         sink=frame.arrays.get("sink_mass"), distance=frame.arrays.get("mean_distance"))
        view.set_struck(result.config.ablate, allowed=result.resolved.can.intervene)

    def _give_circuit_room(self) -> None:
        """A circuit was found: its graph gets half the window's height if the dock has less (never shrunk)."""
        if self.panels["circuit"].found is not None and in_sight(self.docks["circuit"]):
            self._raise_height(self.docks["circuit"], max(300, self.window.height() // 2))

    def _give_room(self, dock: QtWidgets.QDockWidget) -> None:
        """A dock came in front: at least ``DOCK_OPEN_H`` tall (at most ``DOCK_MOST`` of the window), so that its
        main control is in view (at 1366 x 768 every dock opened about 120 px tall, Train's Start hidden). The
        walk in front as the window opens keeps its fifth; brought back from another tab it gets the room too.
        Never shrunk: the person's own height stays."""
        if not in_sight(dock):
            return
        walk = self.docks["walk"]
        before, self.front = self.front, dock
        if dock is walk and before in (None, walk):  # the window opening: a fifth
            return
        if dock is self.docks["model-view"]:
            self._give_model_view_room()
            return
        self._raise_height(dock, DOCK_OPEN_H)

    def first_height(self, dock: QtWidgets.QDockWidget, wanted: int) -> None:
        """A first start's height of ``dock`` (the walk): ``wanted`` for the dock itself, the tab bar below it on
        top (asked of the tab group, it left the walk 127 px at 1366 x 768, its table's header cut)."""
        self.window.resizeDocks([dock], [wanted], Vertical)
        self._raise_height(dock, wanted)

    def _raise_height(self, dock: QtWidgets.QDockWidget, wanted: int) -> None:
        win = self.window
        wanted = min(wanted, round(win.height() * DOCK_MOST))
        self._lay_out()  # a resize asked before (a first start's fifth) applied: its height, not the old
        if dock.height() < wanted:
            win.resizeDocks([dock], [wanted], Vertical)
            self._lay_out()
            short = wanted - dock.height()  # the size asked is the tab group's, its tab bar included
            if short > 0:
                win.resizeDocks([dock], [wanted + short], Vertical)

    def _lay_out(self) -> None:
        """Apply the window's layout now (the docks' heights asked for so far)."""
        layout = self.window.layout()
        if layout is not None:
            layout.activate()

    def _give_model_view_room(self, result=None) -> None:
        """The model view came in front: ``DOCK_OPEN_H`` at least; once a model, its thumbnails of 30 layers x
        9 heads get two fifths of a tall window, where the screen leaves the maps their room. It is given when
        the view first comes in sight, not only when the model's first frame does: behind a dock asked for
        (``--dock why``) the grid kept a fifth of the height when brought in front."""
        if result is None:
            frame = self.requests.frame()
            result = frame.result if frame is not None else None
        model = self.docks["model-view"]
        if not in_sight(model):
            return
        wanted, height = DOCK_OPEN_H, self.window.height()
        if not self.model_room and result is not None and result.config.model is not None:
            self.model_room = True
            spec = result.resolved.spec
            if spec is not None and spec.layers > result.heads and height >= 1000:
                wanted = max(wanted, height * 2 // 5)
        self._raise_height(model, wanted)

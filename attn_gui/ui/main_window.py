"""The explorer window: controls on the left, the pipeline of maps, the token walk below.

One frozen ``ViewState`` is the truth (``window.state``). Every control, click and
menu asks for a new state through ``set_state``; the window shows it everywhere and
computes when its config changed.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import (AttentionConfig, UserError, check_tokens_now, model_spec, preset, toggle_head, tokens_for,
                      unknown_note)
from ..present.frame import Frame, held_text
from ..present.generation import GenerationStep, generate_step
from ..present.maps import special_tokens
from ..present.frame import DISPLAY_MAX
from ..present.runner import Failure, is_partial
from ..present.state import ViewState, carry_layer, check_window_text
from ..render.canvas import Pipeline
from ..render.collector import collect_on_gui_thread
from ..render.model_view import ModelView
from . import map_menu
from .busy import StaleCover
from .dock_scroll import DockScroll
from .controls import ControlPanel
from .file_actions import FileActions
from .insight import InsightDocks
from .sight import in_sight
from .corpus_panel import CorpusPanel
from .circuit_panel import CircuitPanel
from .interventions_panel import InterventionsPanel
from .why_panel import WhyPanel
from .kv_cache_panel import KVCachePanel
from .lessons_panel import LessonsPanel
from .menus import build_menus
from .settings import Settings
from .token_focus import TokenFocus
from .train_panel import TrainPanel
from .worker import ComputeService, TaskThread


MODEL_READERS = ("gguf.quants", "safetensors.torch")  # what a model's first open imports (the models extra)
DOCK_OPEN_H = 250  # a dock brought in front is at least this tall: its main control in view at 1366 x 768
DOCK_MOST = 0.45  # ... and at most this share of the window's height, so that the maps keep theirs
# the handle between the maps and the docks: 1 px was missed, and the drag caught the dock's title bar instead
SEPARATOR_STYLE = ("QMainWindow::separator { background: #dcdce4; width: 7px; height: 7px; }"
                   "QMainWindow::separator:hover { background: #a8b4d0; }")


def preload_model_readers() -> None:
    """Import the libraries a model's first open imports, here on the GUI thread before the window shows (about
    30 ms, once per process). Imported by the worker, the initialisation of their extension modules (gguf's YAML
    and Cython ones, safetensors' Rust one) held the interpreter lock: a 106 to 116 ms stall of the window at the
    first open of SmolLM2's file, 29 ms with them imported first."""
    for name in MODEL_READERS:
        with contextlib.suppress(ImportError):  # the models extra is not installed: no model opens either
            importlib.import_module(name)


class MainWindow(FileActions, QtWidgets.QMainWindow):
    """Attention Explorer's main window.

    Parameters
    ----------
    state : ViewState or AttentionConfig, optional
        Start here instead of at the saved state (or the default).
    settings : Settings, optional
        Where to read and save the window's settings.

    Signals
    -------
    frameShown(Frame)
        A new result has been drawn in every map.
    computeFailed(str)
        The newest request failed; the message is also shown under the sentence.
    inputInvalid(str)
        An edit was refused (the message says why); the state did not change.
    stateChanged(ViewState)
        The view state changed (config or view choices).
    generated(GenerationStep)
        Generate appended a token to the sentence (its frame follows).
    """

    frameShown = QtCore.Signal(object)
    computeFailed = QtCore.Signal(str)
    inputInvalid = QtCore.Signal(str)
    stateChanged = QtCore.Signal(object)
    generated = QtCore.Signal(object)

    def __init__(self, state: ViewState | AttentionConfig | None = None, settings: Settings | None = None):
        super().__init__()
        collect_on_gui_thread()  # worker threads must never delete Qt objects (see render/collector.py)
        preload_model_readers()
        self.setWindowTitle("Attention Explorer")
        self.setObjectName("mainWindow")
        self.setStyleSheet(SEPARATOR_STYLE)
        self._docks_settled = False  # the first frame is drawn (a lesson asked for before it stays in front)
        self._front: QtWidgets.QDockWidget | None = None  # the dock that came in front last
        self.settings = settings or Settings()
        self.frame: Frame | None = None
        self.failed_config: AttentionConfig | None = None
        self.last_good_device = "cpu"
        self._state = ViewState()
        self._invalid = ""
        self._shown_id = 0

        self.panel = ControlPanel()
        scroll = QtWidgets.QScrollArea()
        scroll.setObjectName("controlScroll")
        scroll.setWidget(self.panel)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(max(330, self.panel.minimumSizeHint().width()
                                   + scroll.verticalScrollBar().sizeHint().width() + 4))
        self.pipeline = Pipeline()
        self.canvas = self.pipeline.canvas  # every map, one scene
        self.cover = StaleCover(self.canvas)  # the maps greyed while a newer input is computed
        self.cover.stopRequested.connect(self.stop_compute)
        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.splitter.addWidget(scroll)
        self.splitter.addWidget(self.pipeline)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([340, 1260])
        self.setCentralWidget(self.splitter)

        self.focus = TokenFocus()
        self.focusDock = self.add_dock("Follow one token", "tokenFocusDock", self.focus)
        self.focusDock.visibilityChanged.connect(self.focus.came_into_sight)
        self.modelView = ModelView()
        self.modelDock = self.add_dock("Model view", "modelViewDock", self.modelView)
        self._model_room = False  # whether the model view had its room since the window entered model mode
        self.kvCache = KVCachePanel()
        self.kvCacheDock = self.add_dock("KV cache (decoding)", "kvCacheDock", self.kvCache)
        self.kvCacheDock.visibilityChanged.connect(lambda visible: visible and self.kvCache.follow(self._state))
        self.interventions = InterventionsPanel()
        self.interventionsDock = self.add_dock("Interventions", "interventionsDock", self.interventions)
        self.interventionsDock.visibilityChanged.connect(
            lambda visible: visible and self.interventions.follow(self._state.config, self._state.head))
        self.interventions.ablateRequested.connect(lambda heads: self.edit_config({"ablate": heads}))
        self.interventions.headPicked.connect(self._on_head_picked)
        self.why = WhyPanel()
        self.whyDock = self.add_dock("Why", "whyDock", self.why)
        self.whyDock.visibilityChanged.connect(
            lambda visible: visible and self.why.follow(self._state.config, self._state.head))
        self.why.headPicked.connect(self._on_head_picked)
        self.why.modelColours.connect(self.modelView.set_side)
        self.circuit = CircuitPanel()
        self.circuitDock = self.add_dock("Circuit", "circuitDock", self.circuit)
        self.circuitDock.visibilityChanged.connect(lambda visible: visible and self.circuit.follow(self._state.config))
        self.circuit.headPicked.connect(self._on_head_picked)
        self.circuit.circuitDone.connect(self._give_circuit_room)
        self.train = TrainPanel()
        self.trainDock = self.add_dock("Train", "trainDock", self.train)
        self.train.openRequested.connect(self.open_trained)
        self.corpus = CorpusPanel()
        self.corpusDock = self.add_dock("Corpus", "corpusDock", self.corpus)
        self.corpus.exampleOpened.connect(self.open_example)
        self.lessons: LessonsPanel | None = None  # made on first use (Help → Lessons): open_lessons
        self.lessonsDock: QtWidgets.QDockWidget | None = None
        self._before_lesson: ViewState | None = None  # the person's own state, saved instead of a lesson's
        self.focusDock.raise_()
        self.modelDock.hide()

        self.statusLabel = QtWidgets.QLabel()
        self.statusLabel.setObjectName("statusLabel")
        self.statusBar().addWidget(self.statusLabel, 1)
        self.loadBar = QtWidgets.QProgressBar()
        self.loadBar.setObjectName("loadBar")
        self.loadBar.setRange(0, 100)
        self.loadBar.setFixedWidth(200)
        self.loadBar.hide()
        self.statusBar().addPermanentWidget(self.loadBar)
        self._loading: str | None = None  # the model the worker loads before the next frame
        self._asked_dock: QtWidgets.QDockWidget | None = None  # the dock the command line put in front
        self._model_mode: bool | None = None  # whether the last frame drawn came from a model (None: no frame yet)
        self.menus = build_menus(self)

        self._busy_timer = QtCore.QTimer(self)
        self._busy_timer.setSingleShot(True)
        self._busy_timer.setInterval(150)
        self._busy_timer.timeout.connect(self._show_busy)
        self.service = ComputeService(self)
        self.service.resultReady.connect(self.show_frame)
        self.service.failed.connect(self._on_failed)
        self.service.loadProgress.connect(self._on_load_progress)
        self.service.layerProgress.connect(self._on_layer_progress)
        self._progress = (0, 0)  # the newest request's model run: layers done, layers
        self._asked_tokens = None  # the newest request's tokens (None: its model loads first)
        self.generator = TaskThread("attn-gui generate", self)
        self.generator.done.connect(self._on_generated)
        # an application that quits without closing this window still stops every thread first
        # (else Qt aborts: "QThread: Destroyed while thread ... is still running")
        QtWidgets.QApplication.instance().aboutToQuit.connect(self.stop_workers)
        self._generation: list[int] | None = None  # [done, total] while Generate runs
        self._step_running = False
        self.panel.decoderPanel.generateRequested.connect(self.generate)
        self.panel.decoderPanel.stopRequested.connect(self.stop_generation)
        self.panel.edited.connect(self.edit_config)
        self.panel.presetChosen.connect(self.apply_preset)
        self.panel.openModelRequested.connect(self.open_model_dialog)
        self.panel.hideSpecialToggled.connect(lambda hide: self.set_state(self._state.replace(hide_special=hide)))
        self.canvas.tokenSelected.connect(self.select_token)
        self.canvas.cellClicked.connect(self._on_cell_clicked)
        self.canvas.headSelected.connect(self.select_head)
        self.canvas.focusRequested.connect(self.focus_on)
        self.canvas.mapMenuRequested.connect(lambda data, pos: self.map_menu(data).exec(pos))
        escape = QtGui.QShortcut(QtGui.QKeySequence(QtCore.Qt.Key.Key_Escape), self)
        escape.activated.connect(self._on_escape)
        self.modelView.headPicked.connect(self._on_head_picked)
        self.modelView.headStruck.connect(
            lambda layer, head: self.edit_config({"ablate": toggle_head(self._state.config.ablate, (layer, head))}))
        self.insight = InsightDocks()  # head metrics, difference maps, rollout, why scaling
        for key, title, panel in self.insight.panels():
            self.insight.attach(key, self.add_dock(title, f"{key}Dock", panel))
        self.focusDock.raise_()
        self.menus.view.addSeparator()
        for dock in self.insight.docks.values():
            self.menus.view.addAction(dock.toggleViewAction())
        self.statusBar().addPermanentWidget(self.insight.fixButton)
        self.insight.editRequested.connect(self.edit_config)
        self.insight.headPicked.connect(self._on_head_picked)
        self.frameShown.connect(self.insight.show_frame)
        self.stateChanged.connect(self.insight.follow)

        self._restore(state)

    def add_dock(self, title: str, name: str, widget: QtWidgets.QWidget) -> QtWidgets.QDockWidget:
        """A dock below the maps, as a tab beside the walk: the maps keep the window's full width.

        Its widget scrolls inside it: no dock's minimum size (the KV cache's 230 px, the Train
        dock's curves) makes every bottom tab that tall and takes the maps' room.
        """
        dock = QtWidgets.QDockWidget(title, self)
        dock.setObjectName(name)
        # closable and movable, never floated: a drag that missed the separator undocked it into a window
        dock.setFeatures(QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetClosable
                         | QtWidgets.QDockWidget.DockWidgetFeature.DockWidgetMovable)
        # a tab shown behind another says it is visible for a moment: the room waits until it is in sight
        dock.visibilityChanged.connect(
            lambda visible: visible and QtCore.QTimer.singleShot(0, self, lambda: self._give_room(dock)))
        dock.setWidget(DockScroll(widget))
        self.addDockWidget(QtCore.Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        if name != "tokenFocusDock":
            self.tabifyDockWidget(self.focusDock, dock)
        return dock

    # the view state --------------------------------------------------------------------------

    @property
    def state(self) -> ViewState:
        """The view state the window shows (read-only: change it with ``set_state``)."""
        return self._state

    @property
    def result(self):
        """The AttentionResult shown (every tensor of the step; None until the first compute arrives)."""
        return self.frame.result if self.frame is not None else None

    def wait(self, timeout: float = 60.0):
        """Run Qt's events until the maps show the state's config (or it fails, or ``timeout`` seconds
        pass); the result shown. For Python sessions, where a cell reads ``result`` after ``set_state``."""
        shown = lambda: (self.result is not None and self.result.config == self._state.config  # noqa: E731
                         and not is_partial(self.frame))  # a large decoder's first maps: its whole run is to come
        loop = QtCore.QEventLoop()
        timer = QtCore.QTimer(singleShot=True, interval=round(1000 * timeout))
        timer.timeout.connect(loop.quit)
        self.frameShown.connect(loop.quit)
        self.computeFailed.connect(loop.quit)
        timer.start()
        try:
            while not shown() and timer.isActive() and not self._invalid and self.failed_config != self._state.config:
                loop.exec()
        finally:
            self.frameShown.disconnect(loop.quit)
            self.computeFailed.disconnect(loop.quit)
            timer.stop()
        return self.result

    def set_state(self, state: ViewState) -> None:
        """Show ``state`` everywhere; compute when its config differs from the shown one.

        The config must be valid and have tokens (``edit_config`` checks edits first).
        """
        old, self._state = self._state, state
        config_changed = state.config != old.config or self.frame is None
        if config_changed:
            tokens = check_tokens_now(state.config)  # None: the worker loads the model first
            self.panel.show_config(state.config, tokens)
            self._invalid = ""
            self.panel.show_message("")
            if tokens is None:
                self._show_loading(state.config.model)
            self._progress, self._asked_tokens = (0, 0), tokens
            self.service.submit(state.config)
            if self.service.latest_id != self._shown_id and self._long(state.config, tokens):
                self._show_busy()  # a long input: the old maps are marked at once, not after the timer
            self._busy_timer.start()
        self.panel.show_hide_special(state.hide_special)
        if not config_changed and self.frame is not None:
            self._draw()
        if state != old:  # a dock behind another tab follows when it comes into sight (visibilityChanged)
            if in_sight(self.kvCacheDock):
                self.kvCache.follow(state)
            if in_sight(self.interventionsDock):  # it runs the model twice: never for a dock out of sight
                self.interventions.follow(state.config, state.head)
            if in_sight(self.circuitDock):
                self.circuit.follow(state.config)
            if in_sight(self.whyDock):
                self.why.follow(state.config, state.head)
            else:
                self.why.input_changed(state.config)
            self.stateChanged.emit(state)

    def edit_config(self, changes: dict[str, Any]) -> bool:
        """Apply the user's ``changes`` to the config: a new state if valid, else a message.

        An invalid edit changes nothing: the maps keep the last good result, the
        controls keep showing what was typed, and the message says why.
        """
        try:
            for name in ("sentence", "source_sentence"):
                if changes.get(name) is not None:
                    check_window_text(changes[name])
            config = self._state.config.replace(**carry_layer(self._state.config, changes))
            check_tokens_now(config)  # a model still loading: its worker checks them
        except UserError as exc:
            self._show_invalid(str(exc))
            return False
        self.set_state(self._state.replace(config=config))
        return True

    def recompute(self) -> None:
        """Compute the shown config again (after a failure or a stop, or to time it)."""
        self._progress, self._asked_tokens = (0, 0), check_tokens_now(self._state.config)
        self.service.submit(self._state.config)
        if self.service.latest_id != self._shown_id and self._long(self._state.config, self._asked_tokens):
            self._show_busy()
        self._busy_timer.start()

    def stop_compute(self) -> bool:
        """Stop the computation in progress (Esc): the maps keep the last result, or a large decoder's first maps
        with the rest of its run stopped (kept, F5 goes on from there); whether one was running."""
        rest = self.frame is not None and is_partial(self.frame)  # the rest of the shown request's run
        if (self.service.latest_id == self._shown_id and not rest) or not self.service.cancel():
            return False
        if self.cover.covering:
            self.cover.label.setText(f"<b>stopping…</b><br>{self.cover.what}")
        return True

    def _on_escape(self) -> None:
        """Esc stops a computation in progress (a covered one, or the rest of a first-maps frame); else it shows
        every map."""
        busy = self.cover.covering or (self.frame is not None and is_partial(self.frame))
        if not (busy and self.stop_compute()):
            self.focus_on(None)

    @staticmethod
    def _long(config: AttentionConfig, tokens) -> bool:
        """Whether computing ``config`` takes long enough to mark the old maps at once: a model still to load,
        a model over a few hundred tokens, or a streamed input (``tokens`` None: the model loads first)."""
        if tokens is None:
            return True
        T = len(tokens.tokens)
        return T > DISPLAY_MAX or (config.model is not None and T > 128)

    def apply_preset(self, name: str) -> None:
        """The named preset, on the device in use."""
        self.set_state(self._state.replace(config=preset(name).replace(device=self._state.config.device)))

    def select_head(self, head: int) -> None:
        """Show head ``head`` (0-based) in the per-head maps."""
        if self.frame is not None and 0 <= head < self.frame.result.heads:
            self.set_state(self._state.replace(head=head))

    def select_token(self, token: int | None) -> None:
        """Follow query ``token`` (0-based, None for none) through every map and the walk."""
        if token is None or self.frame is None or 0 <= token < self.frame.result.seq_len:
            self.set_state(self._state.replace(token=token))
            if token is not None:
                self.focusDock.show()

    def focus_on(self, field: str | None) -> None:
        """Show ``field``'s map large with its neighbours (None: every map)."""
        self.set_state(self._state.replace(focus=field))

    def map_menu(self, data) -> QtWidgets.QMenu:
        """The right-click menu of the canvas map showing ``data`` (a MapData)."""
        return map_menu.canvas_menu(self.canvas, data, lambda mode: self.set_scale(data.field, mode))

    def set_scale(self, field: str, mode: str) -> None:
        """Draw ``field``'s map (every head's) on colour scale ``mode`` (``present.scales``)."""
        self.set_state(self._state.with_scale(field, mode))

    def show_dock(self, name: str, keep: bool = False) -> QtWidgets.QDockWidget:
        """Bring dock ``name`` (one of ``present.state.DOCKS``) in front; with ``keep`` (the command
        line's ``--dock``) it stays in front when the first model frame comes (the model view would)."""
        if name == "lessons":
            self.open_lessons()
        docks = {"walk": self.focusDock, "model-view": self.modelDock, "kv-cache": self.kvCacheDock,
                 "interventions": self.interventionsDock, "why": self.whyDock, "corpus": self.corpusDock,
                 "circuit": self.circuitDock,
                 "train": self.trainDock, "lessons": self.lessonsDock,
                 "metrics": self.insight.docks["metrics"], "difference": self.insight.docks["difference"],
                 "rollout": self.insight.docks["rollout"], "why-scaling": self.insight.docks["scaling"]}
        dock = docks[name]
        dock.show()
        dock.raise_()
        if keep:
            self._asked_dock = dock
        return dock

    def open_lessons(self, name: str | None = None, step: int | None = None) -> LessonsPanel:
        """Show the Lessons dock (made on first use), at ``name`` and ``step`` or where the learner left off."""
        if self.lessons is None or self.lessonsDock is None:
            self.lessons = lessons = LessonsPanel(self.settings)
            self.lessonsDock = self.add_dock("Lessons", "lessonsDock", lessons)
            lessons.stateRequested.connect(self._lesson_state)
            lessons.marksChanged.connect(self.canvas.set_marks)
            self.lessonsDock.visibilityChanged.connect(self._lessons_closed)
            self.canvas.cellClicked.connect(lessons.cell_clicked)  # a click on the question's row answers it
            self.stateChanged.connect(lessons.follow)
            self.frameShown.connect(lessons.show_frame)
            lessons.follow(self._state)
            if self.frame is not None:
                lessons.show_frame(self.frame)
        self.lessonsDock.show()
        self.lessonsDock.raise_()
        if not self._docks_settled:  # asked for at the start (attn-gui lesson): no first frame puts another in front
            self._asked_dock = self.lessonsDock
        note = self.lessons.resume(name, step)
        if note:
            self.statusBar().showMessage(f"⚠ {note}", 20000)
        return self.lessons

    def _lessons_closed(self, visible: bool) -> None:
        """Closed (not behind another tab, nor the window closing), the lesson leaves no outline on the maps."""
        if not visible and self.isVisible() and self.lessonsDock is not None and self.lessonsDock.isHidden():
            self.canvas.set_marks({})

    def _lesson_state(self, state: ViewState) -> None:
        """A lesson's state: shown; the person's own, from before the lesson, is what closing the window saves
        while the lesson's input is shown (a later start opened on the lesson's sentence and sizes)."""
        if self._before_lesson is None:
            self._before_lesson = self._state
        self.set_state(state)

    def _on_cell_clicked(self, field: str, head: int, row: int, column: int) -> None:
        """A cell of alpha: the Why dock, if in sight, splits that score into its components' terms."""
        if field == "weights" and head >= 0 and in_sight(self.whyDock):
            self.why.show_score(head, row, column)

    def _on_head_picked(self, layer: int | None, head: int) -> None:
        """A head picked in a dock: ``layer`` None (random weights) or the shown layer selects the head."""
        if layer is None or layer == self._state.config.layer:
            self.select_head(head)
        else:  # the new layer's frame shows this head
            self.set_state(self._state.with_config(layer=layer).replace(head=head))

    # compute flow ----------------------------------------------------------------------------

    def _restore(self, start: ViewState | AttentionConfig | None) -> None:
        for key, restore in (("geometry", self.restoreGeometry), ("window_state", self.restoreState),
                             ("splitter", self.splitter.restoreState)):
            saved = self.settings.get(key)
            if not saved.isEmpty():
                restore(saved)
        if self.settings.get("geometry").isEmpty():  # first start: as large as the screen allows
            screen = self.screen().availableGeometry()
            self.resize(min(1600, screen.width()), min(1000, screen.height()))
        if self.settings.get("window_state").isEmpty():  # the docks below take a fifth of the height
            QtCore.QTimer.singleShot(0, lambda: self.resizeDocks(
                [self.focusDock], [max(150, self.height() // 5)], QtCore.Qt.Orientation.Vertical))
        # alpha is what a learner came for: a new start shows it first, its neighbours beside it
        if isinstance(start, AttentionConfig):  # options on the command line
            start = ViewState(start, focus="weights")
        state = start or self.settings.state() or ViewState(focus="weights")
        try:
            check_tokens_now(state.config)
        except UserError:
            state = ViewState()
        self.set_state(state)

    def _show_busy(self) -> None:
        """Grey the maps and say what is computed (a long input at once; any other after the busy timer: fast
        computes would just flicker)."""
        if self.service.latest_id == self._shown_id:
            return
        config = self._state.config
        if self.frame is None:
            self.statusLabel.setText("computing the first result…")
        else:
            base = self.statusLabel.text().split("  ·  computing…")[0]
            self.statusLabel.setText(base + "  ·  computing… (the maps show the previous result)")
        tokens = self._asked_tokens if self._loading is None else None
        name = model_spec(config.model).label.split(" (")[0] if config.model is not None else "random weights"
        what = (f"loading {name}, then computing" if tokens is None
                else f"computing T = {len(tokens.tokens):,} tokens with {name}")
        if not self.cover.covering or self.cover.what != what:
            self.cover.cover(what, previous=self.frame is not None)
            if self._progress[1]:
                self.cover.set_progress(*self._progress)
        self.panel.decoderPanel.set_stale(True)
        self.focus.setEnabled(False)  # the walk too shows the previous result

    def _uncover(self) -> None:
        self.cover.uncover()
        self.panel.decoderPanel.set_stale(False)
        self.focus.setEnabled(True)

    def _loaded(self) -> None:
        """The model the state's config names is in memory: its tokens under the sentence at once."""
        tokens = check_tokens_now(self._state.config)
        if tokens is not None:
            self.panel.show_tokens(self._state.config, tokens)
            self._asked_tokens = tokens
            self._show_loading(None)

    def _on_layer_progress(self, done: int, total: int) -> None:
        self._progress = (done, total)
        if self._loading is not None:  # the model is in memory now: its tokens and the cover say what is computed
            self._loaded()
            if self.cover.covering and self._asked_tokens is not None:
                self._show_busy()
        if self.cover.covering:
            self.cover.set_progress(done, total)

    def _show_loading(self, model: str | None, done: int = 0, total: int = 0) -> None:
        """Say under the sentence and in the status bar that ``model`` loads (None: it is done)."""
        self._loading = model
        if model is None:
            self.panel.show_loading("")
            self.loadBar.hide()
            return
        name = model_spec(model).label.split(" (")[0]  # "SmolLM2-135M"
        if total:
            percent = round(100 * done / total)
            text = f"building {name}'s tokenizer into the cache (only the first time), {percent} %"
        else:
            percent = 0
            text = f"loading {name}… " + ("(the maps show the previous result)" if self.frame is not None
                                          else "then computing the first result")
        self.panel.show_loading(text)
        self.loadBar.setValue(percent)
        self.loadBar.setFormat(f"{name}: %p %")
        self.loadBar.show()

    def _on_load_progress(self, done: int, total: int) -> None:
        if self._loading is not None:
            self._show_loading(self._loading, done, total)
            if self.cover.covering and total:  # a first start's cover says how far the tokenizer is
                self.cover.bar.setRange(0, total)
                self.cover.bar.setValue(done)
                self.cover.bar.setFormat("building the tokenizer (only the first time): %p %")

    def _show_invalid(self, message: str) -> None:
        self._invalid = message
        self.panel.show_message(message)
        self.statusLabel.setText(f"⚠ {message} — the maps show the last valid input")
        self.inputInvalid.emit(message)

    def show_frame(self, frame: Frame) -> None:
        """Draw ``frame`` in every map, the token walk and the status bar."""
        started = time.perf_counter()  # the canvas draws what this turn leaves time for (render/canvas.py)
        result = frame.result
        self.last_good_device = result.config.device
        self.frame = frame
        self._shown_id = frame.request_id
        self.failed_config = None
        self._uncover()
        if self._loading is not None:  # the model is in memory now: the chips come at once
            self._loaded()
            self._show_loading(None)
        partial = is_partial(frame)  # a large decoder's first maps: the rest of its run is to come
        self.panel.decoderPanel.show_next_tokens(result.next_tokens, pending=partial)
        fitted = self._state.fitted(result)
        if fitted != self._state:
            self._state = fitted
            self.stateChanged.emit(fitted)
        self._draw(started)
        dims = result.config.dims
        T = result.seq_len
        note = ("  ·  note: " + "; ".join(result.notes)) if result.notes else ""
        warning = f"⚠ {frame.saturation.text}  ·  " if frame.saturation is not None else ""
        if partial:  # first in the line: the notes after it are cut on a small screen
            warning += (f"first maps: {result.model_run.pending} of {len(result.resolved.layers)} "
                        "layers run, the rest of the run is computing  ·  ")
        self.statusLabel.setText(
            f"{warning}T = {T:,}  ·  V = {len(result.vocab):,}  ·  h = {result.heads}  ·  "
            f"d_model = {dims.d_model}, d_k = {dims.d_k}, d_v = {dims.d_v}  ·  "
            f"{held_text(result)}  ·  "
            f"{result.device}, {result.config.dtype}  ·  {result.elapsed_ms:.2f} ms{note}")
        if self._invalid:  # a frame still in flight must not hide a newer problem
            self._show_invalid(self._invalid)
        elif result.config.model is not None:  # a sentence the model cannot read: said where the person types
            unknown = unknown_note(result.config, tokens_for(result.config))
            what_if = result.resolved.what_if_text()  # a model run changed by an option it lacks: never unsaid
            if unknown or what_if:
                self.panel.show_message("⚠ " + " · ".join(t for t in (what_if, unknown) if t))
        self.frameShown.emit(frame)
        if not partial:  # a generation step goes on once its sentence's whole run is shown
            self._continue_generation(result.config)

    def _draw(self, started: float | None = None) -> None:
        """Draw the shown frame as the state says: head, followed token, hidden tokens (``started``:
        see ``Canvas.show_frame``)."""
        state, result = self._state, self.frame.result
        hidden = self.hidden_tokens()
        partial = is_partial(self.frame)
        model_mode = "layer_weights" in self.frame.arrays or partial
        if model_mode != self._model_mode:  # the docks change first: the maps are laid out once,
            self._model_mode = model_mode
            if not model_mode:
                self.modelView.show_empty("every layer's and head's α of a pretrained model shows here: "
                                          "choose one under Model (random weights have one layer)")
            with self.pipeline.canvas.resizes_held():  # for the canvas's size beside the new dock
                self._show_model_dock(model_mode, result)
                self.layout().activate()
        self._asked_dock = None  # the first frame is drawn: the docks are the person's from here on
        self._docks_settled = True
        self.pipeline.show_frame(self.frame, state.head, state.token, hidden, state.focus, state.scales, started)
        self.focus.show_walk(result, state.token, state.head)
        if partial:  # not the last sentence's grid: this one's comes with its whole run
            self.modelView.show_empty(f"every layer's α comes when the model's run finishes ({result.model_run.pending}"
                                      f" of {len(result.resolved.layers)} layers run)")
        elif model_mode:  # in a turn of its own where the canvas draws in steps (a first frame of many heads)
            self.canvas.draw_beside(self._draw_model_view)

    def _draw_model_view(self) -> None:
        """The model view's grid: every layer's and head's alpha of the shown frame (model mode)."""
        state, result = self._state, self.frame.result
        if "layer_weights" not in self.frame.arrays:
            return
        hidden = self.hidden_tokens()
        # every layer ran with the plan's options (a what-if in all of them); the other layers' masks are drawn
        # causal where the run is causal (their windows are in their weights, 0 outside)
        scaled = self.frame.arrays.get("scaled")
        masked = np.isneginf(scaled).all(axis=0) if scaled is not None else None  # the same in every head
        t = self.frame.arrays["layer_weights"].shape[-1]
        model_mask = np.triu(np.ones((t, t), dtype=bool), 1) if result.resolved.causal else None
        self.modelView.set_weights(self.frame.arrays["layer_weights"], result.config.layer, state.head, hidden,
                                   result.seq_len, masked, other_layers=model_mask,
                                   kv_heads=result.resolved.dims.kv_heads, sink=self.frame.arrays.get("sink_mass"),
                                   distance=self.frame.arrays.get("mean_distance"))
        self.modelView.set_struck(result.config.ablate, allowed=result.resolved.can.intervene)

    def _show_model_dock(self, show: bool, result) -> None:
        """Entering model mode: the grid of every head, in front (behind the dock the command line
        asked for, if any); leaving it: the walk comes back."""
        asked = self._asked_dock
        if not show:  # the grid, opened by hand or by --dock, stays while the weights are random
            if asked is self.modelDock or self.modelDock.isHidden():
                return
            self.modelDock.hide()
            self._front = None  # the walk comes back as at the opening: its fifth, not a dock's room
            (asked or self.focusDock).raise_()
            self.resizeDocks([self.focusDock], [max(150, self.height() // 5)], QtCore.Qt.Orientation.Vertical)
            return
        self._model_room = False
        self.modelDock.show()
        if asked is not None and asked is not self.modelDock:
            asked.raise_()
            return
        self.modelDock.raise_()
        self._give_model_view_room(result)

    def _give_circuit_room(self) -> None:
        """A circuit was found: its graph gets half the window's height if the dock has less (never shrunk)."""
        if self.circuit.found is not None and in_sight(self.circuitDock):
            self._raise_height(self.circuitDock, max(300, self.height() // 2))

    def _give_room(self, dock: QtWidgets.QDockWidget) -> None:
        """A dock came in front: at least ``DOCK_OPEN_H`` tall (at most ``DOCK_MOST`` of the window), so that its
        main control is in view (at 1366 x 768 every dock opened about 120 px tall, Train's Start hidden). The
        walk in front as the window opens keeps its fifth; brought back from another tab it gets the room too.
        Never shrunk: the person's own height stays."""
        if not in_sight(dock):
            return
        before, self._front = self._front, dock
        if dock is self.focusDock and before in (None, self.focusDock):  # the window opening: a fifth
            return
        if dock is self.modelDock:
            self._give_model_view_room()
            return
        self._raise_height(dock, DOCK_OPEN_H)

    def _raise_height(self, dock: QtWidgets.QDockWidget, wanted: int) -> None:
        wanted = min(wanted, round(self.height() * DOCK_MOST))
        self.layout().activate()  # a resize asked before (a first start's fifth) applied: its height, not the old
        if dock.height() < wanted:
            self.resizeDocks([dock], [wanted], QtCore.Qt.Orientation.Vertical)
            self.layout().activate()
            short = wanted - dock.height()  # the size asked is the tab group's, its tab bar included
            if short > 0:
                self.resizeDocks([dock], [wanted + short], QtCore.Qt.Orientation.Vertical)

    def _give_model_view_room(self, result=None) -> None:
        """The model view came in front: ``DOCK_OPEN_H`` at least; once a model, its thumbnails of 30 layers x
        9 heads get two fifths of a tall window, where the screen leaves the maps their room. It is given when
        the view first comes in sight, not only when the model's first frame does: behind a dock asked for
        (``--dock why``) the grid kept a fifth of the height when brought in front."""
        result = result or self.result
        if not in_sight(self.modelDock):
            return
        wanted = DOCK_OPEN_H
        if not self._model_room and result is not None and result.config.model is not None:
            self._model_room = True
            spec = result.resolved.spec
            if spec is not None and spec.layers > result.heads and self.height() >= 1000:
                wanted = max(wanted, self.height() * 2 // 5)
        self._raise_height(self.modelDock, wanted)

    def hidden_tokens(self) -> tuple[int, ...]:
        """Token indices left out of the maps: the model's special tokens, when asked."""
        return special_tokens(self.frame.result) if self._state.hide_special and self.frame else ()

    def _on_failed(self, failure: Failure) -> None:
        config = failure.config
        self._shown_id = failure.request_id
        self.failed_config = config
        self._show_loading(None)
        self._uncover()
        self.stop_generation()
        first_line = failure.message.splitlines()[0]
        if failure.cancelled:
            done, total = self._progress
            where = f" after {done} of {total} layers" if total else ""
            shows = ("this text's first maps" if self.frame is not None and is_partial(self.frame)
                     and self.frame.result.config == config else "the previous result")
            first_line = (f"Stopped{where}: the maps show {shows}; edit the text, "
                          f"or press F5 to compute it again")
            self.panel.show_message(first_line)
            self.statusLabel.setText(first_line)
            self.computeFailed.emit(first_line)
            return
        if failure.device_error and config.device != self.last_good_device:
            first_line += f" — back on {self.last_good_device}"
            self.set_state(self._state.with_config(device=self.last_good_device))
        self.panel.show_message(first_line)
        self.statusLabel.setText(f"⚠ {first_line} — the maps show the last good result")
        self.computeFailed.emit(first_line)

    # generation ------------------------------------------------------------------------------

    def generate(self, steps: int) -> None:
        """Append the model's most likely next token ``steps`` times, each step on the generate thread,
        each new sentence computed and shown as a frame before the next step starts."""
        if self._generation is not None or self.frame is None:
            return
        self._generation = [0, steps]
        self.panel.decoderPanel.set_running(True, 0, steps)
        self._next_step()

    def stop_generation(self) -> None:
        """Stop generating after the step in progress (its token is still appended)."""
        if self._generation is not None:
            self._generation = None
            self.panel.decoderPanel.set_running(False)

    def _next_step(self) -> None:
        config = self._state.config
        self._step_running = True
        self.statusLabel.setText(f"generating token {self._generation[0] + 1} of {self._generation[1]}…")
        self.generator.start(config, lambda: generate_step(config))

    def _on_generated(self, config: AttentionConfig, outcome: GenerationStep | Exception) -> None:
        self._step_running = False
        if self._generation is None:
            return  # stopped: the step is dropped
        if config != self._state.config:  # the input was edited meanwhile: the person takes over
            self.stop_generation()
            return
        if isinstance(outcome, Exception):
            self.stop_generation()
            self._show_invalid(str(outcome).splitlines()[0])
            return
        self._generation[0] += 1
        done, total = self._generation
        if done >= total or outcome.stopped:
            self.stop_generation()
        else:
            self.panel.decoderPanel.set_running(True, done, total)
        if not self.edit_config({"sentence": outcome.sentence}):
            self.stop_generation()
        self.generated.emit(outcome)

    def _continue_generation(self, shown: AttentionConfig) -> None:
        """The next step, once the last step's sentence is shown."""
        if self._generation is not None and not self._step_running and shown == self._state.config:
            self._next_step()

    # lifetime --------------------------------------------------------------------------------

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        self.settings.set("geometry", self.saveGeometry())
        self.settings.set("window_state", self.saveState())
        self.settings.set("splitter", self.splitter.saveState())
        lesson = self.lessons is not None and self._before_lesson is not None and self.lessons.on_lesson_input()
        self.settings.set_state(self._before_lesson if lesson else self._state)
        self.settings.sync()
        self.stop_workers()
        super().closeEvent(event)

    def stop_workers(self) -> None:
        """Stop the compute, generate, KV-cache, interventions and train threads (each waits for its task)."""
        self.service.shutdown()
        self.generator.shutdown()
        self.kvCache.shutdown()
        self.interventions.shutdown()
        self.why.shutdown()
        self.circuit.shutdown()
        self.train.shutdown()

    def open_example(self, model: str, sentence: str, layer: int, head: int, query: int) -> None:
        """Open a Corpus dock example: the passage with the census's model, at ``layer`` and ``head``
        with the ``query`` token followed (all 0-based); a passage the window cannot show is said where
        the user looks, and the view stays."""
        try:
            check_window_text(sentence)
            config = self._state.config.replace(model=model or self._state.config.model, sentence=sentence,
                                                layer=layer)
            check_tokens_now(config)
            state = self._state.replace(config=config, head=head, token=query)
        except UserError as exc:
            self._show_invalid(str(exc))
            return
        self.set_state(state)

    def open_trained(self, folder: str, sentence: str) -> None:
        """Show the Train dock's checkpoint ``folder`` in the maps on ``sentence`` (the task's probe):
        the config's model becomes that path, a Hugging Face folder (``engine.sources.hf``)."""
        self.edit_config({"model": folder, "sentence": sentence})

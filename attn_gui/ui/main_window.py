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

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import AttentionConfig, UserError, check_tokens_now, preset, toggle_head, tokens_for, unknown_note
from ..present.frame import Frame
from ..present.maps import special_tokens
from ..present.runner import is_partial
from ..present.state import ViewState, carry_layer, check_window_text
from ..render.canvas import Pipeline
from ..render.collector import collect_on_gui_thread
from . import map_menu
from .busy import StaleCover
from .compute_flow import ComputeFlow, frame_status
from .controls import ControlPanel
from .docks.host import DockHost, Requests
from .docks.lessons import LessonsPanel
from .fast_path import FastPath
from .file_actions import FileActions
from .sight import in_sight
from .menus import build_menus
from .settings import Settings
from .generation import Generation


MODEL_READERS = ("gguf.quants", "safetensors.torch")  # what a model's first open imports (the models extra)
FIRST_DOCK_H = 160  # a first start's walk at least this tall: its first table's header in view at 1366 x 768
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


class MainWindow(QtWidgets.QMainWindow):
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
        self.settings = settings or Settings()
        self.frame: Frame | None = None
        self.failed_config: AttentionConfig | None = None
        self.last_good_device = "cpu"
        self._state = ViewState()
        self._invalid = ""
        self._build_central()

        self.docks = DockHost(self, self.settings, Requests(
            state=lambda: self._state, frame=lambda: self.frame, edit_config=self.edit_config,
            set_state=self._lesson_state, head_picked=self._on_head_picked, open_example=self.open_example,
            canvas=self.canvas))
        self.focus, self.focusDock = self.docks.panels["walk"], self.docks.docks["walk"]  # the maps' own views
        self.modelView, self.modelDock = self.docks.panels["model-view"], self.docks.docks["model-view"]
        self._before_lesson: ViewState | None = None  # the person's own state, saved instead of a lesson's

        self.flow = ComputeFlow(self)  # the worker, the busy cover, the model's load and the status line
        self.service, self.statusLabel, self.loadBar = self.flow.service, self.flow.label, self.flow.bar
        self._model_mode: bool | None = None  # whether the last frame drawn came from a model (None: no frame yet)
        self.files = FileActions(self)  # sessions, models, exports
        self.fastPath = FastPath(self)  # bfloat16 matmuls offered for a large model on the CPU
        self.menus = build_menus(self)

        self.generation = Generation(self)
        # an application that quits without closing this window still stops every thread first
        # (else Qt aborts: "QThread: Destroyed while thread ... is still running")
        QtWidgets.QApplication.instance().aboutToQuit.connect(self.stop_workers)
        self._connect()
        self.statusBar().addPermanentWidget(self.docks.fixButton)
        self.frameShown.connect(self.docks.show_frame)
        self.stateChanged.connect(self.docks.state_changed)
        self.focusDock.raise_()

        self._restore(state)

    def _build_central(self) -> None:
        """The controls on the left (scrolling), the maps on the right."""
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

    def _connect(self) -> None:
        """The controls', the maps' and the model view's requests."""
        self.panel.decoderPanel.generateRequested.connect(self.generation.generate)
        self.panel.decoderPanel.stopRequested.connect(self.generation.stop)
        self.panel.edited.connect(self.edit_config)
        self.panel.presetChosen.connect(self.apply_preset)
        self.panel.openModelRequested.connect(self.files.open_model_dialog)
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
            self.flow.submit(state.config, tokens)
            if tokens is None:  # the worker loads the model first
                self.flow.show_loading(self.flow.name)
        self.panel.show_hide_special(state.hide_special)
        if not config_changed and self.frame is not None:
            self._draw()
        if state != old:  # a dock behind another tab follows when it comes into sight (visibilityChanged)
            self.docks.follow(state)  # the Interventions dock runs the model twice: never for a dock out of sight
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
        self.panel.show_message("")  # a stop's or a failure's line goes: this compute says how it ends
        self.flow.submit(self._state.config, check_tokens_now(self._state.config))

    def stop_compute(self) -> bool:
        """Stop the computation in progress (Esc): the maps keep the last result, or a large decoder's first maps
        with the rest of its run stopped (kept, F5 goes on from there); whether one was running."""
        rest = self.frame is not None and is_partial(self.frame)  # the rest of the shown request's run
        if (not self.flow.running and not rest) or not self.service.cancel():
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
        """Bring dock ``name`` (a row of ``present.docks.DOCK_ROWS``) in front; with ``keep`` (the command
        line's ``--dock``) it stays in front when the first model frame comes (the model view would)."""
        return self.docks.show_dock(name, keep)

    @property
    def lessons(self) -> LessonsPanel | None:
        """The Lessons dock's panel (None until Help → Lessons opens it)."""
        return self.docks.panel("lessons")

    @property
    def lessonsDock(self) -> QtWidgets.QDockWidget | None:
        return self.docks.dock("lessons")

    def open_lessons(self, name: str | None = None, step: int | None = None) -> LessonsPanel:
        """Show the Lessons dock (made on first use), at ``name`` and ``step`` or where the learner left off."""
        return self.docks.open_lessons(name, step)

    def _lesson_state(self, state: ViewState) -> None:
        """A lesson's state: shown; the person's own, from before the lesson, is what closing the window saves
        while the lesson's input is shown (a later start opened on the lesson's sentence and sizes)."""
        if self._before_lesson is None:
            self._before_lesson = self._state
        self.set_state(state)

    def _on_cell_clicked(self, field: str, head: int, row: int, column: int) -> None:
        """A cell of alpha: the Why dock, if in sight, splits that score into its components' terms."""
        if field == "weights" and head >= 0 and in_sight(self.docks.docks["why"]):
            self.docks.panels["why"].show_score(head, row, column)

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
            QtCore.QTimer.singleShot(0, lambda: self.docks.first_height(self.focusDock, max(FIRST_DOCK_H,
                                                                                           self.height() // 5)))
        # alpha is what a learner came for: a new start shows it first, its neighbours beside it
        if isinstance(start, AttentionConfig):  # options on the command line
            start = ViewState(start, focus="weights")
        state = start or self.settings.state() or ViewState(focus="weights")
        try:
            check_tokens_now(state.config)
        except UserError:
            state = ViewState()
        self.set_state(state)

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
        self.failed_config = None
        self.flow.shown(frame)  # the cover lifts; a model now in memory shows its chips at once
        partial = is_partial(frame)  # a large decoder's first maps: the rest of its run is to come
        self.panel.decoderPanel.show_next_tokens(result.next_tokens, pending=partial)
        fitted = self._state.fitted(result)
        if fitted != self._state:
            self._state = fitted
            self.stateChanged.emit(fitted)
        self._draw(started)
        self.statusLabel.setText(frame_status(frame))
        self.fastPath.check(result.config)
        if self._invalid:  # a frame still in flight must not hide a newer problem
            self._show_invalid(self._invalid)
        elif result.config.model is not None:  # a sentence the model cannot read: said where the person types
            unknown = unknown_note(result.config, tokens_for(result.config))
            what_if = result.resolved.what_if_text()  # a model run changed by an option it lacks: never unsaid
            if unknown or what_if:
                self.panel.show_message("⚠ " + " · ".join(t for t in (what_if, unknown) if t))
        self.frameShown.emit(frame)
        if not partial:  # a generation step goes on once its sentence's whole run is shown
            self.generation.shown(result.config)

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
                self.docks.show_model_dock(model_mode, result)
                self.layout().activate()
        self.docks.settle()  # the first frame is drawn: the docks are the person's from here on
        self.pipeline.show_frame(self.frame, state.head, state.token, hidden, state.focus, state.scales, started)
        self.focus.show_walk(result, state.token, state.head)
        if partial:  # not the last sentence's grid: this one's comes with its whole run
            self.modelView.show_empty(f"every layer's α comes when the model's run finishes ({result.model_run.pending}"
                                      f" of {len(result.resolved.layers)} layers run)")
        elif model_mode:  # in a turn of its own where the canvas draws in steps (a first frame of many heads)
            self.canvas.draw_beside(lambda: self.docks.draw_model_view(self.frame, self._state, self.hidden_tokens()))

    def hidden_tokens(self) -> tuple[int, ...]:
        """Token indices left out of the maps: the model's special tokens, when asked."""
        return special_tokens(self.frame.result) if self._state.hide_special and self.frame else ()

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
        self.generation.shutdown()
        self.docks.shutdown()

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
        the config's model becomes that path, a Hugging Face folder (``engine.readers.hf``)."""
        self.edit_config({"model": folder, "sentence": sentence})

"""The compute in flight: the window's requests to its worker, the busy cover and the model's load while they run,
and what a stop or a failure says.

``MainWindow`` owns one ``ComputeFlow`` (``window.flow``); it asks through ``submit`` and draws what comes back
(``MainWindow.show_frame``), while the flow greys the old maps, shows the load's progress under the sentence and
in the status bar, and says why a request came to nothing.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets

from ..engine import AttentionConfig, check_tokens_now
from ..engine.model.plan import plan
from ..present.frame import DISPLAY_MAX, Frame, held_text
from ..present.runner import Failure, is_partial
from .worker import ComputeService

BUSY_MS = 150  # a compute shorter than this never greys the maps: it would just flicker


def model_name(config: AttentionConfig) -> str:
    """The short name of ``config``'s model ("SmolLM2-135M"), "random weights" without one."""
    if config.model is None:
        return "random weights"
    spec = plan(config).spec
    assert spec is not None  # a config naming a model plans with its spec
    return spec.label.split(" (")[0]


def long_compute(config: AttentionConfig, tokens) -> bool:
    """Whether computing ``config`` takes long enough to mark the old maps at once: a model still to load,
    a model over a few hundred tokens, or a streamed input (``tokens`` None: the model loads first)."""
    if tokens is None:
        return True
    T = len(tokens.tokens)
    return T > DISPLAY_MAX or (config.model is not None and T > 128)


def frame_status(frame: Frame) -> str:
    """The status line under the maps for ``frame``: a saturation warning and a first-maps note first (the notes
    after them are cut on a small screen), then the sizes, what is held, the device and the time."""
    result = frame.result
    dims = result.config.dims
    note = ("  ·  note: " + "; ".join(result.notes)) if result.notes else ""
    warning = f"⚠ {frame.saturation.text}  ·  " if frame.saturation is not None else ""
    if is_partial(frame):
        warning += (f"first maps: {result.model_run.pending} of {len(result.resolved.layers)} "
                    "layers run, the rest of the run is computing  ·  ")
    return (f"{warning}T = {result.seq_len:,}  ·  V = {len(result.vocab):,}  ·  h = {result.heads}  ·  "
            f"d_model = {dims.d_model}, d_k = {dims.d_k}, d_v = {dims.d_v}  ·  "
            f"{held_text(result)}  ·  "
            f"{result.device}, {result.config.dtype}  ·  {result.elapsed_ms:.2f} ms{note}")


class ComputeFlow(QtCore.QObject):
    """The requests in flight of ``window`` (a ``MainWindow``: its state, frame, cover, panel and signals): the worker
    (``service``), the busy cover and the model's load.

    Attributes
    ----------
    service : ComputeService
        The worker thread the window's configs are computed on.
    shown_id : int
        The request whose frame (or failure) the window shows.
    asked_tokens : Tokens or None
        The newest request's tokens (None: its model loads first).
    progress : tuple of int
        The newest request's model run: layers done, layers.
    """

    def __init__(self, window: Any):
        super().__init__(window)
        self.window = window
        self.loading: str | None = None  # the short name of the model the worker loads before the next frame
        self.name = "random weights"  # the newest request's model, as the cover says it
        self.progress = (0, 0)
        self.asked_tokens = None
        self.shown_id = 0
        self.label, self.bar = self._status_bar()
        self.timer = QtCore.QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(BUSY_MS)
        self.timer.timeout.connect(self.show_busy)
        self.service = ComputeService(window)
        self.service.resultReady.connect(window.show_frame)
        self.service.failed.connect(self.on_failed)
        self.service.loadProgress.connect(self.on_load_progress)
        self.service.layerProgress.connect(self.on_layer_progress)

    def _status_bar(self) -> tuple[QtWidgets.QLabel, QtWidgets.QProgressBar]:
        """The status line and the model load's progress bar."""
        bar_host = self.window.statusBar()
        label = QtWidgets.QLabel()
        label.setObjectName("statusLabel")
        bar_host.addWidget(label, 1)
        bar = QtWidgets.QProgressBar()
        bar.setObjectName("loadBar")
        bar.setRange(0, 100)
        bar.setFixedWidth(200)
        bar.hide()
        bar_host.addPermanentWidget(bar)
        return label, bar

    def submit(self, config: AttentionConfig, tokens) -> None:
        """Compute ``config`` (``tokens``: its tokens, None while its model loads): a long input greys the old
        maps at once, any other after the busy timer."""
        self.progress, self.asked_tokens, self.name = (0, 0), tokens, model_name(config)
        self.service.submit(config)
        if self.service.latest_id != self.shown_id and long_compute(config, tokens):
            self.show_busy()  # a long input: the old maps are marked at once, not after the timer
        self.timer.start()

    @property
    def running(self) -> bool:
        """Whether a newer request than the shown one is in flight."""
        return self.service.latest_id != self.shown_id

    def show_busy(self) -> None:
        """Grey the maps and say what is computed (a long input at once; any other after the busy timer: fast
        computes would just flicker)."""
        if not self.running:
            return
        w = self.window
        if w.frame is None:
            self.label.setText("computing the first result…")
        else:  # the shown frame's line, never a stop's or a failure's from before this compute
            self.label.setText(frame_status(w.frame) + "  ·  computing… (the maps show the previous result)")
        tokens = self.asked_tokens if self.loading is None else None
        what = (f"loading {self.name}, then computing" if tokens is None
                else f"computing T = {len(tokens.tokens):,} tokens with {self.name}")
        if not w.cover.covering or w.cover.what != what:
            w.cover.cover(what, previous=w.frame is not None)
            if self.progress[1]:
                w.cover.set_progress(*self.progress)
        w.panel.decoderPanel.set_stale(True)
        w.modelView.set_stale(True)  # its grid is the previous text's
        w.focus.setEnabled(False)  # the walk too shows the previous result

    def uncover(self) -> None:
        w = self.window
        w.cover.uncover()
        w.panel.decoderPanel.set_stale(False)
        # after a stop or a failure the grid stays greyed while it is another text's than the one asked
        w.modelView.set_stale(w.frame is not None and w.failed_config is not None
                              and w.frame.result.config != w.failed_config)
        w.focus.setEnabled(True)

    def loaded(self) -> None:
        """The model the state's config names is in memory: its tokens under the sentence at once."""
        config = self.window.state.config
        tokens = check_tokens_now(config)
        if tokens is not None:
            self.window.panel.show_tokens(config, tokens)
            self.asked_tokens = tokens
            self.show_loading(None)
        self.window.fastPath.check(config)  # before the first sentence's run ends: the fast path, where it helps

    def on_layer_progress(self, done: int, total: int) -> None:
        self.progress = (done, total)
        if self.loading is not None:  # the model is in memory now: its tokens and the cover say what is computed
            self.loaded()
            if self.window.cover.covering and self.asked_tokens is not None:
                self.show_busy()
        if self.window.cover.covering:
            self.window.cover.set_progress(done, total)

    def show_loading(self, name: str | None, done: int = 0, total: int = 0) -> None:
        """Say under the sentence and in the status bar that the model ``name`` loads (None: it is done)."""
        self.loading = name
        panel = self.window.panel
        if name is None:
            panel.show_loading("")
            self.bar.hide()
            return
        if total:
            percent = round(100 * done / total)
            text = f"building {name}'s tokenizer into the cache (only the first time), {percent} %"
        else:
            percent = 0
            text = f"loading {name}… " + ("(the maps show the previous result)" if self.window.frame is not None
                                          else "then computing the first result")
        panel.show_loading(text)
        self.bar.setValue(percent)
        self.bar.setFormat(f"{name}: %p %")
        self.bar.show()

    def on_load_progress(self, done: int, total: int) -> None:
        if self.loading is not None:
            self.show_loading(self.loading, done, total)
            cover = self.window.cover
            if cover.covering and total:  # a first start's cover says how far the tokenizer is
                cover.bar.setRange(0, total)
                cover.bar.setValue(done)
                cover.bar.setFormat("building the tokenizer (only the first time): %p %")

    def shown(self, frame: Frame) -> None:
        """``frame`` is the window's now: the cover lifts and a loaded model's chips come at once."""
        self.shown_id = frame.request_id
        self.uncover()
        if self.loading is not None:
            self.loaded()
            self.show_loading(None)

    def on_failed(self, failure: Failure) -> None:
        """The newest request failed or was stopped: say so under the sentence and in the status bar; a device
        that failed gives way to the last one that worked."""
        w, config = self.window, failure.config
        self.shown_id = failure.request_id
        w.failed_config = config
        self.show_loading(None)
        self.uncover()
        w.generation.stop()
        first_line = failure.message.splitlines()[0]
        if failure.cancelled:
            done, total = self.progress
            where = f" after {done} of {total} layers" if total else ""
            shows = ("this text's first maps" if w.frame is not None and is_partial(w.frame)
                     and w.frame.result.config == config else "the previous result")
            first_line = (f"Stopped{where}: the maps show {shows}; edit the text, "
                          f"or press F5 to compute it again")
            w.panel.show_message(first_line)
            self.label.setText(first_line)
            w.computeFailed.emit(first_line)
            return
        if failure.device_error and config.device != w.last_good_device:
            first_line += f" — back on {w.last_good_device}"
            w.set_state(w.state.with_config(device=w.last_good_device))
        w.panel.show_message(first_line)
        self.label.setText(f"⚠ {first_line} — the maps show the last good result")
        w.computeFailed.emit(first_line)

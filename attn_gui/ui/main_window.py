"""The explorer window: controls on the left, the pipeline of maps, the token walk below."""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import AttentionConfig
from ..present.frame import Frame
from ..present.resources import example_sentences
from ..present.runner import Failure
from ..render.figure import PipelineView
from ..render.model_view import ModelView
from . import map_menu
from .controls import ControlPanel
from .settings import Settings
from .token_focus import TokenFocus
from .worker import ComputeService


class MainWindow(QtWidgets.QMainWindow):
    """Attention Explorer's main window.

    Parameters
    ----------
    config : AttentionConfig, optional
        Start from this config instead of the saved one (or the default).
    settings : Settings, optional
        Where to read and save the window's settings.

    Signals
    -------
    frameShown(Frame)
        A new result has been drawn in every map.
    computeFailed(str)
        The newest request failed; the message is also shown under the sentence.
    """

    frameShown = QtCore.Signal(object)
    computeFailed = QtCore.Signal(str)

    def __init__(self, config: AttentionConfig | None = None, settings: Settings | None = None):
        super().__init__()
        self.setWindowTitle("Attention Explorer")
        self.setObjectName("mainWindow")
        self.settings = settings or Settings()
        self.frame: Frame | None = None
        self.last_good_device = "cpu"

        self.panel = ControlPanel()
        scroll = QtWidgets.QScrollArea()
        scroll.setObjectName("controlScroll")
        scroll.setWidget(self.panel)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(330)
        self.pipeline = PipelineView(on_new_view=map_menu.install)
        self.splitter = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.splitter.addWidget(scroll)
        self.splitter.addWidget(self.pipeline)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([340, 1260])
        self.setCentralWidget(self.splitter)

        self.focus = TokenFocus()
        dock = QtWidgets.QDockWidget("Follow one token", self)
        dock.setObjectName("tokenFocusDock")
        dock.setWidget(self.focus)
        self.addDockWidget(QtCore.Qt.DockWidgetArea.BottomDockWidgetArea, dock)
        self.focusDock = dock
        self.resizeDocks([dock], [170], QtCore.Qt.Orientation.Vertical)

        self.modelView = ModelView()
        model_dock = QtWidgets.QDockWidget("Model view: α of every layer (rows) and head (columns); click one", self)
        model_dock.setObjectName("modelViewDock")
        model_dock.setWidget(self.modelView)
        self.addDockWidget(QtCore.Qt.DockWidgetArea.BottomDockWidgetArea, model_dock)
        self.tabifyDockWidget(dock, model_dock)
        dock.raise_()
        model_dock.hide()
        self.modelDock = model_dock

        self.statusLabel = QtWidgets.QLabel()
        self.statusLabel.setObjectName("statusLabel")
        self.statusBar().addWidget(self.statusLabel, 1)
        self._build_menus(dock)

        self.failed_config: AttentionConfig | None = None
        self._invalid = ""
        self._shown_id = 0
        self._busy_timer = QtCore.QTimer(self)
        self._busy_timer.setSingleShot(True)
        self._busy_timer.setInterval(150)
        self._busy_timer.timeout.connect(self._show_busy)
        self.service = ComputeService(self)
        self.service.resultReady.connect(self.show_frame)
        self.service.failed.connect(self._on_failed)
        self.panel.configChanged.connect(self._on_config)
        self.panel.configInvalid.connect(self._on_invalid)
        self.pipeline.tokenSelected.connect(self._on_token)
        self.pipeline.headSelected.connect(lambda _h: (self._refresh_focus(), self._refresh_model_view()))
        self.modelView.headPicked.connect(self._on_head_picked)
        self.panel.hideSpecialCheck.toggled.connect(self._on_hide_special)

        self._restore(config)

    # menus -----------------------------------------------------------------------------------

    def _build_menus(self, dock: QtWidgets.QDockWidget) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.openSessionAction = file_menu.addAction("Open session…", self.open_session_dialog)
        self.openSessionAction.setObjectName("openSessionAction")
        self.openSessionAction.setShortcut(QtGui.QKeySequence.StandardKey.Open)
        self.recentMenu = file_menu.addMenu("Recent sessions")
        self.recentMenu.aboutToShow.connect(self._fill_recent)
        self.saveSessionAction = file_menu.addAction("Save session…", self.save_session_dialog)
        self.saveSessionAction.setObjectName("saveSessionAction")
        self.saveSessionAction.setShortcut(QtGui.QKeySequence.StandardKey.Save)
        file_menu.addSeparator()
        self.exportAllAction = file_menu.addAction("Export all…", self.export_all)
        self.exportAllAction.setObjectName("exportAllAction")
        self.exportAllAction.setShortcut(QtGui.QKeySequence("Ctrl+E"))
        self.exportAllAction.setToolTip("Every map as PNG and SVG, the whole figure, every tensor as .npy "
                                        "and .csv, and manifest.json, into one folder")
        file_menu.addSeparator()
        file_menu.addAction("Quit", self.close, QtGui.QKeySequence.StandardKey.Quit)
        view_menu = self.menuBar().addMenu("&View")
        view_menu.addAction(dock.toggleViewAction())
        focus = view_menu.addAction("Edit the sentence", self.panel.focus_sentence)
        focus.setShortcut(QtGui.QKeySequence("Ctrl+L"))
        presets = self.menuBar().addMenu("&Presets")
        for i in range(1, self.panel.presetCombo.count()):
            name = self.panel.presetCombo.itemData(i)
            presets.addAction(name, lambda i=i: self.panel._apply_preset(i))
        examples = presets.addMenu("Example sentences")
        examples.setObjectName("examplesMenu")
        for sentence in example_sentences():
            examples.addAction(sentence, lambda s=sentence: self.panel.sentenceInput.setPlainText(s))
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction("How to read the maps", self._show_help)

    def _show_help(self) -> None:
        QtWidgets.QMessageBox.information(
            self, "How to read the maps",
            "Each map is one step of self-attention, left to right:\n\n"
            "X (one row per token) is projected by W_q, W_k, W_v into Q, K, V.\n"
            "omega = Q K^T compares every query row with every key column.\n"
            "omega' divides by sqrt(d_k) (and the temperature); hatched cells are masked.\n"
            "alpha = softmax(omega') over each row: every row sums to 1 (colour scale fixed 0..1).\n"
            "Z = alpha V mixes the values; the heads are concatenated and multiplied by W_O.\n\n"
            "Signed maps use blue for negative, white for 0, red for positive, scaled to the largest "
            "magnitude. Hover a cell for its exact value; click a row to follow that token; "
            "right-click a map to export it; scroll to zoom.")

    # compute flow ----------------------------------------------------------------------------

    def _restore(self, config: AttentionConfig | None) -> None:
        geometry = self.settings.get("geometry")
        if not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1600, 1000)
        state = self.settings.get("window_state")
        if not state.isEmpty():
            self.restoreState(state)
        splitter = self.settings.get("splitter")
        if not splitter.isEmpty():
            self.splitter.restoreState(splitter)
        start = config or self.settings.config() or AttentionConfig()
        self.panel.set_config(start)

    def _on_config(self, config: AttentionConfig) -> None:
        self._invalid = ""
        self.service.submit(config)
        self._busy_timer.start()

    def _show_busy(self) -> None:
        # only a compute slower than a few frames says so; fast ones would just flicker
        if self.service.latest_id != self._shown_id:
            base = self.statusLabel.text().split("  ·  ⏳")[0]
            self.statusLabel.setText(base + "  ·  ⏳ computing… (the maps show the previous result)")

    def _on_invalid(self, message: str) -> None:
        self._invalid = message
        self.statusLabel.setText(f"⚠ {message} — the maps show the last valid input")

    def show_frame(self, frame: Frame) -> None:
        """Draw ``frame`` in every map, the token walk and the status bar."""
        result = frame.result
        self.last_good_device = result.config.device
        first = self.frame is None
        self.frame = frame
        self._shown_id = frame.request_id
        self.failed_config = None
        if first and self.pipeline.token is None and result.seq_len > 1:
            self.pipeline.token = 1  # the tutorials' walk follows x_2 "in"
        self.pipeline.show_frame(frame)
        self._refresh_focus()
        self._refresh_model_view()
        cfg = result.config
        dims = cfg.dims
        note = ("  ·  note: " + "; ".join(result.notes)) if result.notes else ""
        self.statusLabel.setText(
            f"T = {result.seq_len:,}  ·  V = {len(result.vocab):,}  ·  h = {result.heads}  ·  "
            f"d_model = {dims.d_model}, d_k = {dims.d_k}, d_v = {dims.d_v}  ·  "
            f"X {result.seq_len}×{dims.d_model}, alpha {result.heads}×{result.seq_len}×{result.seq_len}  ·  "
            f"{result.device}, {cfg.dtype}  ·  {result.elapsed_ms:.2f} ms{note}")
        self.panel.show_message(self._invalid)  # a frame still in flight must not hide a newer problem
        if self._invalid:
            self._on_invalid(self._invalid)
        self.frameShown.emit(frame)

    def _on_failed(self, failure: Failure) -> None:
        config = failure.config
        self._shown_id = failure.request_id
        self.failed_config = config
        first_line = failure.message.splitlines()[0]
        if failure.device_error and config.device != self.last_good_device:
            first_line += f" — back on {self.last_good_device}"
            self.panel.set_device(self.last_good_device)
            self.panel.force_emit()
        self.panel.show_message(first_line)
        self.statusLabel.setText(f"⚠ {first_line} — the maps show the last good result")
        self.computeFailed.emit(first_line)

    def _refresh_model_view(self) -> None:
        if self.frame is None or "layer_weights" not in self.frame.arrays:
            self.modelDock.hide()
            return
        if self.modelDock.isHidden():  # entering model mode: give the 6 x 12 grid room, in front
            self.modelDock.show()
            self.modelDock.raise_()
            self.resizeDocks([self.modelDock], [340], QtCore.Qt.Orientation.Vertical)
        self.modelView.set_weights(self.frame.arrays["layer_weights"], self.frame.result.config.layer,
                                   self.pipeline.head, self.pipeline.hidden(), self.frame.result.seq_len)

    def _on_head_picked(self, layer: int, head: int) -> None:
        if self.frame is not None and layer == self.frame.result.config.layer:
            self.pipeline.select_head(head)
        else:
            self.pipeline.head = head  # shown when the new layer's frame arrives
            self.panel.layerSpin.setValue(layer)

    def _on_hide_special(self, hide: bool) -> None:
        self.pipeline.set_hide_special(hide)
        self._refresh_model_view()

    def _on_token(self, token: int) -> None:
        self._refresh_focus()
        self.focusDock.show()

    def _refresh_focus(self) -> None:
        result = self.frame.result if self.frame else None
        self.focus.show_walk(result, self.pipeline.token, self.pipeline.head)

    def select_token(self, token: int | None) -> None:
        """Follow query ``token`` (as a click on its row does)."""
        self.pipeline.select_token(token)
        self._refresh_focus()

    # sessions --------------------------------------------------------------------------------

    def _layout(self) -> dict[str, str]:
        encode = lambda b: bytes(b.toBase64()).decode("ascii")  # noqa: E731
        return {"geometry": encode(self.saveGeometry()), "window_state": encode(self.saveState()),
                "splitter": encode(self.splitter.saveState())}

    def save_session(self, path: str) -> None:
        """Save the shown config and the window layout to ``path`` (OSError if it cannot)."""
        from ..present.session import save_session

        config = self.frame.result.config if self.frame else self.panel.config()
        save_session(path, config, self._layout())
        self.settings.add_recent_session(str(path))
        self.statusBar().showMessage(f"Saved session to {path}", 6000)

    def open_session(self, path: str) -> bool:
        """Load ``path``; on any problem say why in a dialog and change nothing."""
        from ..present.session import load_session

        try:
            config, layout = load_session(path)
        except (OSError, ValueError) as exc:
            QtWidgets.QMessageBox.warning(self, "Cannot open session", f"{path}\n\n{exc}")
            return False
        decode = lambda s: QtCore.QByteArray.fromBase64(s.encode("ascii"))  # noqa: E731
        if "geometry" in layout:
            self.restoreGeometry(decode(layout["geometry"]))
        if "window_state" in layout:
            self.restoreState(decode(layout["window_state"]))
        if "splitter" in layout:
            self.splitter.restoreState(decode(layout["splitter"]))
        self.panel.set_config(config)
        self.settings.add_recent_session(str(path))
        return True

    def save_session_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self, "Save session", self.settings.get("session_dir") or "attention-session.json",
            "Attention Explorer session (*.json)")
        if not path:
            return
        try:
            self.save_session(path)
        except (OSError, ValueError) as exc:
            QtWidgets.QMessageBox.warning(self, "Cannot save session", f"{path}\n\n{exc}")

    def open_session_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Open session", self.settings.get("session_dir"), "Attention Explorer session (*.json)")
        if path:
            self.open_session(path)

    def _fill_recent(self) -> None:
        self.recentMenu.clear()
        paths = self.settings.recent_sessions()
        for path in paths:
            self.recentMenu.addAction(path, lambda p=path: self.open_session(p))
        if not paths:
            self.recentMenu.addAction("(none yet)").setEnabled(False)

    # export ----------------------------------------------------------------------------------

    def export_all(self, folder: str | None = None) -> list | None:
        """Write every map, the figure, the tensors and a manifest into ``folder`` (asks if None)."""
        from ..export.bundle import export_all
        from ..engine import UserError

        if self.frame is None:
            return None
        if folder is None:
            folder = QtWidgets.QFileDialog.getExistingDirectory(
                self, "Export all maps and tensors into…", self.settings.get("export_dir"))
            if not folder:
                return None
        progress = QtWidgets.QProgressDialog("Exporting…", "", 0, 100, self)
        progress.setCancelButton(None)
        progress.setMinimumDuration(400)
        progress.setWindowModality(QtCore.Qt.WindowModality.WindowModal)

        def report(done: int, total: int) -> None:
            progress.setMaximum(total)
            progress.setValue(done)

        try:
            written = export_all(self.frame, folder, figure=self.pipeline, progress=report)
        except UserError as exc:
            progress.close()
            QtWidgets.QMessageBox.warning(self, "Export failed", str(exc))
            return None
        progress.close()
        self.settings.set("export_dir", str(folder))
        self.statusBar().showMessage(f"Exported {len(written)} files to {folder}", 8000)
        return written

    # lifetime --------------------------------------------------------------------------------

    def closeEvent(self, event: QtGui.QCloseEvent) -> None:
        self.settings.set("geometry", self.saveGeometry())
        self.settings.set("window_state", self.saveState())
        self.settings.set("splitter", self.splitter.saveState())
        if self.frame is not None:
            self.settings.set_config(self.frame.result.config)
        self.settings.sync()
        self.service.shutdown()
        super().closeEvent(event)

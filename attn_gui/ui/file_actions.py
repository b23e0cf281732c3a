"""The window's file actions: open and save sessions (the whole view state), open a model folder, export everything."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from ..engine import model_spec, UserError, check_tokens_now
from ..engine.model.whole import model_whole
from ..engine.train.checkpoint import probe_sentence
from ..export import bundle, page
from ..export.bundle import ExportTooLarge, duration, export_all
from ..export.files import human
from ..export.folder import Cancelled, FolderInUse
from ..present.session import load_session, save_session


class FileActions:
    """Sessions, models and exports of ``window`` (a ``MainWindow``: its state, settings, layout and frame).

    The window holds it as ``window.files``; the File menu's actions call it.
    """

    def __init__(self, window: Any):
        self.window = window
        self.modelsDialog: QtWidgets.QDialog | None = None  # File → Open model…'s list, while open

    def _layout_savers(self) -> dict:
        return {"geometry": (self.window.saveGeometry, self.window.restoreGeometry),
                "window_state": (self.window.saveState, self.window.restoreState),
                "splitter": (self.window.splitter.saveState, self.window.splitter.restoreState)}

    def save_session(self, path: str) -> None:
        """Save the view state and the window layout to ``path`` (WriteError if it cannot)."""
        layout = {key: bytes(save().toBase64()).decode("ascii") for key, (save, _) in self._layout_savers().items()}
        save_session(path, self.window.state, layout)
        self._remember_session(path)
        self.window.statusBar().showMessage(f"Saved session to {path}", 6000)

    def open_session(self, path: str) -> bool:
        """Load ``path``; on any problem say why in a dialog and change nothing."""
        try:
            state, layout = load_session(path)
            check_tokens_now(state.config)  # a model not yet loaded: the worker checks
        except (OSError, ValueError) as exc:
            QtWidgets.QMessageBox.warning(self.window, "Cannot open session", f"{path}\n\n{exc}")
            return False
        for key, (_, restore) in self._layout_savers().items():
            if key in layout:
                restore(QtCore.QByteArray.fromBase64(layout[key].encode("ascii")))
        self.window.set_state(state)
        self._remember_session(path)
        return True

    def _remember_session(self, path: str) -> None:
        self.window.settings.add_recent_session(str(path))
        self.window.settings.set("session_dir", str(Path(path).parent))

    def save_session_dialog(self) -> None:
        start = str(Path(self.window.settings.get("session_dir") or ".") / "attention-session.json")
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self.window, "Save session", start,
                                                        "Attention Explorer session (*.json)")
        if not path:
            return
        try:
            self.save_session(path)
        except UserError as exc:
            QtWidgets.QMessageBox.warning(self.window, "Cannot save session", f"{path}\n\n{exc}")

    def open_session_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self.window, "Open session", self.window.settings.get("session_dir"),
            "Attention Explorer session (*.json)")
        if path:
            self.open_session(path)

    def fill_recent(self) -> None:
        _fill(self.window.menus.recent_sessions, self.window.settings.recent("sessions"), self.open_session)

    def fill_recent_models(self) -> None:
        _fill(self.window.menus.recent_models, self.window.settings.recent("models"), self.open_model)

    def open_model(self, path: str) -> bool:
        """Show the model at ``path`` from its first layer; on any problem say why in a dialog and change nothing.

        A folder holds a Hugging Face checkpoint (config.json, safetensors, tokenizer.json)
        of a family ``engine.readers.hf`` declares; a .gguf file a llama.cpp model of an
        architecture ``engine.readers.gguf`` declares. It is checked whole now
        (``engine.sources.whole``: a folder's weights mapped and its tokenizer read, a GGUF's tensor
        shapes and vocabulary), so a refused model never switches nor enters Recent models; a
        GGUF's weights are converted by the worker, which shows the load's progress.
        """
        try:
            spec = model_spec(path)  # config.json or the header only: a wrong model is refused before anything changes
            probe = probe_sentence(path)  # a checkpoint of attn-gui train opens on its task's probe
            config = self.window.state.config.replace(model=path, layer=0, ablate=(),
                                               **({"sentence": probe} if probe else {}))
            check_tokens_now(config)  # a model in memory: the sentence must give it tokens (else its worker checks)
            model_whole(path)  # its weights and tokenizer too: a model refused later never becomes the config
        except (UserError, KeyError) as exc:
            QtWidgets.QMessageBox.warning(self.window, "Cannot open model", f"{path}\n\n{exc}")
            return False
        self.window.set_state(self.window.state.replace(config=config))
        self.window.settings.add_recent("models", str(path))
        self.window.settings.set("model_dir", str(Path(path).parent))
        self.window.statusBar().showMessage(f"Opened {spec.label} from {path}", 8000)
        return True

    def open_listed_model_dialog(self) -> None:
        """File → Open model…: the models on this computer (``ModelsDialog``); the one chosen opens as
        ``open_model`` opens it, and the list stays open when it is refused."""
        from .models_dialog import ModelsDialog

        dialog = ModelsDialog(self.window)
        dialog.setAttribute(QtCore.Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(lambda path: self.open_model(path) and dialog.accept())
        dialog.folderRequested.connect(lambda: (dialog.reject(), self.open_model_dialog()))
        dialog.ggufRequested.connect(lambda: (dialog.reject(), self.open_gguf_dialog()))
        self.modelsDialog = dialog
        dialog.open()

    def open_model_dialog(self) -> None:
        path = QtWidgets.QFileDialog.getExistingDirectory(
            self.window, "Open a model folder (config.json, *.safetensors, tokenizer.json)",
            self.window.settings.get("model_dir"))
        if path:
            self.open_model(path)

    def open_gguf_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self.window, "Open a GGUF model file", self.window.settings.get("model_dir"), "GGUF model (*.gguf)")
        if path:
            self.open_model(path)

    def export_all(self, folder: str | None = None, overwrite: bool = False, confirmed: bool = False) -> list | None:
        """Write every map, the figure, the tensors and a manifest into ``folder`` (asks if None).

        The folder is written whole (see ``export.folder``); the progress dialog's Cancel
        stops between files and leaves the folder as it was. A folder chosen in the dialog
        that holds other files asks before writing among them, and so does an export
        estimated larger than 1 GiB or longer than a minute (``confirmed`` skips that question).
        """
        if self.window.frame is None:
            return None
        asked = folder is None
        if asked:
            folder = QtWidgets.QFileDialog.getExistingDirectory(
                self.window, "Export all maps and tensors into…", self.window.settings.get("export_dir"))
            if not folder:
                return None
        progress = QtWidgets.QProgressDialog("Exporting…", "Cancel", 0, 100, self.window)
        progress.setObjectName("exportProgress")
        progress.setMinimumDuration(400)
        progress.setWindowModality(QtCore.Qt.WindowModality.WindowModal)

        def report(done: int, total: int) -> None:
            progress.setMaximum(total)
            progress.setValue(done)  # modal: lets the Cancel button be pressed

        try:
            written = export_all(self.window.frame, folder, figure=self.window.canvas, progress=report,
                                 cancel=progress.wasCanceled, overwrite=overwrite,
                                 confirm_over=None if confirmed else bundle.CONFIRM_BYTES,
                                 confirm_seconds=None if confirmed else bundle.CONFIRM_SECONDS)
        except ExportTooLarge as exc:
            progress.close()
            about = f"about {human(exc.need)} in about {duration(exc.seconds)}"
            if QtWidgets.QMessageBox.question(
                    self.window, "Large export", f"This export would write {about} into {folder}.\n\n"
                                          f"Write it?") == QtWidgets.QMessageBox.StandardButton.Yes:
                return self.export_all(folder, overwrite=overwrite, confirmed=True)
            self.window.statusBar().showMessage(f"Export not written: {about} (nothing was written)", 8000)
            return None
        except FolderInUse as exc:
            progress.close()
            if asked and QtWidgets.QMessageBox.question(
                    self.window, "Folder not empty", f"{exc}\n\nWrite the export among these files? (They are kept.)"
            ) == QtWidgets.QMessageBox.StandardButton.Yes:
                return self.export_all(folder, overwrite=True)
            self.window.statusBar().showMessage(f"Export refused: {exc}", 8000)
            return None
        except Cancelled as exc:
            self.window.statusBar().showMessage(f"{str(exc).capitalize()}", 8000)
            return None
        except UserError as exc:
            QtWidgets.QMessageBox.warning(self.window, "Export failed", str(exc))
            return None
        finally:
            progress.close()
            progress.deleteLater()  # one dialog per export, not one kept per export
        self.window.settings.set("export_dir", str(folder))
        self.window.statusBar().showMessage(f"Exported {len(written)} files to {folder}", 8000)
        return written

    def export_page(self, path: str | None = None, confirmed: bool = False) -> Path | None:
        """Write the shown state as one self-contained HTML page (``export.page``) to ``path`` (asks if None).

        The page shows what the window shows: its head, followed token, hidden tokens and
        colour scales; a problem is said in a dialog and nothing is written.
        """
        if self.window.frame is None:
            return None
        if path is None:
            start = str(Path(self.window.settings.get("export_dir") or ".") / "attention.html")
            path, _ = QtWidgets.QFileDialog.getSaveFileName(self.window, "Export page", start, "HTML page (*.html)")
            if not path:
                return None
        state = self.window.state
        try:
            with _busy():
                written = page.export_page(
                    self.window.frame, path, state.head, state.token, state.hide_special, state.scales, state.focus,
                    confirm_over=None if confirmed else bundle.CONFIRM_BYTES,
                    confirm_seconds=None if confirmed else bundle.CONFIRM_SECONDS)
        except ExportTooLarge as exc:
            about = f"about {human(exc.need)} in about {duration(exc.seconds)}"
            if QtWidgets.QMessageBox.question(self.window, "Large page", f"This page would take {about}.\n\nWrite it?"
                                              ) == QtWidgets.QMessageBox.StandardButton.Yes:
                return self.export_page(path, confirmed=True)
            self.window.statusBar().showMessage(f"Page not written: {about}", 8000)
            return None
        except UserError as exc:
            QtWidgets.QMessageBox.warning(self.window, "Export failed", f"{path}\n\n{exc}")
            return None
        self.window.settings.set("export_dir", str(Path(path).parent))
        self.window.statusBar().showMessage(f"Exported the page to {path}", 8000)
        return written


@contextlib.contextmanager
def _busy():
    """A wait cursor while the window draws for a file."""
    QtWidgets.QApplication.setOverrideCursor(QtCore.Qt.CursorShape.WaitCursor)
    try:
        yield
    finally:
        QtWidgets.QApplication.restoreOverrideCursor()


def _fill(menu: QtWidgets.QMenu, paths: list[str], open_path) -> None:
    """``menu`` lists ``paths``, newest first; choosing one calls ``open_path(path)``."""
    menu.clear()
    for path in paths:
        menu.addAction(path, lambda p=path: open_path(p))
    if not paths:
        menu.addAction("(none yet)").setEnabled(False)

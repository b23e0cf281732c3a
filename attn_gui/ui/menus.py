"""The menu bar: files, view, presets and examples, help."""

from __future__ import annotations

from PySide6 import QtGui, QtWidgets

from ..engine import PRESETS
from ..present.resources import example_sentences

HELP = (
    "Each map is one step of self-attention, left to right:\n\n"
    "X (one row per token; with stable inputs a row depends only on the seed and its token, so a "
    "new word changes no other row) is projected by W_q, W_k, W_v into Q, K, V.\n"
    "omega = Q K^T compares every query row with every key column.\n"
    "omega' divides by sqrt(d_k) (and the temperature); hatched cells are masked.\n"
    "alpha = softmax(omega') over each row: every row sums to 1 (colour scale fixed 0..1).\n"
    "Z = alpha V mixes the values; the heads are concatenated and multiplied by W_O.\n\n"
    "Signed maps use blue for negative, white for 0, red for positive, scaled to the largest "
    "magnitude. Hover a cell for its exact value; click a row to follow that token; "
    "right-click a map to export it; scroll to zoom.")


def build_menus(win: QtWidgets.QMainWindow) -> None:
    """File (sessions, export), View, Presets (with example sentences) and Help, on ``ui.MainWindow`` ``win``."""
    file_menu = win.menuBar().addMenu("&File")
    win.openSessionAction = file_menu.addAction("Open session…", win.open_session_dialog)
    win.openSessionAction.setObjectName("openSessionAction")
    win.openSessionAction.setShortcut(QtGui.QKeySequence.StandardKey.Open)
    win.recentMenu = file_menu.addMenu("Recent sessions")
    win.recentMenu.aboutToShow.connect(win.fill_recent)
    win.saveSessionAction = file_menu.addAction("Save session…", win.save_session_dialog)
    win.saveSessionAction.setObjectName("saveSessionAction")
    win.saveSessionAction.setShortcut(QtGui.QKeySequence.StandardKey.Save)
    file_menu.addSeparator()
    win.exportAllAction = file_menu.addAction("Export all…", win.export_all)
    win.exportAllAction.setObjectName("exportAllAction")
    win.exportAllAction.setShortcut(QtGui.QKeySequence("Ctrl+E"))
    win.exportAllAction.setToolTip("Every map as PNG and SVG, the whole figure, every tensor as .npy "
                                   "and .csv, and manifest.json, into one folder")
    file_menu.addSeparator()
    file_menu.addAction("Quit", win.close, QtGui.QKeySequence.StandardKey.Quit)

    view_menu = win.menuBar().addMenu("&View")
    view_menu.addAction(win.focusDock.toggleViewAction())
    view_menu.addAction(win.modelDock.toggleViewAction())
    focus = view_menu.addAction("Focus on α (its neighbours beside it)", lambda: win.focus_on("weights"))
    focus.setObjectName("focusAlphaAction")
    every = view_menu.addAction("All maps", lambda: win.focus_on(None))
    every.setObjectName("allMapsAction")
    view_menu.addSeparator()
    edit = view_menu.addAction("Edit the sentence", win.panel.focus_sentence)
    edit.setShortcut(QtGui.QKeySequence("Ctrl+L"))

    presets = win.menuBar().addMenu("&Presets")
    for name in PRESETS:
        presets.addAction(name, lambda name=name: win.apply_preset(name))
    examples = presets.addMenu("Example sentences")
    examples.setObjectName("examplesMenu")
    for sentence in example_sentences():
        examples.addAction(sentence, lambda s=sentence: win.edit_config({"sentence": s}))

    help_menu = win.menuBar().addMenu("&Help")
    help_menu.addAction("How to read the maps",
                        lambda: QtWidgets.QMessageBox.information(win, "How to read the maps", HELP))

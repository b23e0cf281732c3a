"""The menu bar: files, view, presets and examples, help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6 import QtGui, QtWidgets

from ..engine import PRESETS
from ..present.resources import example_sentences
from .help import show_help


@dataclass(frozen=True)
class Menus:
    """The menus and actions that others reach (the window's file actions, tests)."""

    open_session: QtGui.QAction
    recent_sessions: QtWidgets.QMenu
    save_session: QtGui.QAction
    open_model: QtGui.QAction
    open_gguf: QtGui.QAction
    recent_models: QtWidgets.QMenu
    export_all: QtGui.QAction
    export_page: QtGui.QAction
    view: QtWidgets.QMenu
    help: QtGui.QAction
    lessons: QtGui.QAction


def _action(menu: QtWidgets.QMenu, text: str, slot, name: str, shortcut=None, tip: str = "") -> QtGui.QAction:
    action = menu.addAction(text, slot)
    action.setObjectName(name)
    if shortcut is not None:
        action.setShortcut(shortcut)
    if tip:
        action.setToolTip(tip)
    return action


def build_menus(win: Any) -> Menus:  # a MainWindow: importing it here would close a circle
    """File (sessions, export), View, Presets (with example sentences) and Help, on ``ui.MainWindow`` ``win``."""
    keys = QtGui.QKeySequence
    file_menu = win.menuBar().addMenu("&File")
    open_session = _action(file_menu, "Open session…", win.files.open_session_dialog, "openSessionAction",
                           keys.StandardKey.Open)
    recent_sessions = file_menu.addMenu("Recent sessions")
    recent_sessions.aboutToShow.connect(win.files.fill_recent)
    save_session = _action(file_menu, "Save session…", win.files.save_session_dialog, "saveSessionAction",
                           keys.StandardKey.Save)
    file_menu.addSeparator()
    open_model = _action(file_menu, "Open model…", win.files.open_listed_model_dialog, "openModelAction",
                         keys("Ctrl+Shift+O"),
                         "The models on this computer (the Hugging Face cache, Ollama, LM Studio), "
                         "or a Hugging Face model folder (config.json, *.safetensors, tokenizer.json): "
                         "BERT, RoBERTa, DistilBERT, GPT-2, Llama, Mistral, Qwen2, Qwen3")
    open_gguf = _action(file_menu, "Open GGUF file…", win.files.open_gguf_dialog, "openGgufAction",
                        tip="A llama.cpp model file on this computer (.gguf, quantized or not): Llama, "
                            "Mistral, SmolLM, TinyLlama, Qwen2")
    recent_models = file_menu.addMenu("Recent models")
    recent_models.aboutToShow.connect(win.files.fill_recent_models)
    file_menu.addSeparator()
    export_all = _action(file_menu, "Export all…", win.files.export_all, "exportAllAction", keys("Ctrl+E"),
                         "Every map as PNG and SVG, the whole figure, every tensor as .npy "
                         "and .csv, and manifest.json, into one folder")
    export_page = _action(file_menu, "Export page…", win.files.export_page, "exportPageAction",
                          tip="One HTML file to share: the maps, their values on hover and the token walk, "
                              "readable offline in any browser")
    file_menu.addSeparator()
    file_menu.addAction("Quit", win.close, keys.StandardKey.Quit)

    view_menu = win.menuBar().addMenu("&View")
    for entry in win.docks.view_actions("docks"):  # an entry for each row of the dock table with one
        view_menu.addAction(entry)
    view_menu.addSeparator()
    _action(view_menu, "Focus on α (its neighbours beside it)", lambda: win.focus_on("weights"), "focusAlphaAction")
    _action(view_menu, "All maps", lambda: win.focus_on(None), "allMapsAction")
    view_menu.addSeparator()
    view_menu.addAction("Edit the sentence", win.panel.focus_sentence).setShortcut(keys("Ctrl+L"))
    _action(view_menu, "Compute again", win.recompute, "recomputeAction", keys("F5"),
            "Compute the input again (after Esc stopped it, or a failure)")
    view_menu.addSeparator()
    for entry in win.docks.view_actions("insight"):
        view_menu.addAction(entry)

    presets = win.menuBar().addMenu("&Presets")
    for name in PRESETS:
        presets.addAction(name, lambda name=name: win.apply_preset(name))
    examples = presets.addMenu("Example sentences")
    examples.setObjectName("examplesMenu")
    for sentence in example_sentences():
        examples.addAction(sentence, lambda s=sentence: win.edit_config({"sentence": s}))

    help_menu = win.menuBar().addMenu("&Help")
    help_action = _action(help_menu, "How to read the maps", lambda: show_help(win), "helpAction",
                          keys.StandardKey.HelpContents)
    lessons = _action(help_menu, "Lessons", lambda: win.open_lessons(), "lessonsAction")
    return Menus(open_session, recent_sessions, save_session, open_model, open_gguf, recent_models, export_all,
                 export_page, view_menu, help_action, lessons)

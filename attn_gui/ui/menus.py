"""The menu bar: files, view, presets and examples, help."""

from __future__ import annotations

from PySide6 import QtGui, QtWidgets

from ..engine import PRESETS
from ..present.resources import example_sentences
from .help import show_help
from .lessons_panel import open_lessons

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
    win.openModelAction = file_menu.addAction("Open model…", win.open_listed_model_dialog)
    win.openModelAction.setObjectName("openModelAction")
    win.openModelAction.setShortcut(QtGui.QKeySequence("Ctrl+Shift+O"))
    win.openModelAction.setToolTip("The models on this computer (the Hugging Face cache, Ollama, LM Studio), "
                                   "or a Hugging Face model folder (config.json, *.safetensors, tokenizer.json): "
                                   "BERT, RoBERTa, DistilBERT, GPT-2, Llama, Mistral, Qwen2, Qwen3")
    win.openGgufAction = file_menu.addAction("Open GGUF file…", win.open_gguf_dialog)
    win.openGgufAction.setObjectName("openGgufAction")
    win.openGgufAction.setToolTip("A llama.cpp model file on this computer (.gguf, quantized or not): Llama, "
                                  "Mistral, SmolLM, TinyLlama, Qwen2")
    win.recentModelsMenu = file_menu.addMenu("Recent models")
    win.recentModelsMenu.aboutToShow.connect(win.fill_recent_models)
    file_menu.addSeparator()
    win.exportAllAction = file_menu.addAction("Export all…", win.export_all)
    win.exportAllAction.setObjectName("exportAllAction")
    win.exportAllAction.setShortcut(QtGui.QKeySequence("Ctrl+E"))
    win.exportAllAction.setToolTip("Every map as PNG and SVG, the whole figure, every tensor as .npy "
                                   "and .csv, and manifest.json, into one folder")
    win.exportPageAction = file_menu.addAction("Export page…", win.export_page)
    win.exportPageAction.setObjectName("exportPageAction")
    win.exportPageAction.setToolTip("One HTML file to share: the maps, their values on hover and the token walk, "
                                    "readable offline in any browser")
    file_menu.addSeparator()
    file_menu.addAction("Quit", win.close, QtGui.QKeySequence.StandardKey.Quit)

    view_menu = win.menuBar().addMenu("&View")
    view_menu.addAction(win.focusDock.toggleViewAction())
    view_menu.addAction(win.modelDock.toggleViewAction())
    view_menu.addAction(win.kvCacheDock.toggleViewAction())
    view_menu.addAction(win.interventionsDock.toggleViewAction())
    view_menu.addAction(win.whyDock.toggleViewAction())
    view_menu.addAction(win.trainDock.toggleViewAction())
    view_menu.addAction(win.corpusDock.toggleViewAction())
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
    win.helpAction = help_menu.addAction("How to read the maps", lambda: show_help(win))
    win.helpAction.setObjectName("helpAction")
    win.helpAction.setShortcut(QtGui.QKeySequence.StandardKey.HelpContents)
    win.lessonsAction = help_menu.addAction("Lessons", lambda: open_lessons(win))
    win.lessonsAction.setObjectName("lessonsAction")

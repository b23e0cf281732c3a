"""The control panel: one editor per declared config option, grouped, plus presets and tokens.

The panel never holds the truth. ``show_config`` shows a config; an edit emits
``edited`` with every change the user has made since the last config shown, and the
window decides (a valid change becomes the new view state, an invalid one a message
under the sentence while the controls keep showing what was typed).
"""

from __future__ import annotations

import html
import random
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import OPTIONS, PRESETS, AttentionConfig, Tokens
from ..engine.run.inputs import source_tokens_for
from ..engine.model.plan import plan
from .decoder_panel import DecoderPanel
from .editors import Editor, make_editor

FEW_CHIPS = 20  # a longer input shows its first tokens and a link to the whole list
MAX_CHIPS = 5000  # the whole list stops here ("… and N more")
# Where each option sits; an option missing here lands in "More", so a new one needs no edit.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Sentence", ("sentence", "source_sentence", "tokenizer")),
    ("Source", ("model", "layer", "ablate")),
    ("Sizes", ("d_model", "d_k", "d_v", "heads")),
    ("Inputs and weights", ("seed", "weight_seed", "inputs", "positional", "position_offset", "init", "bias")),
    ("Attention", ("layout", "projections", "similarity", "scale", "temperature", "causal",
                   "rope_base", "kv_heads", "window", "sink_tokens")),
    ("Compute", ("device", "dtype")),
)
LABELS = {"d_k": "d_q = d_k", "heads": "heads h", "init": "W init", "inputs": "X", "model": "weights"}


def breakable(text: str, every: int = 12) -> str:
    """``text`` with a zero-width space every ``every`` characters, so a long word wraps."""
    return "\u200b".join(text[i:i + every] for i in range(0, len(text), every))



def _note(name: str, style: str) -> QtWidgets.QLabel:
    """A hidden, word-wrapped one-line note of the panel (a message, the load's note, the fast path's offer)."""
    label = QtWidgets.QLabel()
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setStyleSheet(style)
    label.hide()
    return label

class ControlPanel(QtWidgets.QWidget):
    """All inputs of one attention computation, made from the config's declarations.

    Signals
    -------
    edited(dict)
        Field name -> value for every option the user changed since the last ``show_config``.
    presetChosen(str)
        A preset was picked (the window applies it, keeping the device).
    hideSpecialToggled(bool)
        "hide [CLS] and [SEP]" was toggled (a view choice, not a config field).
    openModelRequested()
        "Open…" beside the weights was pressed: the window asks for a model folder.
    """

    edited = QtCore.Signal(dict)
    presetChosen = QtCore.Signal(str)
    hideSpecialToggled = QtCore.Signal(bool)
    openModelRequested = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.editors: dict[str, Editor] = {name: make_editor(opt) for name, opt in OPTIONS.items()}
        self._pending: dict[str, Any] = {}
        for editor in self.editors.values():
            for widget in (editor.widget, *editor.widget.findChildren(QtWidgets.QWidget)):
                if widget.objectName():  # dModelSpin, weightSeedSpin, sameStreamCheck, ...
                    setattr(self, widget.objectName(), widget)
            editor.edited.connect(self._on_edit)
        self._build()
        self.sentenceInput.refused.connect(self.show_message)
        self.show_config(AttentionConfig())

    # construction ----------------------------------------------------------------------------

    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)
        self.messageLabel = _note("messageLabel", "color: #b00020; font-weight: 600;")
        self.loadNote = _note("loadNote", "color: #1a4c8c; font-weight: 600;")
        self.offerNote = _note("offerNote", "color: #1a4c8c;")  # the fast path offered (ui/fast_path.py)
        self.decoderPanel = DecoderPanel()
        self.decoderPanel.hide()
        self.tokenChips = QtWidgets.QLabel()
        self.tokenChips.setObjectName("tokenChips")
        self.tokenChips.setWordWrap(True)
        self.tokenChips.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.tokenChips.setToolTip("The tokens x₁, x₂, … numbered by position")
        self.sourceChips = QtWidgets.QLabel()
        self.sourceChips.setObjectName("sourceChips")
        self.sourceChips.setWordWrap(True)
        self.sourceChips.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.sourceChips.hide()
        self.tokenChips.linkActivated.connect(lambda _link: self.show_all_tokens())
        self._tokens: tuple[AttentionConfig, Tokens] | None = None
        self.tokenList: QtWidgets.QDialog | None = None
        self.presetCombo = QtWidgets.QComboBox()
        self.presetCombo.setObjectName("presetCombo")
        self.presetCombo.addItem("Preset…", None)
        for name in PRESETS:
            self.presetCombo.addItem(name, name)
        self.presetCombo.setToolTip("default: the explorer's start; tutorial-uniform and tutorial-embedding "
                                    "reproduce the tutorials' printed numbers; the others show one variant "
                                    "of today's attention each (RoPE, ALiBi, grouped-query, sliding window, "
                                    "sinks, nn.Linear with biases, cross-attention)")
        self.presetCombo.activated.connect(self._on_preset)
        self.rerollButton = QtWidgets.QPushButton("Re-roll")
        self.rerollButton.setObjectName("rerollButton")
        self.rerollButton.setToolTip("New random seeds for X and the weights")
        self.rerollButton.clicked.connect(self.reroll)
        self.openModelButton = QtWidgets.QPushButton("Open…")
        self.openModelButton.setObjectName("openModelButton")
        self.openModelButton.setToolTip("Open a model folder on this computer (Hugging Face layout: config.json, "
                                        "*.safetensors, tokenizer.json); File → Open GGUF file… opens a llama.cpp "
                                        ".gguf, and File → Recent models lists the last ones")
        self.openModelButton.clicked.connect(self.openModelRequested)
        self.sourceCombo.setMinimumContentsLength(4)  # within the panel's width
        self.hideSpecialCheck = QtWidgets.QCheckBox("hide [CLS] and [SEP] in the maps")
        self.hideSpecialCheck.setObjectName("hideSpecialCheck")
        self.hideSpecialCheck.setToolTip("Special tokens often soak up attention; hiding them shows the rest "
                                         "(the numbers are unchanged)")
        self.hideSpecialCheck.toggled.connect(self.hideSpecialToggled)
        self.modelNote = QtWidgets.QLabel()
        self.modelNote.setObjectName("modelNote")
        self.modelNote.setWordWrap(True)
        self.modelNote.setStyleSheet("color:#445;")
        for label in (self.messageLabel, self.loadNote, self.offerNote, self.tokenChips, self.modelNote):
            # wrapped text takes the panel's width, never widens it: a long word would push the
            # controls' right edge (spin-box arrows) out of sight and let Tab scroll sideways
            label.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Preferred)
            label.setMinimumWidth(1)

        placed = {name for _, names in GROUPS for name in names}
        groups = [*GROUPS, ("More", tuple(n for n in OPTIONS if n not in placed))]
        for title, names in groups:
            if not names:
                continue
            box = QtWidgets.QGroupBox(title)
            form = QtWidgets.QFormLayout(box)
            for name in names:
                self._add_row(form, name)
            self._add_extras(form, title)
            outer.addWidget(box)
        outer.addStretch(1)

    def _add_row(self, form: QtWidgets.QFormLayout, name: str) -> None:
        widget = self.editors[name].widget
        if name == "sentence":
            form.addRow(widget)
            form.addRow(self.messageLabel)
            form.addRow(self.loadNote)
            form.addRow(self.offerNote)
            form.addRow(self.tokenChips)
            form.addRow(self.decoderPanel)
        elif name == "source_sentence":  # under the first: its keys and values (cross-attention)
            label = QtWidgets.QLabel("second sentence: keys and values (cross-attention)")
            label.setStyleSheet("color:#445;")
            form.addRow(label)
            form.addRow(widget)
            form.addRow(self.sourceChips)
        elif name == "seed":  # a button beside it: Re-roll
            row = QtWidgets.QHBoxLayout()
            row.addWidget(widget, 1)
            row.addWidget(self.rerollButton)
            form.addRow(LABELS.get(name, name), row)
        elif name == "model":  # the field's whole width for the model's name ("SmolLM2-135M (c" beside Open…)
            form.addRow(LABELS[name], widget)
            form.addRow("", self.openModelButton)
        elif isinstance(widget, QtWidgets.QCheckBox):
            form.addRow("", widget)
        else:
            form.addRow(LABELS.get(name, OPTIONS[name].label), widget)

    def _add_extras(self, form: QtWidgets.QFormLayout, title: str) -> None:
        if title == "Sentence":
            form.addRow("", self.presetCombo)
        elif title == "Source":
            form.addRow(self.hideSpecialCheck)  # the whole row: its text is longer than the label column allows
            form.addRow(self.modelNote)

    # showing a config ------------------------------------------------------------------------

    def show_config(self, cfg: AttentionConfig, tokens: Tokens | None = None) -> None:
        """Show ``cfg`` in every control, with its ``tokens`` as chips; pending edits are dropped.

        In model mode the options a model fixes show the model's values, read-only; the
        config keeps its own, which come back when the source returns to random weights.
        """
        self._pending = {}
        dims = cfg.dims
        fixed = {"d_model": dims.d_model, "d_k": dims.d_k, "d_v": dims.d_v, "heads": dims.heads,
                 "projections": dims.projections}
        for name, editor in self.editors.items():
            applies = cfg.mode in OPTIONS[name].modes
            editor.show(fixed.get(name, getattr(cfg, name)) if not applies and name in fixed else getattr(cfg, name))
            editor.widget.setEnabled(applies)
        if cfg.projections is False and cfg.model is None:  # sizes of W do not exist without projections
            for name in ("d_k", "d_v", "init", "weight_seed"):
                self.editors[name].widget.setEnabled(False)
        model = plan(cfg).spec  # None for random weights
        self.layerSpin.setMaximum(model.layers if model else OPTIONS["layer"].hi + 1)  # counted from 1
        self.rerollButton.setEnabled(model is None)
        self.hideSpecialCheck.setEnabled(model is not None)
        self.hideSpecialCheck.setText(special_label(model))
        self.hideSpecialCheck.setToolTip(special_tip(model))
        self.modelNote.setVisible(model is not None)
        self.decoderPanel.set_quantised(model is not None and any("4-bit" in note for note in model.about))
        if model is not None:
            weights = "W and b are" if model.has_bias else "W are"
            weights = "the weights stay in transformers" if model.through else f"{weights} the layer's real weights"
            self.modelNote.setText(f"{model.label}: the model's own tokens; X is {model.x_is}; "
                                   f"{weights}; {'; '.join(model.about)}.")
        if tokens is not None:
            self._show_tokens(cfg, tokens)

    def show_tokens(self, cfg: AttentionConfig, tokens: Tokens) -> None:
        """Show ``tokens`` as chips (when they came later than ``cfg``: its model was still loading)."""
        self._show_tokens(cfg, tokens)

    def show_loading(self, text: str) -> None:
        """Show (or, with "", hide) what the worker is loading, right under the sentence."""
        self.loadNote.setText(text)
        self.loadNote.setVisible(bool(text))

    def show_hide_special(self, hide: bool) -> None:
        with QtCore.QSignalBlocker(self.hideSpecialCheck):
            self.hideSpecialCheck.setChecked(hide)

    def _show_tokens(self, cfg: AttentionConfig, toks: Tokens) -> None:
        """The first tokens as chips, each with its position counted from 1 (``doubt₃`` is x₃), as the
        maps and the walk count; the vocabulary ids, which are not positions, are in the tooltip.
        With a second sentence (cross-attention) its tokens, the keys, have chips of their own.

        A long input would push every control off the panel: it shows its first ``FEW_CHIPS``
        tokens and a link that opens all of them.
        """
        source = source_tokens_for(cfg)
        both = toks if source is None else toks.joined(source)  # cross-attention: one vocabulary for both
        ids, T = both.token_ids, len(toks.tokens)
        self._tokens = (cfg, toks, len(both.vocab))
        link = f' … <a href="all">{T:,} tokens, show all</a>' if T > FEW_CHIPS else ""
        self.tokenChips.setText(self._chips_html(cfg, toks, len(both.vocab), FEW_CHIPS, more=False) + link)
        self.tokenChips.setToolTip(_ids_tip(toks.tokens, ids[:T], "the model’s" if cfg.model else ""))
        self.sourceChips.setVisible(source is not None)
        if source is not None:
            self.sourceChips.setText(f"<b>T_k = {len(source.tokens):,}</b> keys: "
                                     + _chips(source.tokens, FEW_CHIPS))
            self.sourceChips.setToolTip(_ids_tip(source.tokens, ids[T:], ""))
        if self.tokenList is not None and self.tokenList.isVisible():
            self.show_all_tokens()

    @staticmethod
    def _chips_html(cfg: AttentionConfig, toks: Tokens, vocab_size: int, limit: int, more: bool = True) -> str:
        """The first ``limit`` tokens as chips, numbered from 1, after a line saying how many there are."""
        T = len(toks.tokens)
        vocab = f"ids in a vocabulary of {len(toks.vocab):,}" if cfg.model else f"V = {vocab_size:,} distinct"
        return f"<b>T = {T:,}</b> tokens x<sub>1</sub> … x<sub>{T}</sub>, {vocab}: " + _chips(toks.tokens, limit, more)

    def show_all_tokens(self) -> None:
        """Every token (up to ``MAX_CHIPS``) in a window of its own, which scrolls; the panel keeps its size."""
        if self._tokens is None:
            return
        cfg, toks, vocab_size = self._tokens
        if self.tokenList is None:
            self.tokenList = QtWidgets.QDialog(self)
            self.tokenList.setObjectName("tokenListDialog")
            self.tokenList.resize(520, 420)
            self.tokenList.text = QtWidgets.QTextBrowser()
            self.tokenList.text.setObjectName("tokenListText")
            QtWidgets.QVBoxLayout(self.tokenList).addWidget(self.tokenList.text)
        T = len(toks.tokens)
        self.tokenList.setWindowTitle(f"All {T:,} tokens" if T <= MAX_CHIPS else f"Tokens 1 to {MAX_CHIPS:,} of {T:,}")
        self.tokenList.text.setHtml(self._chips_html(cfg, toks, vocab_size, MAX_CHIPS))
        self.tokenList.show()
        self.tokenList.raise_()

    def show_message(self, text: str) -> None:
        """Show (or, with "", hide) a problem right under the sentence."""
        self.messageLabel.setText(text)
        self.messageLabel.setVisible(bool(text))

    # edits -----------------------------------------------------------------------------------

    def _on_edit(self, name: str, value: Any) -> None:
        self._pending[name] = value
        self.edited.emit(dict(self._pending))

    def _on_preset(self, index: int) -> None:
        name = self.presetCombo.itemData(index)
        self.presetCombo.setCurrentIndex(0)
        if name:
            self.presetChosen.emit(name)

    def reroll(self) -> None:
        """New random seeds for X and (unless they share X's stream) the weights."""
        rng = random.Random()
        self._pending["seed"] = rng.randrange(0, 100_000)
        if self.editors["weight_seed"].value() is not None:
            self._pending["weight_seed"] = rng.randrange(0, 100_000)
        self.edited.emit(dict(self._pending))

    def focus_sentence(self) -> None:
        self.sentenceInput.setFocus(QtCore.Qt.FocusReason.ShortcutFocusReason)
        self.sentenceInput.moveCursor(QtGui.QTextCursor.MoveOperation.End)


def special_label(model) -> str:
    """The "hide special tokens" check box's text for ``model`` (a ``ModelSpec`` or None)."""
    if model is None:
        return "hide special tokens in the maps"
    if model.causal:  # a decoder adds none of its own: only those typed in the text
        return "hide special tokens typed in the text"
    if len(model.special_tokens) > 2:  # the names are in the tooltip: a long line would widen the panel
        return "hide the model's special tokens in the maps"
    return f"hide {' and '.join(model.special_tokens)} in the maps"


def special_tip(model) -> str:
    """The check box's tooltip: which tokens it hides for ``model``."""
    if model is None:
        return "Random weights have no special tokens; a model's are hidden here"
    if model.causal:
        return (f"{model.label.split(' ')[0]} adds no special tokens of its own: this hides only those typed in "
                f"the text ({', '.join(model.special_tokens)}); the numbers are unchanged")
    return (f"Special tokens ({', '.join(model.special_tokens)}) often soak up attention; hiding them shows "
            f"the rest (the numbers are unchanged)")


def _chips(tokens: tuple[str, ...], limit: int, more: bool = True) -> str:
    """The first ``limit`` tokens as chips with their positions from 1, as rich text (then "… and N more")."""
    chips = []
    for i, tok in enumerate(tokens[:limit], start=1):
        label = html.escape(breakable("␣" if tok == " " else tok))
        chips.append(f'<span style="background:#e8eefc; color:#1a2b4c;">&nbsp;{label}'
                     f'<sub style="color:#6a7a99;">{i}</sub>&nbsp;</span>')
    left = len(tokens) - limit
    return " ".join(chips) + (f" … and {left:,} more" if more and left > 0 else "")


def _ids_tip(tokens: tuple[str, ...], ids: tuple[int, ...], whose: str) -> str:
    """The tooltip of a row of chips: positions count from 1; the vocabulary ids are not positions."""
    pairs = [f"{html.escape(tok)} {tid}" for tok, tid in zip(tokens[:60], ids[:60], strict=False)]
    return (f"<p>The tokens, numbered by position from 1 (x₁ is the first). Vocabulary ids"
            f"{f' ({whose})' if whose else ' (repeated tokens share one)'}: "
            + ", ".join(pairs) + (", …" if len(tokens) > 60 else "") + "</p>")

"""The control panel: every knob of AttentionConfig, emitting a frozen config.

Every control has an objectName so tests (and users' scripts) can drive it.
Each change emits at once; set_config emits once for a whole new config.
"""

from __future__ import annotations

import html
import random

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import PRESETS, AttentionConfig, available_devices, check_tokens, tokens_for
from ..engine.config import LIMITS
from ..engine.sources import MODELS, install_hint, is_available

MAX_CHIPS = 300
CHOICE_LABELS = {
    "tokenizer": [("word", "words"), ("char", "characters")],
    "inputs": [("embedding", "embedding table N(0,1)"), ("uniform", "uniform rand(T, d)")],
    "init": [("uniform", "uniform rand (tutorials)"), ("scaled_normal", "normal / sqrt(fan_in)")],
    "layout": [("row", "q = x·W   (W is d × d_k)"), ("column", "q = W·x   (W is d_k × d)")],
    "similarity": [("dot", "dot product"), ("cosine", "cosine")],
    "dtype": [("float32", "float32"), ("float64", "float64")],
}


def _combo(name: str, field: str, tip: str) -> QtWidgets.QComboBox:
    box = QtWidgets.QComboBox()
    box.setObjectName(name)
    box.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(8)
    for value, label in CHOICE_LABELS[field]:
        box.addItem(label, value)
    box.setToolTip(tip)
    return box


def _spin(name: str, field: str, tip: str, maximum: int | None = None) -> QtWidgets.QSpinBox:
    lo, hi = LIMITS[field]
    box = QtWidgets.QSpinBox()
    box.setObjectName(name)
    box.setRange(lo, min(hi, maximum or hi, 2**31 - 1))
    box.setToolTip(f"{tip} ({box.minimum()} to {box.maximum()})")
    box.setKeyboardTracking(True)
    box.setAccelerated(True)
    return box


def _check(name: str, text: str, tip: str) -> QtWidgets.QCheckBox:
    box = QtWidgets.QCheckBox(text)
    box.setObjectName(name)
    box.setToolTip(tip)
    return box


class ControlPanel(QtWidgets.QWidget):
    """All inputs of one attention computation.

    Signals
    -------
    configChanged(AttentionConfig)
        The controls describe a valid config different from the last one emitted.
    configInvalid(str)
        The controls describe no valid config; the message says why.
    """

    configChanged = QtCore.Signal(object)
    configInvalid = QtCore.Signal(str)

    def __init__(self, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self._last_emitted: AttentionConfig | None = None
        self._random_sizes: list[int] | None = None
        self._build()
        self.set_config(AttentionConfig(), emit=False)

    # construction ----------------------------------------------------------------------------

    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 6)

        self.sentenceInput = QtWidgets.QPlainTextEdit()
        self.sentenceInput.setObjectName("sentenceInput")
        self.sentenceInput.setPlaceholderText("Type a sentence…")
        self.sentenceInput.setFixedHeight(64)
        self.sentenceInput.setToolTip("The text to attend over; every change recomputes at once")
        self.sentenceInput.textChanged.connect(self.schedule)
        self.messageLabel = QtWidgets.QLabel()
        self.messageLabel.setObjectName("messageLabel")
        self.messageLabel.setWordWrap(True)
        self.messageLabel.setStyleSheet("color: #b00020; font-weight: 600;")
        self.messageLabel.hide()
        self.tokenChips = QtWidgets.QLabel()
        self.tokenChips.setObjectName("tokenChips")
        self.tokenChips.setWordWrap(True)
        self.tokenChips.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.tokenChips.setToolTip("The tokens with their vocabulary ids (repeated words share an id)")
        self.tokenizerCombo = _combo("tokenizerCombo", "tokenizer", "How the sentence is split into tokens")
        self.presetCombo = QtWidgets.QComboBox()
        self.presetCombo.setObjectName("presetCombo")
        self.presetCombo.addItem("Preset…", None)
        for name in PRESETS:
            self.presetCombo.addItem(name, name)
        self.presetCombo.setToolTip("default: the explorer's start; tutorial-uniform and tutorial-embedding "
                                    "reproduce the tutorials' printed numbers")
        self.presetCombo.activated.connect(self._apply_preset)

        box = QtWidgets.QGroupBox("Sentence")
        form = QtWidgets.QVBoxLayout(box)
        form.addWidget(self.sentenceInput)
        form.addWidget(self.messageLabel)
        form.addWidget(self.tokenChips)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(QtWidgets.QLabel("Tokens:"))
        row.addWidget(self.tokenizerCombo, 1)
        row.addWidget(self.presetCombo, 1)
        form.addLayout(row)
        outer.addWidget(box)

        self.sourceCombo = QtWidgets.QComboBox()
        self.sourceCombo.setObjectName("sourceCombo")
        self.sourceCombo.addItem("random weights (seeded)", None)
        for name, spec in MODELS.items():
            self.sourceCombo.addItem(spec.label, name)
            if not is_available(name):  # listed, but says how to enable it
                item = self.sourceCombo.model().item(self.sourceCombo.count() - 1)
                item.setEnabled(False)
                item.setText(f"{spec.label}: not installed")
                item.setToolTip(f"To enable it: {install_hint(name)}")
        self.sourceCombo.setToolTip("Random weights teach the mechanism; a pretrained model shows what "
                                    "attention learns (its real X, W, Q, K, V of one layer)")
        self.layerSpin = QtWidgets.QSpinBox()
        self.layerSpin.setObjectName("layerSpin")
        self.layerSpin.setRange(0, 5)
        self.layerSpin.setToolTip("Which layer of the model to show (0 to 5); X is the hidden state entering it")
        self.hideSpecialCheck = _check("hideSpecialCheck", "hide [CLS] and [SEP] in the maps",
                                       "Special tokens often soak up attention; hiding them shows the rest "
                                       "(the numbers are unchanged)")
        self.modelNote = QtWidgets.QLabel()
        self.modelNote.setObjectName("modelNote")
        self.modelNote.setWordWrap(True)
        self.modelNote.setStyleSheet("color:#445;")
        box = QtWidgets.QGroupBox("Source")
        form = QtWidgets.QFormLayout(box)
        form.addRow("weights", self.sourceCombo)
        form.addRow("layer", self.layerSpin)
        form.addRow("", self.hideSpecialCheck)
        form.addRow(self.modelNote)
        outer.addWidget(box)
        self.sourceCombo.currentIndexChanged.connect(self._sync_enabled)
        self.layerSpin.valueChanged.connect(self.schedule)
        self.sourceCombo.currentIndexChanged.connect(self.schedule)

        self.dModelSpin = _spin("dModelSpin", "d_model", "Embedding size d (d_model)", 4096)
        self.dKSpin = _spin("dKSpin", "d_k", "Per-head query and key size: d_q = d_k", 1024)
        self.dVSpin = _spin("dVSpin", "d_v", "Per-head value size d_v", 1024)
        self.headsSpin = _spin("headsSpin", "heads", "Number of heads h", 64)
        box = QtWidgets.QGroupBox("Sizes")
        form = QtWidgets.QFormLayout(box)
        form.addRow("d_model", self.dModelSpin)
        form.addRow("d_q = d_k", self.dKSpin)
        form.addRow("d_v", self.dVSpin)
        form.addRow("heads h", self.headsSpin)
        outer.addWidget(box)

        self.seedSpin = _spin("seedSpin", "seed", "Seed of the inputs X", 2**31 - 1)
        self.weightSeedSpin = _spin("weightSeedSpin", "weight_seed", "Seed of W_q, W_k, W_v, W_O", 2**31 - 1)
        self.sameStreamCheck = _check("sameStreamCheck", "same stream as X",
                                      "Draw the weights right after X from one seeded stream, "
                                      "as a notebook that seeds once does")
        self.sameStreamCheck.toggled.connect(lambda on: self.weightSeedSpin.setEnabled(not on))
        self.rerollButton = QtWidgets.QPushButton("Re-roll")
        self.rerollButton.setObjectName("rerollButton")
        self.rerollButton.setToolTip("New random seeds for X and the weights")
        self.rerollButton.clicked.connect(self.reroll)
        self.inputsCombo = _combo("inputsCombo", "inputs", "Where X comes from: an embedding table indexed by "
                                  "token id (nn.Embedding) or uniform noise per position")
        self.initCombo = _combo("initCombo", "init", "How the projection weights are drawn")
        self.positionalCheck = _check("positionalCheck", "add positional encoding",
                                      "Add the sinusoidal positional encoding of the paper to X")
        box = QtWidgets.QGroupBox("Inputs and weights")
        form = QtWidgets.QFormLayout(box)
        seeds = QtWidgets.QHBoxLayout()
        seeds.addWidget(self.seedSpin, 1)
        seeds.addWidget(self.rerollButton)
        form.addRow("seed", seeds)
        form.addRow("weight seed", self.weightSeedSpin)
        form.addRow("", self.sameStreamCheck)
        form.addRow("X", self.inputsCombo)
        form.addRow("", self.positionalCheck)
        form.addRow("W init", self.initCombo)
        outer.addWidget(box)

        self.layoutCombo = _combo("layoutCombo", "layout", "Weight convention: row vectors (q = x W) "
                                  "or column vectors (q = W x); same math, transposed weights")
        self.projectionsCheck = _check("projectionsCheck", "projections W_q, W_k, W_v",
                                       "Off: q = k = v = x, the simplified attention of the tutorials")
        self.scaleCheck = _check("scaleCheck", "scale by 1/sqrt(d_k)", "Divide the scores by sqrt(d_k)")
        self.temperatureSpin = QtWidgets.QDoubleSpinBox()
        self.temperatureSpin.setObjectName("temperatureSpin")
        self.temperatureSpin.setRange(0.01, 100.0)
        self.temperatureSpin.setDecimals(2)
        self.temperatureSpin.setSingleStep(0.1)
        self.temperatureSpin.setToolTip("Further divide the scores by this (0.01 to 100): "
                                        "below 1 sharpens the weights, above 1 flattens them")
        self.causalCheck = _check("causalCheck", "causal mask", "Each query sees only itself and earlier keys")
        self.similarityCombo = _combo("similarityCombo", "similarity", "How a query is compared with a key")
        box = QtWidgets.QGroupBox("Attention")
        form = QtWidgets.QFormLayout(box)
        form.addRow("layout", self.layoutCombo)
        form.addRow("", self.projectionsCheck)
        form.addRow("similarity", self.similarityCombo)
        form.addRow("", self.scaleCheck)
        form.addRow("temperature", self.temperatureSpin)
        form.addRow("", self.causalCheck)
        outer.addWidget(box)

        self.deviceCombo = QtWidgets.QComboBox()
        self.deviceCombo.setObjectName("deviceCombo")
        self.deviceCombo.setToolTip("Where the compute runs; the numbers are the same on every device")
        for device, label in available_devices():
            self.deviceCombo.addItem(label, device)
        self.dtypeCombo = _combo("dtypeCombo", "dtype", "Floating-point precision of the compute")
        box = QtWidgets.QGroupBox("Compute")
        form = QtWidgets.QFormLayout(box)
        form.addRow("device", self.deviceCombo)
        form.addRow("dtype", self.dtypeCombo)
        outer.addWidget(box)
        outer.addStretch(1)

        for spin in (self.dModelSpin, self.dKSpin, self.dVSpin, self.headsSpin, self.seedSpin,
                     self.weightSeedSpin, self.temperatureSpin):
            spin.valueChanged.connect(self.schedule)
        for check in (self.sameStreamCheck, self.positionalCheck, self.projectionsCheck, self.scaleCheck,
                      self.causalCheck):
            check.toggled.connect(self.schedule)
        for combo in (self.tokenizerCombo, self.inputsCombo, self.initCombo, self.layoutCombo,
                      self.similarityCombo, self.deviceCombo, self.dtypeCombo):
            combo.currentIndexChanged.connect(self.schedule)
        self.projectionsCheck.toggled.connect(self._sync_enabled)

    # config <-> controls ---------------------------------------------------------------------

    def config(self) -> AttentionConfig:
        """The config the controls describe; ``ValueError`` with a readable message if none."""
        cfg = AttentionConfig(
            sentence=self.sentenceInput.toPlainText(),
            tokenizer=self.tokenizerCombo.currentData(),
            d_model=self.dModelSpin.value(),
            d_k=self.dKSpin.value(),
            d_v=self.dVSpin.value(),
            heads=self.headsSpin.value(),
            seed=self.seedSpin.value(),
            weight_seed=None if self.sameStreamCheck.isChecked() else self.weightSeedSpin.value(),
            inputs=self.inputsCombo.currentData(),
            projections=self.projectionsCheck.isChecked(),
            positional=self.positionalCheck.isChecked(),
            init=self.initCombo.currentData(),
            layout=self.layoutCombo.currentData(),
            scale=self.scaleCheck.isChecked(),
            temperature=round(self.temperatureSpin.value(), 2),
            causal=self.causalCheck.isChecked(),
            similarity=self.similarityCombo.currentData(),
            device=self.deviceCombo.currentData() or "cpu",
            dtype=self.dtypeCombo.currentData(),
            model=self.sourceCombo.currentData(),
            layer=self.layerSpin.value() if self.sourceCombo.currentData() else 0,
        )
        check_tokens(cfg)  # the config reads no tokens; say at once when there are none
        return cfg

    def set_config(self, cfg: AttentionConfig, emit: bool = True) -> None:
        """Show ``cfg`` in every control (one emission at the end, not one per control)."""
        if cfg.model and not self.sourceCombo.currentData() and self._random_sizes is None:
            self._random_sizes = [s.value() for s in (self.dModelSpin, self.dKSpin, self.dVSpin, self.headsSpin)]
        elif not cfg.model:
            self._random_sizes = None  # the new config's sizes are the random mode's
        widgets = self.findChildren(QtWidgets.QWidget)
        blocked = [w.blockSignals(True) for w in widgets]
        try:
            if self.sentenceInput.toPlainText() != cfg.sentence:
                self.sentenceInput.setPlainText(cfg.sentence)
            self.dModelSpin.setValue(cfg.d_model)
            self.dKSpin.setValue(cfg.d_k)
            self.dVSpin.setValue(cfg.d_v)
            self.headsSpin.setValue(cfg.heads)
            self.seedSpin.setValue(min(cfg.seed, self.seedSpin.maximum()))
            self.sameStreamCheck.setChecked(cfg.weight_seed is None)
            if cfg.weight_seed is not None:
                self.weightSeedSpin.setValue(min(cfg.weight_seed, self.weightSeedSpin.maximum()))
            self.weightSeedSpin.setEnabled(cfg.weight_seed is not None)
            self.projectionsCheck.setChecked(cfg.projections)
            self.positionalCheck.setChecked(cfg.positional)
            self.scaleCheck.setChecked(cfg.scale)
            self.causalCheck.setChecked(cfg.causal)
            self.temperatureSpin.setValue(cfg.temperature)
            for combo, value in ((self.tokenizerCombo, cfg.tokenizer), (self.inputsCombo, cfg.inputs),
                                 (self.initCombo, cfg.init), (self.layoutCombo, cfg.layout),
                                 (self.similarityCombo, cfg.similarity), (self.dtypeCombo, cfg.dtype)):
                combo.setCurrentIndex(max(0, combo.findData(value)))
            self.set_device(cfg.device)
            self.sourceCombo.setCurrentIndex(max(0, self.sourceCombo.findData(cfg.model)))
            self.layerSpin.setValue(cfg.layer)
        finally:
            for w, was in zip(widgets, blocked):
                w.blockSignals(was)
        self._sync_enabled()
        if emit:
            self.emit_config()
        else:
            self._show_tokens(cfg)

    def set_device(self, device: str) -> None:
        index = self.deviceCombo.findData(device)
        if index < 0 and device == "cuda":
            index = self.deviceCombo.findData("cuda:0")
        if index >= 0:
            blocked = self.deviceCombo.blockSignals(True)
            self.deviceCombo.setCurrentIndex(index)
            self.deviceCombo.blockSignals(blocked)

    def _sync_enabled(self) -> None:
        model = self.sourceCombo.currentData()
        on = self.projectionsCheck.isChecked() and not model
        for w in (self.dKSpin, self.dVSpin, self.initCombo):
            w.setEnabled(on)
        self.weightSeedSpin.setEnabled(on and not self.sameStreamCheck.isChecked())
        # a pretrained model fixes its sizes and weights: show its values, read-only
        for w in (self.dModelSpin, self.headsSpin, self.seedSpin, self.rerollButton, self.sameStreamCheck,
                  self.inputsCombo, self.positionalCheck, self.projectionsCheck, self.tokenizerCombo):
            w.setEnabled(not model)
        self.layerSpin.setEnabled(bool(model))
        self.hideSpecialCheck.setEnabled(bool(model))
        sizes = (self.dModelSpin, self.dKSpin, self.dVSpin, self.headsSpin)
        if model and self._random_sizes is None:  # remember the random mode's sizes for the way back
            self._random_sizes = [spin.value() for spin in sizes]
        elif not model and self._random_sizes is not None:
            for spin, value in zip(sizes, self._random_sizes):
                blocked = spin.blockSignals(True)
                spin.setValue(value)
                spin.blockSignals(blocked)
            self._random_sizes = None
        if model:
            spec = MODELS[model]
            self.layerSpin.setMaximum(spec.layers - 1)
            for spin, value in ((self.dModelSpin, spec.d_model), (self.dKSpin, spec.d_model // spec.heads),
                                (self.dVSpin, spec.d_model // spec.heads), (self.headsSpin, spec.heads)):
                blocked = spin.blockSignals(True)
                spin.setValue(value)
                spin.blockSignals(blocked)
            self.modelNote.setText(f"{spec.label}: WordPiece tokens with [CLS] and [SEP]; X is the hidden "
                                   f"state entering the layer; W and b are the layer's real weights; the "
                                   f"output is the attention block's, before the residual and LayerNorm.")
        self.modelNote.setVisible(bool(model))

    # emission --------------------------------------------------------------------------------

    def schedule(self) -> None:
        """A control changed: emit now. No debounce is needed, since the worker computes only
        the newest request, and a timer would wait behind the window's pending repaint."""
        self.emit_config()

    def emit_config(self) -> None:
        try:
            cfg = self.config()
        except ValueError as exc:
            self.show_message(str(exc))
            self.configInvalid.emit(str(exc))
            return
        self.show_message("")
        self._show_tokens(cfg)
        if cfg != self._last_emitted:
            self._last_emitted = cfg
            self.configChanged.emit(cfg)

    def force_emit(self) -> None:
        """Emit the current config even if it equals the last one (after a failure, say)."""
        self._last_emitted = None
        self.emit_config()

    def show_message(self, text: str) -> None:
        """Show (or, with "", hide) a problem right under the sentence."""
        self.messageLabel.setText(text)
        self.messageLabel.setVisible(bool(text))

    def _show_tokens(self, cfg: AttentionConfig) -> None:
        toks = tokens_for(cfg)
        chips = []
        for tok, tid in list(zip(toks.tokens, toks.token_ids))[:MAX_CHIPS]:
            label = html.escape("␣" if tok == " " else tok)
            chips.append(f'<span style="background:#e8eefc; color:#1a2b4c;">&nbsp;{label}'
                         f'<sub style="color:#6a7a99;">{tid}</sub>&nbsp;</span>')
        more = len(toks.tokens) - MAX_CHIPS
        tail = f" … and {more:,} more" if more > 0 else ""
        self.tokenChips.setText(
            f"<b>T = {len(toks.tokens):,}</b> tokens, "
            + (f"ids in a vocabulary of {len(toks.vocab):,}: " if cfg.model else f"V = {len(toks.vocab):,} distinct: ")
            + " ".join(chips) + tail)

    def _apply_preset(self, index: int) -> None:
        name = self.presetCombo.itemData(index)
        self.presetCombo.setCurrentIndex(0)
        if name:
            self.set_config(PRESETS[name].replace(device=self.deviceCombo.currentData() or "cpu"))

    def reroll(self) -> None:
        rng = random.Random()
        blocked = [w.blockSignals(True) for w in (self.seedSpin, self.weightSeedSpin)]
        self.seedSpin.setValue(rng.randrange(0, 100_000))
        self.weightSeedSpin.setValue(rng.randrange(0, 100_000))
        self.seedSpin.blockSignals(blocked[0])
        self.weightSeedSpin.blockSignals(blocked[1])
        self.emit_config()

    def focus_sentence(self) -> None:
        self.sentenceInput.setFocus(QtCore.Qt.FocusReason.ShortcutFocusReason)
        self.sentenceInput.moveCursor(QtGui.QTextCursor.MoveOperation.End)

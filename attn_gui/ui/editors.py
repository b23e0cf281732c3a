"""One editor per declared config option, made from its declaration.

An editor shows a value of its option exactly (ranges equal the declared limits, seeds
up to 2**63 - 1, as many decimals as the option allows) and reports the user's edits;
it never holds the truth. Widgets are named after the option (``dModelSpin``,
``causalCheck``, ``layoutCombo``, ``sentenceInput``) so tests and scripts can drive them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from ..engine import Option, UserError, available_devices, format_heads, parse_heads
from ..engine.readers.catalog import model_spec
from ..engine.model.registry import install_hint, is_available
from ..present.state import check_window_text

INT32_MAX = 2**31 - 1
SUFFIX = {"int": "Spin", "float": "Spin", "bool": "Check", "choice": "Combo", "device": "Combo", "text": "Input",
          "heads": "Input"}


def object_name(opt: Option) -> str:
    """``d_model`` -> ``dModelSpin``; the model's menu is ``sourceCombo``."""
    if opt.kind == "model":
        return "sourceCombo"
    first, *rest = opt.name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest) + SUFFIX[opt.kind]


class BigSpinBox(QtWidgets.QAbstractSpinBox):
    """A spin box for whole numbers beyond QSpinBox's 32 bits (seeds up to 2**63 - 1).

    Signals
    -------
    valueChanged(object)
        The value, a Python int, after an edit or a step.
    """

    valueChanged = QtCore.Signal(object)

    def __init__(self, lo: int, hi: int, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self._lo, self._hi, self._value = lo, hi, lo
        self.lineEdit().setText(str(lo))
        self.lineEdit().textEdited.connect(self._on_text)

    def minimum(self) -> int:
        return self._lo

    def maximum(self) -> int:
        return self._hi

    def value(self) -> int:
        return self._value

    def setValue(self, value: int) -> None:
        value = int(value)
        if not self._lo <= value <= self._hi:
            raise ValueError(f"{value} is outside {self._lo}..{self._hi}")
        changed = value != self._value
        self._value = value
        if self.lineEdit().text() != str(value):
            self.lineEdit().setText(str(value))
        if changed:
            self.valueChanged.emit(value)

    def validate(self, text: str, pos: int):
        if text == "":
            return QtGui.QValidator.State.Intermediate, text, pos
        if not text.isascii() or not text.isdigit():
            return QtGui.QValidator.State.Invalid, text, pos
        ok = self._lo <= int(text) <= self._hi
        return (QtGui.QValidator.State.Acceptable if ok else QtGui.QValidator.State.Invalid), text, pos

    def fixup(self, text: str) -> str:
        return str(self._value)

    def _on_text(self, text: str) -> None:
        if text.isascii() and text.isdigit() and self._lo <= int(text) <= self._hi:
            self.setValue(int(text))

    def stepBy(self, steps: int) -> None:
        self.setValue(min(self._hi, max(self._lo, self._value + steps)))

    def stepEnabled(self):
        flags = QtWidgets.QAbstractSpinBox.StepEnabledFlag.StepNone
        if self._value > self._lo:
            flags |= QtWidgets.QAbstractSpinBox.StepEnabledFlag.StepDownEnabled
        if self._value < self._hi:
            flags |= QtWidgets.QAbstractSpinBox.StepEnabledFlag.StepUpEnabled
        return flags

    def sizeHint(self) -> QtCore.QSize:
        hint = super().sizeHint()
        return QtCore.QSize(max(hint.width(), self.fontMetrics().horizontalAdvance("0" * 8) + 30), hint.height())


class DecimalSpinBox(QtWidgets.QDoubleSpinBox):
    """A QDoubleSpinBox that holds every declared decimal and writes no trailing zeros (0.123, 1)."""

    def textFromValue(self, value: float) -> str:
        return f"{value:.{self.decimals()}f}".rstrip("0").rstrip(".")


class Editor(QtCore.QObject):
    """One option's widget: ``value()``, ``show(value)`` and ``edited`` when the user changes it.

    Signals
    -------
    edited(str, object)
        The option's name and the value the widget now shows.
    """

    edited = QtCore.Signal(str, object)

    def __init__(self, opt: Option, widget: QtWidgets.QWidget, get: Callable[[], Any],
                 put: Callable[[Any], None], signals: list):
        super().__init__(widget)
        self.option, self.widget, self._get, self._put = opt, widget, get, put
        widget.setObjectName(object_name(opt))
        tip = opt.help
        if opt.ordinal:
            tip += f" (counted from 1: {opt.lo + 1} to {opt.hi + 1})"
        elif opt.kind in ("int", "float") and opt.lo is not None:
            tip += f" ({opt.lo:g} to {opt.hi:g})"
        widget.setToolTip(tip)
        for signal in signals:
            signal.connect(self._emit)

    def value(self) -> Any:
        return self._get()

    def show(self, value: Any) -> None:
        """Show ``value`` without reporting it as an edit (a widget showing it already is left alone: blocking
        the signals of it and its children, for every option on every change, took a millisecond)."""
        if self._get() == value:
            return
        blockers = [QtCore.QSignalBlocker(w) for w in (self.widget, *self.widget.findChildren(QtWidgets.QWidget))]
        try:
            self._put(value)
        finally:
            for blocker in blockers:
                blocker.unblock()

    def _emit(self, *_: Any) -> None:
        self.edited.emit(self.option.name, self._get())


class SentenceEdit(QtWidgets.QPlainTextEdit):
    """The sentence box. A paste that would make a sentence the window cannot lay out quickly
    (``present.state.check_window_text``) is refused before it lands, with ``refused(message)``.

    Signals
    -------
    refused(str)
        A paste was refused; the message says why.
    """

    refused = QtCore.Signal(str)

    def insertFromMimeData(self, source: QtCore.QMimeData) -> None:
        cursor = self.textCursor()
        text = self.toPlainText()
        start, end = cursor.selectionStart(), cursor.selectionEnd()
        try:
            check_window_text(text[:start] + source.text() + text[end:])
        except UserError as exc:
            self.refused.emit(f"not pasted: {exc}")
            return
        super().insertFromMimeData(source)


def _text(opt: Option) -> Editor:
    box = SentenceEdit()
    box.setPlaceholderText("Type a sentence…")
    box.setFixedHeight(64)
    if opt.nullable:  # the second sentence: an empty box is none (self-attention)
        box.setPlaceholderText("A second sentence for cross-attention (empty: self-attention)")
        box.setFixedHeight(48)

    def put(value: str | None) -> None:
        value = value or ""
        if box.toPlainText() != value and (value or box.toPlainText().strip()):  # never move the typing cursor
            box.setPlainText(value)

    def get() -> str | None:
        text = box.toPlainText()
        return None if opt.nullable and not text.strip() else text

    return Editor(opt, box, get, put, [box.textChanged])


def _heads(opt: Option) -> Editor:
    box = QtWidgets.QLineEdit()
    box.setPlaceholderText("none (layer.head, e.g. 5.3, 12.1)")

    def put(value: tuple) -> None:
        if value != get():  # never rewrite what the user is typing when it means the same heads
            box.setText(format_heads(value))

    def get():
        try:
            return parse_heads(box.text())
        except UserError:
            return box.text()  # the config refuses it with one line, shown where the user looks

    return Editor(opt, box, get, put, [box.textEdited])


def _int(opt: Option) -> Editor:
    if opt.hi > INT32_MAX:
        spin: QtWidgets.QAbstractSpinBox = BigSpinBox(opt.lo, opt.hi)
    else:
        spin = QtWidgets.QSpinBox()
        spin.setRange(opt.lo, opt.hi)
        spin.setAccelerated(True)
    if opt.ordinal:  # an index people count from 1 (layer 1 is the config's layer 0)
        spin.setRange(opt.lo + 1, opt.hi + 1)
        return Editor(opt, spin, lambda: spin.value() - 1, lambda value: spin.setValue(value + 1),
                      [spin.valueChanged])
    if not opt.nullable:
        return Editor(opt, spin, spin.value, spin.setValue, [spin.valueChanged])
    # nullable: a check box says "none" (weight_seed: the weights come from X's seed)
    if opt.name == "weight_seed":
        same = QtWidgets.QCheckBox("from X's seed")
        same.setObjectName("sameStreamCheck")
        same.setToolTip("No seed of their own: with stable inputs the weights are drawn from X's seed by a "
                        "generator of their own; with the embedding table or uniform inputs they continue X's "
                        "stream, as a notebook that seeds once does")
    else:  # kv_heads, window: "none" is the plain attention
        same = QtWidgets.QCheckBox("none")
        same.setObjectName(object_name(opt).replace("Spin", "NoneCheck"))
        same.setToolTip(opt.help)
    box = QtWidgets.QWidget()
    column = QtWidgets.QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 0)
    column.addWidget(spin)
    column.addWidget(same)
    same.toggled.connect(lambda on: spin.setEnabled(not on))

    def put(value: int | None) -> None:
        same.setChecked(value is None)
        if value is not None:
            spin.setValue(value)
        spin.setEnabled(value is not None)

    editor = Editor(opt, box, lambda: None if same.isChecked() else spin.value(), put,
                    [spin.valueChanged, same.toggled])
    spin.setObjectName(object_name(opt))
    box.setObjectName(object_name(opt).replace("Spin", "Row"))
    return editor


def _float(opt: Option) -> Editor:
    spin = DecimalSpinBox()
    spin.setDecimals(opt.decimals or 6)
    spin.setRange(opt.lo, opt.hi)
    spin.setSingleStep(0.1)
    return Editor(opt, spin, spin.value, spin.setValue, [spin.valueChanged])


def _bool(opt: Option) -> Editor:
    check = QtWidgets.QCheckBox(opt.label)
    return Editor(opt, check, check.isChecked, check.setChecked, [check.toggled])


def _combo(opt: Option, items: list[tuple[Any, str]], unavailable: Callable[[Any], str] | None = None,
           other: Callable[[Any], tuple[str, str]] | None = None) -> Editor:
    """A combo box of ``items`` (value, label); ``other(value)`` gives (label, tooltip) of a value not listed."""
    box = QtWidgets.QComboBox()
    box.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    box.setMinimumContentsLength(8)
    for value, label in items:
        box.addItem(label, value)
        hint = unavailable(value) if unavailable else ""
        if hint:  # listed, but says how to enable it
            item = box.model().item(box.count() - 1)
            item.setEnabled(False)
            item.setText(f"{label}: not installed")
            item.setToolTip(f"To enable it: {hint}")

    def put(value: Any) -> None:
        index = box.findData(value)
        if index < 0 and value == "cuda":
            index = box.findData("cuda:0")
        if index < 0 and other is not None:  # a model folder: its name and family, the path in the tooltip
            label, tip = other(value)
            box.addItem(label, value)
            index = box.count() - 1
            box.setItemData(index, tip, QtCore.Qt.ItemDataRole.ToolTipRole)
        elif index < 0:  # a valid value this machine cannot run (a session from a GPU machine): shown as is
            box.addItem(f"{value} (not on this machine)", value)
            index = box.count() - 1
        box.setCurrentIndex(index)

    return Editor(opt, box, box.currentData, put, [box.currentIndexChanged])


def make_editor(opt: Option) -> Editor:
    """The editor of ``opt``, chosen by its kind."""
    if opt.kind == "text":
        return _text(opt)
    if opt.kind == "int":
        return _int(opt)
    if opt.kind == "float":
        return _float(opt)
    if opt.kind == "bool":
        return _bool(opt)
    if opt.kind == "device":
        return _combo(opt, available_devices())
    if opt.kind == "heads":
        return _heads(opt)
    if opt.kind == "model":
        return _combo(opt, list(opt.choices),
                      lambda name: "" if name is None or is_available(name) else install_hint(name),
                      lambda path: (model_spec(path).label, path))
    return _combo(opt, list(opt.choices))


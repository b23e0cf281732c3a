"""The Lessons dock: a guided tour, step by step, on the numbers the window shows now.

The dock talks to the window as every dock does: it follows the view state (``follow``) and the
frames (``show_frame``), and asks for a new state, or for the step's cells outlined, by its signals.
"""

from __future__ import annotations

import os

from PySide6 import QtCore, QtWidgets

from ...engine import AttentionConfig, UserError
from ...export.lessons import export_lesson
from ...present.frame import Frame
from ...present.lessons import Lesson, LessonError, action_done, fill, judge, lesson_names, load_lesson
from ...present.state import ViewState
from ..settings import Settings
from . import DockPanel


class LessonsPanel(DockPanel, QtWidgets.QWidget):
    """Back / Next through a lesson's steps; the text is filled again from every new frame.

    Parameters
    ----------
    settings : Settings
        Where the learner's place is remembered ("lesson": "name:step").

    Signals
    -------
    stateRequested(ViewState)
        A step wants the window at this state: the lesson's config, the step's map in focus.
    marksChanged(dict)
        The cells the step outlines: {field: [(row, column or None), ...]}, 0-based.
    """

    stateRequested = QtCore.Signal(object)
    marksChanged = QtCore.Signal(dict)

    def __init__(self, settings: Settings, parent: QtWidgets.QWidget | None = None):
        super().__init__(parent)
        self.settings = settings
        self.state = ViewState()  # the window's, as followed
        self.frame: Frame | None = None  # the frame the window shows
        self.lesson: Lesson | None = None
        self.number = 1
        self.choice = QtWidgets.QComboBox()
        self.choice.setObjectName("lessonChoice")
        self.choice.setSizeAdjustPolicy(QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.choice.setMinimumContentsLength(12)  # long titles must not widen the dock past the maps
        for name in lesson_names():
            self.choice.addItem(load_lesson(name).title, name)
        self.stepLabel = QtWidgets.QLabel()
        self.stepLabel.setObjectName("lessonStep")
        self.text = QtWidgets.QLabel()
        self.text.setObjectName("lessonText")
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.task = QtWidgets.QLabel()
        self.task.setObjectName("lessonTask")
        self.task.setWordWrap(True)
        self.answers = QtWidgets.QGridLayout()  # the key tokens, eight to a row, so long sentences wrap
        self.verdict = QtWidgets.QLabel()
        self.verdict.setObjectName("lessonVerdict")
        self.verdict.setWordWrap(True)
        self.backButton = QtWidgets.QPushButton("Back")
        self.backButton.setObjectName("lessonBack")
        self.nextButton = QtWidgets.QPushButton("Next")
        self.nextButton.setObjectName("lessonNext")
        self.exportButton = QtWidgets.QPushButton("Export lesson…")
        self.exportButton.setObjectName("lessonExport")
        self.exportButton.setToolTip("Every step as a PNG with its text, and an HTML page of them all, "
                                     "on the sentence shown now")
        self.exportButton.clicked.connect(self._export)
        self.backButton.clicked.connect(lambda: self.go(self.number - 1))
        self.nextButton.clicked.connect(lambda: self.go(self.number + 1))
        self.choice.activated.connect(lambda _i: self.open(self.choice.currentData(), 1))
        top = QtWidgets.QHBoxLayout()
        top.addWidget(self.choice, 1)
        top.addWidget(self.stepLabel)
        top.addWidget(self.backButton)
        top.addWidget(self.nextButton)
        top.addWidget(self.exportButton)
        layout = QtWidgets.QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.text)
        layout.addWidget(self.task)
        layout.addLayout(self.answers)
        layout.addWidget(self.verdict)
        layout.addStretch(1)

    def follow(self, state: ViewState) -> None:
        """The window's view state changed: a step's action may be done now."""
        self.state = state
        self.refill()

    def show_frame(self, frame: Frame, state: ViewState | None = None) -> None:
        """The window shows ``frame``: the step's text takes its numbers."""
        self.frame = frame
        self.refill()

    def resume(self, name: str | None = None, step: int | None = None) -> str:
        """Open lesson ``name`` at ``step``, or (``name`` None) where the learner left off; the note on a
        saved place that is gone ("" when there is none)."""
        if name is not None:
            self.open(name, step or 1)
            return ""
        name, step, note = self.settings.lesson(lesson_names())
        try:
            self.open(name, step)
        except LessonError:
            self.open(name, 1)
        return note or ""

    def open(self, name: str, number: int = 1) -> None:
        """Start lesson ``name`` at step ``number`` (from 1): its config, then the step's map."""
        lesson = load_lesson(name)
        lesson.step(number)  # an unknown step is a LessonError before anything changes
        self.lesson, self.number = lesson, number
        self.choice.setCurrentIndex(self.choice.findData(name))
        config = self.lesson.config().replace(device=self.state.config.device)
        self.stateRequested.emit(self.state.replace(config=config, head=0, token=None))
        self.go(number)

    def go(self, number: int) -> None:
        """Show step ``number`` (from 1): focus its map, outline its cells, fill its text."""
        if self.lesson is None or not 1 <= number <= len(self.lesson.steps):
            return
        self.number = number
        self.settings.set("lesson", f"{self.lesson.name}:{number}")
        self.verdict.setText("")
        self.stateRequested.emit(self.state.replace(focus=self.lesson.step(number).focus))
        self.refill()

    def on_lesson_input(self, config: AttentionConfig | None = None) -> bool:
        """Whether ``config`` (the window's, by default) reads the open lesson's input: its model and sentence."""
        if self.lesson is None:
            return False
        config = config or self.state.config
        own = self.lesson.config()
        return (config.model, config.sentence) == (own.model, own.sentence)

    def export(self, folder: str) -> str:
        """Write the lesson, run on the window's config, into ``folder``; a sentence saying where or why not."""
        try:
            path = export_lesson(self.lesson, folder, self.state.config)
        except UserError as exc:
            return f"Not exported: {exc}"
        return f"Exported to {path}: open index.html"

    def _export(self) -> None:
        if self.lesson is None:
            return
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Export the lesson into a folder")
        if folder:
            self.verdict.setStyleSheet("")
            self.verdict.setText(self.export(os.path.join(folder, self.lesson.name)))

    def refill(self) -> None:
        """Fill the step's text, question and task from the frame shown now."""
        if self.lesson is None:
            return
        step = self.lesson.step(self.number)
        self.stepLabel.setText(f"step {self.number} of {len(self.lesson.steps)}")
        self.backButton.setEnabled(self.number > 1)
        self.nextButton.setEnabled(self.number < len(self.lesson.steps))
        # the outline is the lesson's: on another model or sentence (SmolLM2, a trained model) it names nothing
        marks = [(r - 1, None if c is None else c - 1) for r, c in step.marks] if self.on_lesson_input() else []
        self.marksChanged.emit({step.focus: marks} if marks else {})
        frame = self.frame
        if frame is None:
            self.text.setText("Computing…")
            return
        result = frame.result
        try:
            self.text.setText(fill(step.text, result))
        except UserError as exc:  # e.g. a sentence shorter than the token the step follows
            self.text.setText(f"This step needs other numbers than the window shows: {exc}")
        tasks = []
        if step.action is not None:
            done = action_done(step.action, self.state.config)
            tasks.append(("Done: " if done else "Your turn: ") + step.action.ask)
        if step.question is not None:
            tasks.append("Question: " + step.question.ask)
        self.task.setText("\n".join(tasks))
        self._answer_buttons(step.question, result)

    def _answer_buttons(self, question, result) -> None:
        while self.answers.count():
            old = self.answers.takeAt(0).widget()
            old.hide()  # gone now, not when deleteLater runs
            old.deleteLater()
        if question is None or question.row > result.seq_len:
            return
        for column, token in enumerate(result.key_tokens, 1):
            button = QtWidgets.QPushButton(f"{column} {token}")
            button.setObjectName(f"lessonAnswer:{column}")
            button.clicked.connect(lambda _c=False, column=column: self.answer(column))
            self.answers.addWidget(button, (column - 1) // 8, (column - 1) % 8)

    def cell_clicked(self, field: str, _head: int, row: int, column: int) -> None:
        """A click on a cell of the question's row in its map (``Pipeline.cellClicked``: 0-based, on the full
        axes) answers it, as its button does."""
        step = self.lesson.step(self.number) if self.lesson is not None else None
        if step is None or step.question is None or self.frame is None or field != step.question.field:
            return
        result, shown = self.frame.result, self.frame.arrays.get(field)
        if shown is None or shown.shape[-2:] != (result.seq_len, result.key_len):
            return  # a pooled map: its cells are not single keys
        if row == step.question.row - 1:
            self.answer(column + 1)

    def answer(self, column: int) -> None:
        """The learner's answer: key ``column`` (from 1); the verdict names the numbers."""
        if self.lesson is None:
            return
        step = self.lesson.step(self.number)
        if step.question is None or self.frame is None:
            return
        try:
            ok, said = judge(step.question, self.frame.result, column)
        except LessonError as exc:
            ok, said = False, str(exc)
        self.verdict.setStyleSheet("color:#070;" if ok else "color:#a00;")
        self.verdict.setText(said)


"""Export a lesson for handing out: every step's map as a PNG with its text, and an HTML page of them all."""

from __future__ import annotations

import html
import os
from pathlib import Path

from PySide6 import QtCore, QtGui

from ..engine import AttentionConfig, FIELDS, compute
from ..present.frame import make_frame
from ..present.lessons import Lesson, fill
from ..present.maps import display_cells, map_data
from ..render.offscreen import dispose, render_map
from .folder import Target
from .images import png_bytes, render_image

TEXT_W = 900  # pixels: the width of every step's picture, map and text


def step_image(lesson: Lesson, number: int, start: AttentionConfig | None = None) -> tuple[QtGui.QImage, str]:
    """Step ``number``'s map (its cells outlined) above its filled text, and that text."""
    step = lesson.step(number)
    result = compute(lesson.config_at(number, start))
    frame = make_frame(0, result)
    data = map_data(frame, step.focus, 0 if FIELDS[step.focus].per_head else None)
    view = render_map(data)
    try:
        view.item.marks.set_cells(display_cells(data, [(r - 1, None if c is None else c - 1) for r, c in step.marks]))
        body = render_image(view, TEXT_W)
    finally:
        dispose(view)
    text = fill(step.text, result)
    if step.question is not None:
        text += "\n\nQuestion: " + step.question.ask
    if step.action is not None:
        text += "\n\nYour turn: " + step.action.ask
    return _with_text(body, f"{lesson.title}: step {number} of {len(lesson.steps)}", text), text


def _with_text(body: QtGui.QImage, title: str, text: str) -> QtGui.QImage:
    """``body`` with ``title`` above and ``text`` wrapped below, on white."""
    font = QtGui.QFont()
    font.setPointSizeF(12)
    bold = QtGui.QFont(font)
    bold.setBold(True)
    bold.setPointSizeF(14)
    width = body.width()
    flags = int(QtCore.Qt.TextFlag.TextWordWrap)
    text_rect = QtGui.QFontMetrics(font).boundingRect(QtCore.QRect(0, 0, width - 32, 10_000), flags, text)
    title_h, text_h = 40, text_rect.height() + 32
    image = QtGui.QImage(width, title_h + body.height() + text_h, QtGui.QImage.Format.Format_ARGB32)
    image.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(image)
    try:
        painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing, True)
        painter.setPen(QtGui.QColor(20, 20, 20))
        painter.setFont(bold)
        painter.drawText(QtCore.QRect(16, 8, width - 32, title_h - 8), 0, title)
        painter.drawImage(0, title_h, body)
        painter.setFont(font)
        painter.drawText(QtCore.QRect(16, title_h + body.height() + 16, width - 32, text_rect.height()), flags, text)
    finally:
        painter.end()
    return image


def export_lesson(lesson: Lesson, folder: str | os.PathLike, start: AttentionConfig | None = None,
                  overwrite: bool = False) -> Path:
    """Write ``step-N.png`` for every step and ``index.html`` stringing them together, atomically.

    Parameters
    ----------
    lesson : Lesson
    folder : path-like
        The folder to write (see ``export.folder.Target``).
    start : AttentionConfig, optional
        The learner's config to run the lesson on; default the lesson's own.
    overwrite : bool
        Write among other files in ``folder``.

    Returns
    -------
    Path
        The folder written.
    """
    target = Target(folder, overwrite)
    names = [f"step-{n}.png" for n in range(1, len(lesson.steps) + 1)] + ["index.html"]
    target.check_names(names)
    stage = target.open()
    try:
        parts = [f"<!doctype html>\n<meta charset='utf-8'>\n<title>{html.escape(lesson.title)}</title>\n"
                 f"<body style='font-family:sans-serif;max-width:{TEXT_W + 40}px;margin:auto'>\n"
                 f"<h1>{html.escape(lesson.title)}</h1>\n<p>{html.escape(lesson.summary)}</p>\n"]
        for number in range(1, len(lesson.steps) + 1):
            image, text = step_image(lesson, number, start)
            (stage / f"step-{number}.png").write_bytes(png_bytes(image))
            # the picture carries the step's title and text; alt keeps the text for a screen reader
            parts.append(f"<p><img src='step-{number}.png' alt='Step {number}: {html.escape(text)}' "
                         f"style='max-width:100%'></p>\n")
        parts.append("</body>\n")
        (stage / "index.html").write_text("".join(parts), encoding="utf-8")
    except BaseException:
        target.abort()
        raise
    target.commit(names)
    return target.path

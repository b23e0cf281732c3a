"""Export lesson: one PNG per step with its text, and an HTML page that strings them together."""

import re

from PySide6 import QtGui

from attn_gui.engine import compute
from attn_gui.export.lessons import export_lesson
from attn_gui.present.lessons import fill, load_lesson
from attn_gui.render.offscreen import ensure_app


def test_export_every_step_as_png_and_html(tmp_path):
    ensure_app(offscreen=True)
    lesson = load_lesson("1-without-weights")
    out = export_lesson(lesson, tmp_path / "lesson")
    names = sorted(p.name for p in out.iterdir())
    assert names == ["index.html", "step-1.png", "step-2.png", "step-3.png", "step-4.png"]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"src='(step-\d\.png)'", page) == ["step-1.png", "step-2.png", "step-3.png", "step-4.png"]
    assert "[0.2407, 0.1987, 0.3146, 0.2459]" in page  # seed 004's alpha of x3, as the step says it
    assert fill(lesson.steps[1].text, compute(lesson.config())) in page.replace("&#x27;", "'")
    image = QtGui.QImage(str(out / "step-3.png"))
    assert image.width() == 900 and image.height() > 400
    assert not list(tmp_path.glob(".*partial"))  # written atomically: nothing left beside it

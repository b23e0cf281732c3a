"""A large view used well (issue 62, item 8), read as pixels: the maps the layout gives room for every label
draw every label."""

import numpy as np
from PySide6 import QtGui

from attn_gui.engine import AttentionConfig

SENTENCE = "the animal did not cross the street because it was too tired today"  # 13 tokens


def inked_runs(canvas, axis) -> int:
    """How many separate bands of ink (rows of pixels that differ from the background, with a blank row
    between bands) scene item ``axis`` shows on the canvas now: one per row label it draws."""
    rect = canvas.mapFromScene(axis.sceneBoundingRect()).boundingRect().adjusted(0, 0, -3, 0)  # not the image's edge
    assert canvas.viewport().rect().contains(rect), rect  # wholly in view: its pixels are all painted
    image = canvas.viewport().grab(rect).toImage().convertToFormat(QtGui.QImage.Format.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint32, image.sizeInBytes() // 4)
    pixels = pixels.reshape(image.height(), image.bytesPerLine() // 4)[:, :image.width()]
    values, counts = np.unique(pixels, return_counts=True)
    inked = (pixels != values[counts.argmax()]).any(axis=1)
    return int(inked[0]) + int((inked[1:] & ~inked[:-1]).sum())


def test_every_map_of_13_tokens_labels_every_row_in_all_maps_at_1920(window, qtbot, drawn):
    # omega and Z labelled every other row at 1920 x 1080 where omega' of the same size labelled all 13: their
    # titles wrapped into one line more than laid out (the title's document margins), squeezing their cells
    window.resize(1920, 1080)
    config = AttentionConfig(heads=4, sentence=SENTENCE)
    window.set_state(window.state.replace(config=config, focus=None))
    qtbot.waitUntil(lambda: window.frame.result.config == config, timeout=20000)
    canvas = window.canvas
    qtbot.waitUntil(lambda: canvas._planned_for == canvas.viewport().size().toTuple())
    drawn(window)
    counts = {}
    for mid in ("x", "q:0", "k:0", "v:0", "scores:0", "scaled:0", "weights:0", "head_outputs:0", "concat",
                "output"):
        item = canvas.item_of(mid)
        canvas.ensureVisible(item.sceneBoundingRect(), 0, 0)
        counts[mid] = inked_runs(canvas, item.rowAxis)
    assert all(n == 13 for n in counts.values()), str(counts)

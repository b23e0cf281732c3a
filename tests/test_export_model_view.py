"""Export all of a model's result writes its Model view (issue 62: every layer's heads were in no export)."""

import json

import numpy as np
import pytest
from PySide6 import QtGui

from attn_gui.engine import AttentionConfig
from attn_gui.engine.run.compute import compute
from attn_gui.export import bundle
from attn_gui.present.frame import make_frame
from tiny_decoders import SENTENCE, tiny_decoder  # tests/


@pytest.mark.parametrize("model", [True, False])
def test_a_models_export_holds_its_model_view(qapp, tmp_path, model):
    if model:
        tiny_decoder("llama", tmp_path / "m", layers=2)
    config = AttentionConfig(sentence=SENTENCE, **({"model": str(tmp_path / "m")} if model else {}))
    written = bundle.export_all(make_frame(0, compute(config)), tmp_path / "out", formats="png")
    names = [p.name for p in written]
    listed = json.loads((tmp_path / "out" / "manifest.json").read_text())["files"]
    assert ("model_view.png" in names) == ("model_view.png" in listed) == model  # random weights: one layer only
    if not model:
        return
    image = QtGui.QImage(str(tmp_path / "out" / "model_view.png")).convertToFormat(QtGui.QImage.Format.Format_RGB888)
    assert image.width() >= 1600 and image.height() >= 900
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    pixels = pixels[:, :3 * image.width()].reshape(image.height(), image.width(), 3)
    # a causal decoder's first query attends only to itself: α = 1 in every layer's and head's top-left cell,
    # viridis' top colour (#fde725, matplotlib's table) in every thumbnail
    yellow = np.all(np.abs(pixels.astype(int) - (0xFD, 0xE7, 0x25)) <= 3, axis=-1)
    assert yellow.sum() > 0


def test_export_all_writes_the_figure_as_svg_too(qapp, tmp_path):
    # issue 62: the menu promises the figure in PNG and SVG; only figure.png was written
    import xml.etree.ElementTree as ET

    written = bundle.export_all(make_frame(0, compute(AttentionConfig(sentence=SENTENCE))), tmp_path / "out",
                                formats="png,svg")
    assert {"figure.png", "figure.svg"} <= {p.name for p in written}
    root = ET.parse(tmp_path / "out" / "figure.svg").getroot()  # well-formed XML
    texts = "".join(el.text or "" for el in root.iter() if el.tag.endswith("text"))
    assert SENTENCE in texts and "ω" in texts  # the title and a map's title, as text

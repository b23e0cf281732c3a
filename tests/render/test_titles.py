"""Map titles wrap between words, never inside a shape such as "shown 384 × 384"."""

import dataclasses

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import NBSP, map_data
from attn_gui.render.heatmap import HeatmapView
from attn_gui.render.offscreen import ensure_app


def _lines(view: HeatmapView) -> list[str]:
    doc = view.plot.titleLabel.item.document()
    lines, block = [], doc.begin()
    while block.isValid():
        layout = block.layout()
        for i in range(layout.lineCount()):
            line = layout.lineAt(i)
            lines.append(block.text()[line.textStart(): line.textStart() + line.textLength()])
        block = block.next()
    return lines


def test_a_narrow_title_wraps_between_words_only():
    ensure_app()
    data = map_data(make_frame(0, compute(AttentionConfig())), "weights", 0)
    shape = f"shown{NBSP}384{NBSP}×{NBSP}384"
    data = dataclasses.replace(data, title=f"α = softmax(ω / √d_k)  (8192{NBSP}×{NBSP}8192, {shape})")
    view = HeatmapView("narrow")
    view.resize(190, 200)
    view.show()
    view.set_data(data)
    lines = _lines(view)
    assert len(lines) > 1  # it did wrap
    assert any(shape in line for line in lines), lines  # and the shape stayed whole on one line
    assert any(f"8192{NBSP}×{NBSP}8192" in line for line in lines), lines

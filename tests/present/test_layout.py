"""The canvas layout on its own: in every state at the window's two common sizes the focused
map lies wholly inside the first viewport, its cells hold its labels, and no boxes overlap."""

import itertools

import pytest

from attn_gui.engine import FIELDS, AttentionConfig, compute
from attn_gui.engine.model.registry import is_available
from attn_gui.present.all_maps import ALL_MAPS_MIN_CELL
from attn_gui.present.frame import make_frame
from attn_gui.present.heads import kv_groups
from attn_gui.present.layout import lay_out
from attn_gui.present.sizes import LABELLED_T, LINE, TOKEN_AXES, VALUE_CELL, VALUE_CELL_H, VALUES_T, frame_shapes

# the canvas's share of a 1366 x 768 and a 1920 x 1080 screen: the controls on the left,
# the menu, the status bar and the docks below take the rest
VIEWPORTS = {"1366x768": (1000, 540), "1920x1080": (1550, 820)}
WORDS = ["the", "animal", "did", "not", "cross", "the", "street", "because", "it", "was", "too", "tired"]

STATES = {
    "default": AttentionConfig(),
    "4 heads d 64": AttentionConfig(heads=4, d_model=64),
    "8 heads T 64": AttentionConfig(heads=8, d_model=256,
                                    sentence=" ".join(itertools.islice(itertools.cycle(WORDS), 64))),
    "cross 6x7": AttentionConfig(sentence="the cat sat on the mat", source_sentence="le chat était assis sur le tapis"),
    "700 tokens": AttentionConfig(sentence=" ".join(itertools.islice(itertools.cycle(WORDS), 700))),
}
if is_available("minilm-l6"):
    STATES["MiniLM 15 tokens"] = AttentionConfig(model="minilm-l6", layer=3, sentence=(
        "The animal didn't cross the street because it was too tired"))
if is_available("smollm2-135m"):
    STATES["SmolLM2 9 heads"] = AttentionConfig(model="smollm2-135m", sentence="The cat sat on the mat because it")


@pytest.fixture(scope="module", params=sorted(STATES))
def frame(request):
    return make_frame(0, compute(STATES[request.param]))


@pytest.mark.parametrize("size", sorted(VIEWPORTS))
def test_alpha_first_readable_and_nothing_overlaps(frame, size):
    width, height = VIEWPORTS[size]
    shapes = frame_shapes(frame)
    result = frame.result
    layout = lay_out([s for s, _ in shapes.values()], "weights", width, height, result.heads, kv_groups(result))
    alpha = layout.boxes["weights:0"]
    assert alpha.inside(width, height), (alpha, size)
    shape = shapes["weights:0"][0]
    # every row and column carries its label (a line of it fits a cell); 64 rows and the heads
    # strip need more than the 540 px a 768 px screen leaves, so there every k-th is drawn
    if shape.rows <= (LABELLED_T if size == "1920x1080" else LABELLED_T // 2):
        assert min(alpha.cell_w, alpha.cell_h) >= alpha.label_px * LINE - 0.5, alpha
    else:  # thinned labels: the cells still tile the box the layout gave
        assert alpha.cell_h * shape.rows <= alpha.h
    if max(shape.rows, shape.cols) <= VALUES_T:  # a value fits each cell (wider than tall where it must)
        assert alpha.cell_w >= VALUE_CELL and alpha.cell_h >= VALUE_CELL_H, alpha
    boxes = list(layout.boxes.items())
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        if not (a.startswith("group:") or b.startswith("group:")):  # a bracket spans its heads' thumbnails
            assert not box_a.overlaps(box_b), (a, b, box_a, box_b)
    assert all(box.right <= layout.width + 0.5 and box.bottom <= layout.height + 0.5 for _, box in boxes)
    assert set(shapes) <= set(layout.boxes)  # every map is placed: readable or a thumbnail


def test_all_maps_keeps_data_flow_order_and_readable_cells():
    frame = make_frame(0, compute(AttentionConfig(heads=2)))
    shapes = [s for s, _ in frame_shapes(frame).values()]
    layout = lay_out(shapes, None, 1000, 540, 2)
    x = [layout.boxes[i].x for i in ("x", "q:0", "weights:0", "head_outputs:0", "output")]
    assert x == sorted(x) and len(set(x)) == 5  # one column per stage, left to right
    for s in shapes:  # a token axis keeps cells that hold its labels; a d axis may be finer
        box, info = layout.boxes[s.id], FIELDS[s.field]
        assert box.cell_h >= ALL_MAPS_MIN_CELL or info.rows not in TOKEN_AXES, s
        assert box.cell_w >= ALL_MAPS_MIN_CELL or info.cols not in TOKEN_AXES, s


def _laid_out(config, focus, size):
    frame = make_frame(0, compute(config))
    shapes = frame_shapes(frame)
    width, height = VIEWPORTS[size]
    result = frame.result
    return shapes, lay_out([s for s, _ in shapes.values()], focus, width, height, result.heads, kv_groups(result))


def test_a_large_view_is_filled_by_the_focused_map_and_its_neighbours():
    """Issue 62, item 8: a first start at 1920 x 1080 drew alpha at 48 px cells with the right half and the
    bottom of the canvas blank. The maps grow until they fill one of the view's sides (all but a thumbnail's
    pad), and alpha stays the largest."""
    width, height = VIEWPORTS["1920x1080"]
    _, layout = _laid_out(AttentionConfig(), "weights", "1920x1080")
    right = max(b.right for b in layout.boxes.values())
    bottom = max(b.bottom for b in layout.boxes.values())
    assert right >= 0.85 * width or bottom >= 0.85 * height, (right, bottom)
    assert (layout.width, layout.height) == (width, height)  # and nothing scrolls
    alpha = layout.boxes["weights:0"]
    assert all(alpha.cell_w >= b.cell_w for b in layout.boxes.values())


def test_neighbours_keep_their_values_at_1366_with_heads():
    """Issue 62, item 8: at 1366 x 768 with 4 heads omega and omega' beside alpha lost their numbers (square cells
    22.8 and 20.4 px, under a value's width); cells wider than tall hold them."""
    _, layout = _laid_out(AttentionConfig(heads=4), "weights", "1366x768")
    for mid in ("scores:0", "scaled:0"):
        box = layout.boxes[mid]
        assert not box.thumb and box.cell_w >= VALUE_CELL and box.cell_h >= VALUE_CELL_H, (mid, box)


def test_all_maps_in_a_large_view_gives_the_small_maps_readable_labels():
    """Issue 62, item 8: "All maps" with 4 heads at 1920 x 1080 gave alpha 81 px cells and every other map 8 px
    labels (the issue measured ~6 px on its canvas). Alpha grows no larger than focused (48 px cells, a value's
    room twice); the width left goes to the others' labels: 9 px at least, as the walk's table."""
    shapes, layout = _laid_out(AttentionConfig(heads=4), None, "1920x1080")
    alpha = layout.boxes["weights:0"]
    others = [layout.boxes[mid] for mid in shapes if not mid.startswith("weights")]
    assert min(b.label_px for b in others) >= 9, sorted(b.label_px for b in others)
    assert all(alpha.w * alpha.h > b.w * b.h for b in others)  # alpha still the largest


def test_all_maps_alpha_does_not_dwarf_the_others_at_13_tokens():
    """Issue 62, item 8: "All maps" with 4 heads and 13 tokens at 1920 x 1080 gave alpha 43 px cells and every
    other map 10 px cells with 7 px labels, omega's thinned to every other row. Alpha's cells are at most three
    times the others' (where they fit at all: a long d axis aside)."""
    sentence = "the animal did not cross the street because it was too tired today"
    shapes, layout = _laid_out(AttentionConfig(heads=4, sentence=sentence), None, "1920x1080")
    alpha = layout.boxes["weights:0"]
    token_cells = [b.cell_h for mid, b in layout.boxes.items() if mid in shapes and not mid.startswith("weights")
                   and FIELDS[shapes[mid][0].field].rows in TOKEN_AXES]
    assert alpha.cell_h <= 3.05 * min(token_cells), (alpha.cell_h, min(token_cells))
    assert min(b.label_px for mid, b in layout.boxes.items() if mid in shapes) >= 8

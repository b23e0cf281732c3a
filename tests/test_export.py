"""Export: every map as PNG and SVG, the figure, every tensor as .npy/.csv, and the manifest."""

import json
import os
import re
import stat
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtSvg

from attn_gui.export import arrays, bundle, files, images
from attn_gui.engine import AttentionConfig, FIELDS, compute, preset
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import map_data, map_keys
from attn_gui.render import offscreen

SVG = "{http://www.w3.org/2000/svg}"

# (config, PNG width): the tutorial default at the maps' own sizes, and a causal
# two-head, 12-token sentence at a fixed width.
CASES = {
    "default": (AttentionConfig(), None),
    "heads2-causal-12": (
        AttentionConfig(sentence="the quick brown fox jumps over the lazy dog and runs away",
                        heads=2, causal=True),
        900,
    ),
    # cross-attention: 3 queries over the 7 tokens of a second sentence
    "cross-heads2": (AttentionConfig(sentence="the cat sat", source_sentence="le chat était assis sur le tapis",
                                     heads=2, d_model=6), None),
}


@pytest.fixture(scope="module", params=list(CASES))
def exported(request, qapp, tmp_path_factory):
    """One full export per case, shared by the checks below."""
    config, width = CASES[request.param]
    frame = make_frame(0, compute(config))
    folder = tmp_path_factory.mktemp(request.param) / "figs"  # not there yet: export creates it
    calls = []
    written = bundle.export_all(frame, folder, width=width, progress=lambda d, t: calls.append((d, t)))
    return frame, folder, written, width, calls


@pytest.fixture
def frame(qapp):
    return make_frame(0, compute(AttentionConfig()))


@pytest.fixture
def view(frame):
    v = offscreen.render_map(map_data(frame, "weights", 0))
    yield v
    v.deleteLater()  # not close(): see render.offscreen.dispose


def stem(field, head):
    return field if head is None else f"{field}_head{head + 1}"  # file names count heads from 1


def no_space(text):
    return re.sub(r"\s+", "", text)


def pixels(image: QtGui.QImage) -> np.ndarray:
    """(H, W, 3) RGB array of an image, as pyqtgraph's own exporter tests read them."""
    rgba = image.convertToFormat(QtGui.QImage.Format.Format_RGBA8888)
    return np.array(pg.functions.ndarray_from_qimage(rgba)[..., :3])  # copy while rgba lives


def test_every_map_is_a_png_at_the_requested_width_and_not_blank(exported):
    frame, folder, _, width, _ = exported
    for field, head in map_keys(frame.result):
        image = QtGui.QImage(str(folder / f"{stem(field, head)}.png"))
        assert not image.isNull(), (field, head)
        expected = width or offscreen.map_size(map_data(frame, field, head))[0] + 2 * images.PADDING
        assert image.width() == expected, (field, head)
        rgb = pixels(image)
        not_white = (rgb < 250).any(axis=2)
        assert not_white.mean() > 0.3, f"{field} {head}: the picture is mostly blank"
        assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20, f"{field} {head}: too few colours"


def test_every_map_is_an_svg_with_its_title_as_text(exported):
    frame, folder, _, _, _ = exported
    for field, head in map_keys(frame.result):
        path = folder / f"{stem(field, head)}.svg"
        root = ET.parse(path).getroot()
        assert root.tag == f"{SVG}svg"
        text = no_space("".join("".join(t.itertext()) for t in root.iter(f"{SVG}text")))
        data = map_data(frame, field, head)
        assert no_space(data.title) in text, (field, head)
        for label in set(data.row_labels[:3]):  # the token / index labels are text too
            assert no_space(label) in text
        assert b'd=""' not in path.read_bytes()  # empty paths make SVG readers warn


def blank_margin(image: QtGui.QImage) -> float:
    """The share of ``image`` outside the bounding box of everything drawn on it (not near-white)."""
    ink = (pixels(image) < 250).any(axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return 1 - (rows[-1] - rows[0] + 1) * (cols[-1] - cols[0] + 1) / ink.size


def test_figure_png_holds_the_whole_figure_cropped_to_it(exported):
    frame, folder, _, _, _ = exported
    image = QtGui.QImage(str(folder / "figure.png"))
    # the window's layout: alpha first, its neighbours beside it, the other maps as thumbnails below,
    # laid out in FIGURE_SIZE and cropped to them (it was 1800 x 1100, more than half of it blank)
    assert image.width() <= offscreen.FIGURE_SIZE[0] and image.height() <= offscreen.FIGURE_SIZE[1]
    assert blank_margin(image) <= 0.10
    assert (pixels(image) < 250).any(axis=2).mean() > 0.05


def test_npy_files_equal_the_result_exactly(exported):
    frame, folder, _, _, _ = exported
    result = frame.result
    for field in result.fields():
        saved = np.load(folder / f"{field}.npy", allow_pickle=False)
        expected = result.numpy(field)
        assert saved.dtype == expected.dtype and saved.shape == expected.shape, field
        np.testing.assert_array_equal(saved, expected, err_msg=field)
    assert np.load(folder / "weights.npy").shape[0] == result.heads  # the head axis is kept


def test_csv_files_read_back_exactly(exported):
    frame, folder, _, _, _ = exported
    result = frame.result
    weights = np.loadtxt(folder / "weights_head1.csv", delimiter=",", ndmin=2)
    np.testing.assert_array_equal(weights.astype(np.float32), result.numpy("weights")[0])
    for field in result.fields():
        array = result.numpy(field)
        if FIELDS[field].per_head:
            for h in range(result.heads):
                back = np.loadtxt(folder / f"{stem(field, h)}.csv", delimiter=",", ndmin=2)
                np.testing.assert_array_equal(back.astype(array.dtype), array[h], err_msg=f"{field} {h}")
        else:
            back = np.loadtxt(folder / f"{field}.csv", delimiter=",", ndmin=2)
            np.testing.assert_array_equal(back.astype(array.dtype), array, err_msg=field)
    if result.config.causal:  # masked scores are written as -inf and read back as -inf
        assert np.isneginf(np.loadtxt(folder / "scaled_head1.csv", delimiter=",")).any()


def test_manifest_round_trips_the_config_and_lists_every_file(exported):
    frame, folder, written, _, _ = exported
    result = frame.result
    info = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert AttentionConfig.from_dict(info["config"]) == result.config
    assert info["tokens"] == list(result.tokens)
    assert info["vocab"] == list(result.vocab)
    assert info["token_ids"] == result.token_ids.tolist()
    assert info["shapes"]["weights"] == [result.heads, result.seq_len, result.key_len]
    if result.source_tokens is not None:  # cross-attention: the second sentence, and its X as an array
        assert info["source_tokens"] == ["le", "chat", "était", "assis", "sur", "le", "tapis"]
        assert info["source_token_ids"] == result.source_token_ids.tolist()
        assert info["shapes"]["weights"] == [2, 3, 7] and info["shapes"]["x_source"] == [7, 6]
        np.testing.assert_array_equal(np.load(folder / "x_source.npy"), result.x_source.numpy())
        assert "le → chat" not in info["files"] and "x_source.png" in info["files"]
    else:
        assert "source_tokens" not in info and "x_source.npy" not in info["files"]
    assert info["device"] == "cpu" and info["elapsed_ms"] == pytest.approx(result.elapsed_ms)
    assert {"attn_gui", "torch", "PySide6", "Qt", "pyqtgraph", "numpy"} <= set(info["versions"])
    assert info["created_utc"].endswith("+00:00")
    assert written[-1] == folder / "manifest.json"
    assert info["files"] == [p.name for p in written[:-1]]
    assert sorted(os.listdir(folder)) == sorted(p.name for p in written)  # nothing else, no temp files


def test_progress_counts_every_file(exported):
    _, _, written, _, calls = exported
    assert [d for d, _ in calls] == list(range(1, len(written) + 1))
    assert {t for _, t in calls} == {len(written)}


def test_file_names_follow_fields_and_heads(exported):
    frame, folder, _, _, _ = exported
    names = set(os.listdir(folder))
    heads = frame.result.heads
    assert {"x.png", "x.svg", "x.npy", "x.csv", "output.png", "concat.csv", "figure.png"} <= names
    for h in range(1, heads + 1):  # counted from 1, as the window counts heads
        assert {f"weights_head{h}.png", f"weights_head{h}.svg", f"weights_head{h}.csv"} <= names
    assert "weights_head0.png" not in names and f"weights_head{heads + 1}.png" not in names
    assert "weights.png" not in names


def read_only_folder(tmp_path):
    """A folder nothing can be written in: chmod 0o500, or (as root) a path under a file."""
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if not os.access(folder, os.W_OK):
        return folder, folder
    folder.chmod(0o700)  # root writes anywhere; a path under a regular file fails for everyone
    blocker = tmp_path / "file.txt"
    blocker.write_text("keep me")
    return blocker / "sub", tmp_path


@pytest.mark.parametrize("formats", ["png,svg,npy,csv", "npy"])
def test_read_only_folder_gives_one_clear_error_and_no_files(frame, tmp_path, formats):
    target, watch = read_only_folder(tmp_path)
    before = sorted(p.name for p in watch.rglob("*"))
    try:
        with pytest.raises(OSError, match=r"^cannot write to .+: .+") as info:
            bundle.export_all(frame, target, formats=formats)
    finally:
        (tmp_path / "locked").chmod(0o700)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in watch.rglob("*")) == before
    if (tmp_path / "file.txt").exists():
        assert (tmp_path / "file.txt").read_text() == "keep me"


def test_failed_write_keeps_the_old_file_and_leaves_no_temp_file(view, tmp_path, monkeypatch):
    path = tmp_path / "weights.png"
    path.write_bytes(b"old picture")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="cannot write .*weights.png: No space left on device"):
        images.export_image(view, path)
    assert path.read_bytes() == b"old picture"
    assert os.listdir(tmp_path) == ["weights.png"]


def test_export_image_writes_png_and_svg_by_suffix(view, tmp_path):
    png = images.export_image(view, tmp_path / "a.PNG", width=1234)
    assert QtGui.QImage(str(png)).width() == 1234
    svg = images.export_image(view, tmp_path / "a.svg")
    assert ET.parse(svg).getroot().tag == f"{SVG}svg"
    with pytest.raises(ValueError, match="use .png or .svg"):
        images.export_image(view, tmp_path / "a.gif")
    with pytest.raises(ValueError, match="width"):
        images.export_image(view, tmp_path / "b.png", width=0)
    assert sorted(os.listdir(tmp_path)) == ["a.PNG", "a.svg"]


def test_png_width_scales_the_whole_picture(view):
    small = images.render_image(view)
    big = images.render_image(view, width=2 * small.width())
    assert big.width() == 2 * small.width() and abs(big.height() - 2 * small.height()) <= 1
    # same picture, twice the resolution: downscaled, it matches the small one closely
    down = big.scaled(small.size(), mode=pg.QtCore.Qt.TransformationMode.SmoothTransformation)
    diff = np.abs(pixels(down).astype(int) - pixels(small).astype(int))
    assert diff.mean() < 12


def test_copy_image_puts_the_picture_on_the_clipboard(view):
    image = images.copy_image(view)
    pasted = QtGui.QGuiApplication.clipboard().image()
    assert not pasted.isNull() and pasted.size() == image.size()


def test_write_arrays_alone(frame, tmp_path):
    written = arrays.write_arrays(frame.result, tmp_path, ["csv"])
    assert [p.name for p in written] == arrays.array_files(frame.result, ["csv"])
    assert "weights_head1.csv" in os.listdir(tmp_path) and not list(tmp_path.glob("*.npy"))


@pytest.fixture
def live(frame, qtbot):
    from attn_gui.render.canvas import Canvas

    view = Canvas()
    qtbot.addWidget(view)
    view.show()
    view.show_frame(frame)
    return view


def orange(image: QtGui.QImage) -> int:
    """How many pixels have the colour of the window's selection outlines."""
    rgb = pixels(image).astype(int)
    return int((np.abs(rgb - np.array([255, 140, 0])).max(axis=2) < 40).sum())


def test_the_figure_is_the_live_heads_under_a_title_without_ui_chrome(qapp, qtbot, tmp_path):
    from attn_gui.render.canvas import Canvas

    frame = make_frame(0, compute(AttentionConfig(heads=2, causal=True)))
    live = Canvas()
    qtbot.addWidget(live)
    live.resize(*offscreen.FIGURE_SIZE)
    live.show()
    live.show_frame(frame, head=1, token=2)
    qtbot.waitUntil(lambda: live.width() == offscreen.FIGURE_SIZE[0] and not live.busy)  # drawn in steps
    assert orange(live.grab().toImage()) > 100  # on screen: the followed row and the chosen head
    bundle.export_all(frame, tmp_path, formats="png", figure=live)
    saved = QtGui.QImage(str(tmp_path / "figure.png"))
    assert blank_margin(saved) <= 0.10  # cropped to the maps
    assert orange(saved) == 0  # no outlines in a picture
    title = pixels(saved.copy(0, 0, saved.width(), offscreen.TITLE_H))
    assert (title < 100).all(axis=2).sum() > 200  # the sentence and the sizes, in dark text
    body = saved.copy(0, offscreen.TITLE_H, saved.width(), saved.height() - offscreen.TITLE_H)
    assert (pixels(body) < 250).any(axis=2).mean() > 0.05


def test_a_scrolled_live_figure_is_redrawn_whole(frame, live, qtbot, tmp_path):
    live.resize(700, 450)  # far smaller than the maps need: the canvas scrolls
    qtbot.waitUntil(lambda: live.horizontalScrollBar().maximum() > 0 or live.verticalScrollBar().maximum() > 0)
    bundle.export_all(frame, tmp_path, formats="png", figure=live)
    saved = QtGui.QImage(str(tmp_path / "figure.png"))
    assert blank_margin(saved) <= 0.10 and (pixels(saved) < 250).any(axis=2).mean() > 0.05


@pytest.mark.parametrize("formats, message", [
    ("png,gif", "unknown export format 'gif'"),
    ("", "no export format"),
    (" , ", "no export format"),
])
def test_bad_formats_are_one_line_value_errors(formats, message):
    with pytest.raises(ValueError, match=message):
        files.parse_formats(formats)


def test_formats_are_normalised():
    assert files.parse_formats("CSV, .png,csv") == ("png", "csv")
    assert files.parse_formats(["svg", "npy"]) == ("svg", "npy")


def test_an_image_too_large_for_memory_is_refused_before_writing(qapp, tmp_path):
    frame = make_frame(0, compute(preset("tutorial-embedding")))  # W_v is taller than wide
    with pytest.raises(ValueError, match="too large; choose a smaller width"):
        bundle.export_all(frame, tmp_path / "out", width=files.MAX_WIDTH)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("width", [0, -5, files.MAX_WIDTH + 1, 2.5, True, "800"])
def test_bad_widths_are_refused_before_writing(frame, tmp_path, width):
    with pytest.raises(ValueError, match="width"):
        bundle.export_all(frame, tmp_path / "out", width=width)
    assert not (tmp_path / "out").exists()


def svg_in_qt(svg: bytes, size: QtCore.QSize) -> QtGui.QImage:
    """The SVG drawn by Qt's own SVG renderer (QtSvg), on white, at ``size``."""
    renderer = QtSvg.QSvgRenderer(QtCore.QByteArray(svg))
    assert renderer.isValid()
    image = QtGui.QImage(size, QtGui.QImage.Format.Format_ARGB32)
    image.fill(QtGui.QColor("white"))
    painter = QtGui.QPainter(image)
    renderer.render(painter)
    painter.end()
    return image


@pytest.mark.parametrize("config, name, head", [
    (AttentionConfig(causal=True), "weights", 0),  # hatched masked cells
    (AttentionConfig(), "x", None),  # signed colours, values in every cell
    (AttentionConfig(causal=True, sentence=" ".join(f"w{i}" for i in range(40))), "scaled", 0),  # no values
])
def test_the_svg_renders_like_the_png_in_qtsvg(qapp, config, name, head):
    view = offscreen.render_map(map_data(make_frame(0, compute(config)), name, head))
    try:
        png, svg = images.render_image(view), images.render_svg(view)
    finally:
        offscreen.dispose(view)
    drawn = svg_in_qt(svg, png.size())
    diff = np.abs(pixels(drawn).astype(int) - pixels(png).astype(int))
    # text is laid out alike but anti-aliased differently; blurred cells or grey blocks differ widely
    assert diff.mean() < 4 and (diff.max(axis=2) > 64).mean() < 0.03
    np.testing.assert_allclose(pixels(drawn).mean(axis=(0, 1)), pixels(png).mean(axis=(0, 1)), atol=2)


def test_the_svg_reads_the_same_in_a_browser(view):
    svg = images.render_svg(view).decode()
    assert "<pattern" not in svg  # Qt writes hatching patterns in map units: grey blocks in a browser
    families = re.findall(r'font-family="([^"]*)"', svg)
    assert families and all(f.split(",")[-1].strip() in ("sans-serif", "serif", "monospace") for f in families)
    assert "Sans Serif" not in svg  # Qt's alias, no CSS name: a browser falls back to a serif
    big = offscreen.render_map(map_data(make_frame(0, compute(AttentionConfig(
        sentence=" ".join(f"w{i}" for i in range(160))))), "scores", 0))
    try:
        svg = images.render_svg(big).decode()
    finally:
        offscreen.dispose(big)
    assert svg.count("<image ") == svg.count('<image style="image-rendering:pixelated"') >= 1


@pytest.mark.parametrize("name, head, rows, cols", [
    ("weights", 0, "query", "key"), ("scores", 0, "query", "key"), ("x", None, "token", "dimension")])
def test_a_single_map_export_names_its_axes(frame, name, head, rows, cols):
    view = offscreen.render_map(map_data(frame, name, head))
    try:
        root = ET.fromstring(images.render_svg(view))
    finally:
        offscreen.dispose(view)
    texts = ["".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")]
    assert rows in texts and cols in texts


def test_grouped_query_csv_files_name_their_key_value_head(tmp_path):
    """k_head3.png shows query head 3's K/V head; the K/V tensors' CSVs are named by K/V head (found in review)."""
    cfg = preset("grouped-query")
    result = compute(cfg)
    arrays.write_arrays(result, tmp_path, ("csv",))
    names = {p.name for p in tmp_path.iterdir()}
    g = cfg.kv_heads
    for field in ("k", "v", "w_k", "w_v"):
        assert {f"{field}_kv{i}.csv" for i in range(1, g + 1)} <= names and f"{field}_head1.csv" not in names
        for i in range(g):
            back = np.loadtxt(tmp_path / f"{field}_kv{i + 1}.csv", delimiter=",", ndmin=2)
            np.testing.assert_array_equal(back.astype(np.float32), getattr(result, field)[i].numpy())
    assert {f"q_head{h}.csv" for h in range(1, cfg.heads + 1)} <= names  # query heads keep their names


def test_a_long_subtitle_wraps_instead_of_widening_the_figure(qtbot):
    """Issue 47: SmolLM2's subtitle (nine heads, five next tokens) made figure.png as wide as itself, half of it
    blank beside the maps. The picture stays as wide as its maps; the subtitle wraps in a taller band."""
    body = QtGui.QImage(700, 300, QtGui.QImage.Format.Format_ARGB32)
    body.fill(QtGui.QColor("navy"))  # the maps: ink over the whole body
    subtitle = " · ".join(["SmolLM2-135M (decoder), layer 1 of 30", "T = 5 tokens", "9 heads sharing 3 key/value heads",
                           "next token: “␣Paris” 77.3%, “␣the” 6.5%, “␣London” 1.2%, “␣Le” 1.0%, “␣New” 0.9%"] * 2)
    image = offscreen._with_title(body, "“The capital of France is”", subtitle)
    assert image.width() == 700
    band = image.height() - body.height()
    assert band > offscreen.TITLE_H  # two lines of subtitle, or more
    text = pixels(image.copy(0, 0, image.width(), band))
    ink = (text < 200).any(axis=2)
    assert ink[band // 2:].any(axis=1).sum() > 20 and ink.any(axis=0)[600:].any()  # wrapped lines reach the right

"""The HTML page to share: self-contained, its read-outs the window's, its walk the window's.

The page's hover is checked in a real browser (headless Chromium, where installed: the
page is for browsers, and Python has none); everything else is checked here against the
result's tensors and the window's own read-out (``present.maps.describe_cell``).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from attn_gui.engine import AttentionConfig, compute
from attn_gui.present.frame import make_frame
from attn_gui.present.maps import describe_cell, map_data


class Links(HTMLParser):
    """Every attribute that can load something (src, href, ...), and the scripts' JSON."""

    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self._json = False
        self.json = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "data", "poster", "background"):
                self.links.append((tag, name, value or ""))
        self._json = tag == "script" and ("type", "application/json") in attrs

    def handle_endtag(self, tag):
        self._json = False

    def handle_data(self, data):
        if self._json:
            self.json += data


@pytest.fixture(scope="module")
def result():
    return compute(AttentionConfig(sentence="When in doubt look intelligent", heads=2, d_k=3, d_v=3, causal=True))


@pytest.fixture(scope="module")
def page(result):
    import attn_gui

    return attn_gui.to_html(result, head=1, token=2)


def parse(text: str) -> Links:
    links = Links()
    links.feed(text)
    return links


def test_page_loads_nothing_from_outside(page):
    links = parse(page)
    assert links.links, "the maps are images"
    for tag, name, value in links.links:
        assert value.startswith("data:image/png;base64,"), (tag, name, value[:80])
        assert base64.b64decode(value.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", re.sub(r"data:[^'\"]*", "", page)), \
        "no URL anywhere in the page"
    assert "link" not in links.tags and "iframe" not in links.tags


def test_page_values_are_the_results(page, result):
    """Each cell's value in the page is the result's tensor (the per-head maps at head 2)."""
    data = json.loads(parse(page).json)
    maps = {m["field"]: m["cells"] for m in data["maps"]}
    assert set(maps) == set(result.fields())
    alpha = result.weights[1]
    for r in range(result.seq_len):
        for c in range(result.seq_len):
            assert maps["weights"]["values"][r][c] == f"{float(alpha[r, c]):.6g}"
    assert maps["weights"]["notes"][0] == "-mmmm", "causal: the keys after the query are masked"
    assert maps["x"]["values"][3][1] == f"{float(result.x[3, 1]):.6g}"
    assert data["token"] == 2 and set(data["walks"]) == {str(t) for t in range(result.seq_len)}


def test_export_page_writes_whole_and_refuses(tmp_path, result):
    from attn_gui.export.bundle import ExportTooLarge
    from attn_gui.export.files import ExportError
    from attn_gui.export.page import export_page

    frame = make_frame(0, result)
    path = export_page(frame, tmp_path / "a.html")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(ExportError, match=r"\.html"):
        export_page(frame, tmp_path / "a.png")
    with pytest.raises(ExportTooLarge):
        export_page(frame, tmp_path / "b.html", confirm_over=1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html"], "nothing written, no temporary left"


def test_cli_export_html(tmp_path):
    from attn_gui.cli import main

    out = tmp_path / "p.html"
    assert main(["export", "--format", "html", "--out", str(out), "--sentence", "one two three"]) == 0
    assert "“one two three”" in out.read_text(encoding="utf-8")
    assert main(["export", "--format", "html,png", "--out", str(out)]) == 2
    assert main(["export", "--format", "html", "--out", str(tmp_path)]) == 2


HOVER = """
<script>
window.addEventListener('load', function () {
  const out = [];
  const fig = document.querySelector('figure.large'), img = fig.querySelector('img');
  const map = DATA.maps[Number(fig.dataset.index)], g = map.grid, box = img.getBoundingClientRect();
  const R = map.cells.rows.length, C = map.cells.cols.length;
  const at = (r, c) => [box.left + (g[0] + (c + 0.5) / C * (g[2] - g[0])) * box.width,
                        box.top + (g[1] + (r + 0.5) / R * (g[3] - g[1])) * box.height];
  for (const [r, c] of CELLS) {
    const [x, y] = at(r, c);
    img.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true}));
    out.push(document.getElementById('readout').textContent);
  }
  const [x, y] = at(3, 0);
  img.dispatchEvent(new MouseEvent('click', {clientX: x, clientY: y, bubbles: true}));
  out.push(document.getElementById('walk').querySelector('h3').textContent);
  const pre = document.createElement('pre'); pre.id = 'hovered'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium is not installed")
def test_hover_in_a_browser_reads_as_the_window(tmp_path, result, page):
    """Hovering the centre of a cell in Chromium shows the window's read-out of that cell; clicking a
    row follows its token."""
    cells = [(0, 0), (1, 0), (0, 3), (4, 4), (2, 1)]
    html = page.replace("</body>", f"<script>const CELLS = {json.dumps(cells)};</script>{HOVER}</body>")
    path = tmp_path / "hover.html"
    path.write_text(html, encoding="utf-8")
    run = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1366,768",
                          "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="hovered">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stderr[-2000:]
    shown = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                       .replace("&gt;", ">"))
    data = map_data(make_frame(0, result), "weights", 1)
    assert shown[:-1] == [describe_cell(data, r, c) for r, c in cells]
    assert shown[-1].startswith("Following x4 “look”, head 2 of 2")


def test_notebook_view_without_a_window(tmp_path):
    """``attn_gui.notebook.view`` computes and draws offscreen: the page of the same config's result."""
    import attn_gui

    page = attn_gui.notebook.view(sentence="one two three", heads=2, head=1)
    data = json.loads(parse(page.html).json)
    weights = {m["field"]: m["cells"] for m in data["maps"]}["weights"]
    reference = compute(AttentionConfig(sentence="one two three", heads=2)).weights[1]
    assert weights["values"][2][0] == f"{float(reference[2, 0]):.6g}"
    assert page._repr_html_().startswith("<iframe srcdoc=")
    assert page.save(tmp_path / "p.html").read_text(encoding="utf-8") == page.html


def test_each_picture_is_drawn_as_wide_as_the_page_shows_it_and_every_heads_alpha_is_there(page, result):
    """Issue 47: SmolLM2's maps were drawn up to 1800 px wide and shown 420 px wide (titles of 4-5 px), and the page
    held head 1's per-head maps only. Each picture is now drawn at the width the page shows it, and α of every
    head is on the page with its values."""
    from PySide6 import QtGui

    from attn_gui.export.page import PAGE_HEAD_W, PAGE_LARGE_W, PAGE_SMALL_W

    links = parse(page)
    widths = []
    for _, _, value in links.links:
        image = QtGui.QImage.fromData(base64.b64decode(value.split(",", 1)[1]), "PNG")
        widths.append(image.width())
    # in the page's order: alpha at the top, alpha of each head, then every map (alpha's picture the top one's)
    shown = [PAGE_LARGE_W] + [PAGE_HEAD_W] * result.heads + [
        PAGE_LARGE_W if f == "weights" else PAGE_SMALL_W for f in re.findall(r"data-list='maps' data-index='\d+' "
                                                                             r"data-field='(\w+)'", page)[1:]]
    assert len(widths) == len(shown)
    for width, css in zip(widths, shown, strict=True):  # its own size (a small map cropped to itself), padding
        assert 0.4 * css <= width <= css + 40, (width, css)
    assert re.search(rf"figure.small {{ width: {PAGE_SMALL_W}px", page)
    assert "figure.map img { display: block; width: auto; max-width: 100%;" in page  # never scaled up
    data = json.loads(links.json)
    assert len(data["heads"]) == result.heads
    for i, head in enumerate(data["heads"]):
        assert head["cells"]["head"] == i
        assert head["cells"]["values"][3][1] == f"{float(result.weights[i, 3, 1]):.6g}"


HOSTILE = "a <!--<script> b </script> c"  # word tokens: a, <!--<script>, b, </script>, c


def _script_text(page: str) -> str:
    """The text of the page's <script type="application/json"> element, up to the first "</script" (where an
    HTML parser ends it)."""
    start = page.index('<script type="application/json" id="attn-data">') + len(
        '<script type="application/json" id="attn-data">')
    return page[start:page.lower().index("</script", start)]


def test_tokens_that_are_markup_stay_text_inside_the_pages_json():
    """``<!--<script>`` inside a script element puts the HTML parser in its double-escaped state (the element,
    and the page's own script after it, never end); no ``<``, ``>`` or ``&`` is left there."""
    import attn_gui

    result = compute(AttentionConfig(sentence=HOSTILE, heads=2, d_k=3, d_v=3))
    assert "<!--<script>" in result.tokens
    text = _script_text(attn_gui.to_html(result, head=0, token=1))
    assert not set("<>&") & set(text)
    data = json.loads(text)
    assert data["maps"][0]["cells"]["rows"] == list(result.tokens)  # the same strings, once parsed


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium is not installed")
def test_the_pages_script_runs_with_such_tokens(tmp_path):
    import attn_gui

    result = compute(AttentionConfig(sentence=HOSTILE, heads=2, d_k=3, d_v=3))
    page = attn_gui.to_html(result, head=0, token=1)
    probe = ("<script>window.addEventListener('load', function () { const pre = document.createElement('pre');"
             " pre.id = 'ran'; pre.textContent = typeof DATA + ' ' + document.querySelector('#walk h3').textContent;"
             " document.body.appendChild(pre); });</script>")
    path = tmp_path / "page.html"
    path.write_text(page.replace("</body>", probe + "</body>"), encoding="utf-8")
    run = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
                          "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="ran">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stderr[-2000:]
    assert found.group(1).startswith("object Following x2 “&lt;!--&lt;script&gt;”")

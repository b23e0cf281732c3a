"""One self-contained HTML page of a result, to share: the maps, their hover values, the token walk.

The page needs no network and no Python: every map is a PNG drawn by ``export.images``
(the window's own drawing) and embedded as base64; each map's read-outs travel as JSON
beside it, and a few lines of JavaScript name the cell under the pointer as the window's
read-out does (``present.maps.describe_cell``). Clicking a query row follows that token:
the walk of every query token (``present.walk``) is embedded, up to ``MAX_WALKS`` tokens.
Nothing in the page points outside it (no ``src`` or ``href`` to any URL).
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..engine import FIELDS
from ..present.explain import figure_caption
from ..present.frame import Frame
from ..present.formats import format_value
from ..present.maps import STAGES, MapData, axis_name, map_data, special_tokens
from ..present.walk import walk_html
from .bundle import CONFIRM_BYTES, CONFIRM_SECONDS, PNG_PER_PIXEL, PNG_SECONDS, ExportTooLarge, image_sizes
from .files import ExportError, atomic_write
from .folder import Cancelled

MAX_WALKS = 128  # query tokens whose walk is embedded (each a few kB); longer inputs embed the followed one
CELL_JSON_BYTES = 10  # a cell's value as JSON text, about
REDUCED = " (largest magnitude in this block; zoom in or export for every cell)"  # as describe_cell says


def page_maps(frame: Frame, head: int) -> list[tuple[str, int | None]]:
    """(field, head) of the maps the page shows: every field of the result once, the per-head ones
    at ``head``, in the window's data-flow order."""
    present = frame.result.fields()
    return [(f, head if FIELDS[f].per_head else None) for _, names, _ in STAGES for f in names if f in present]


def readouts(data: MapData) -> dict:
    """What the page needs to name any cell of ``data`` as ``describe_cell`` does, as plain JSON.

    Values are written as the read-out writes them (6 significant digits, or the symbol of a
    non-finite value); ``notes`` holds one letter per cell: "m" masked, "o" overflow, "-" none.
    """
    R, C = data.matrix.shape
    values, notes = [], []
    masked = data.masked
    for r in range(R):
        row_values, row_notes = [], []
        for c in range(C):
            v = float(data.matrix[r, c])
            row_values.append(f"{v:.6g}" if np.isfinite(v) else format_value(v))
            if np.isneginf(v) or (masked is not None and masked[r, c]):
                row_notes.append("m")
            else:
                row_notes.append("-" if np.isfinite(v) else "o")
        values.append(row_values)
        notes.append("".join(row_notes))
    pooled = lambda blocks, i: bool(blocks and blocks[i][1] - blocks[i][0] > 1)  # noqa: E731
    return {
        "symbol": data.symbol,
        "arrow": data.pair_arrow,
        "head": data.head,
        "rows": [axis_name(data.row_labels, data.row_blocks, r, data.row_tokens) for r in range(R)],
        "cols": [axis_name(data.col_labels, data.col_blocks, c, data.col_tokens) for c in range(C)],
        "rowPooled": [pooled(data.row_blocks, r) for r in range(R)],
        "colPooled": [pooled(data.col_blocks, c) for c in range(C)],
        "firstRow": [data.row_blocks[r][0] if data.row_blocks else r for r in range(R)],
        "values": values,
        "notes": notes,
        "maskedReason": data.masked_reason,
        "overflow": "not finite: overflow in this dtype",
        "reduced": REDUCED,
        "queryRows": data.query_rows,
    }


PAGE_LARGE_W, PAGE_SMALL_W, PAGE_HEAD_W = 600, 440, 260  # the pictures' widths as the page shows them
PAGE_MIN_H, PAGE_MAX_H = 240, 720


def picture_size(data: MapData, width: int) -> tuple[int, int]:
    """The size at which the page draws a map of ``data`` ``width`` px wide, as it shows it: ``map_size``'s shape at
    that width, between ``PAGE_MIN_H`` and ``PAGE_MAX_H`` tall. Drawn at ``map_size`` (up to 1800 x 1400) and shown
    420 px wide, SmolLM2's maps had titles and axes of 4 to 5 px."""
    from ..render.offscreen import map_size

    w, h = map_size(data)
    return width, round(min(PAGE_MAX_H, max(PAGE_MIN_H, h * width / w)))


def _picture(data: MapData, width: int = PAGE_SMALL_W) -> tuple[bytes, list[float]]:
    """The map's PNG, ``width`` px wide (``picture_size``), and where its cells lie in it: [left, top, right,
    bottom] as fractions of the picture."""
    from pyqtgraph.exporters import ImageExporter

    from ..render.offscreen import dispose, render_map
    from .images import PADDING, png_bytes, render_image

    view = render_map(data, *picture_size(data, width))
    try:
        image = render_image(view)
        source = ImageExporter(view.ci).getSourceRect()
        R, C = data.matrix.shape
        first, last = view.item.cell_scene_rect(0, 0), view.item.cell_scene_rect(R - 1, C - 1)
        scale = image.width() / (source.width() + 2 * PADDING)  # as render_image scaled the scene
        x = lambda s: (PADDING + s - source.left()) * scale / image.width()  # noqa: E731
        y = lambda s: (PADDING + s - source.top()) * scale / image.height()  # noqa: E731
        grid = [x(first.left()), y(first.top()), x(last.right()), y(last.bottom())]
        return png_bytes(image), grid
    finally:
        dispose(view)


def page_html(frame: Frame, head: int = 0, token: int | None = 0, hide_special: bool = False,
              scales: dict | tuple = (), focus: str | None = None) -> str:
    """The page of ``frame`` as the window shows it: head ``head``, token ``token`` followed.

    Parameters
    ----------
    frame : Frame
    head : int
        The head of the per-head maps, 0-based.
    token : int or None
        The query token whose walk is shown first, 0-based (None: the first).
    hide_special : bool
        Leave the model's special tokens out of the maps, as the window's option does.
    scales : dict or tuple of (field, mode) pairs
        Colour scales per map (``present.scales``); a field not named is drawn on "auto".
    focus : str, optional
        The map shown large at the top, beside the walk (default: the weights α).

    Returns
    -------
    str
        A whole HTML document; it loads nothing from outside itself.
    """
    from ..render.offscreen import ensure_app

    ensure_app()
    result = frame.result
    if not 0 <= head < result.heads:
        raise ExportError(f"head must be between 1 and {result.heads}; got {head + 1}")
    token = 0 if token is None or not 0 <= token < result.seq_len else token
    scales = dict(scales)
    hidden = special_tokens(result) if hide_special else ()
    fields = [field for field, _ in page_maps(frame, head)]
    top_field = focus if focus in fields else "weights"
    maps = []
    for field, h in page_maps(frame, head):  # the map at the top is drawn as large as it is shown there
        maps.append(_entry(map_data(frame, field, h, hidden, scales.get(field, "auto")),
                           PAGE_LARGE_W if field == top_field else PAGE_SMALL_W))
    # alpha of every head, as the window's strip shows it (the other per-head maps are ``head``'s)
    heads = [_entry(_head_alpha(frame, i, hidden, scales.get("weights", "auto")), PAGE_HEAD_W)
             for i in range(result.heads)] if result.heads > 1 else []
    walk_tokens = range(result.seq_len) if result.seq_len <= MAX_WALKS else [token]
    walks = {str(t): walk_html(result, t, head) for t in walk_tokens}
    title, subtitle = figure_caption(result, head)
    return _document(title, subtitle, maps, walks, token, fields.index(top_field), heads)


def _head_alpha(frame: Frame, head: int, hidden: tuple[int, ...], scale: str) -> MapData:
    """Alpha of ``head``, titled short as the window's strip titles it ("α, head 2")."""
    data = map_data(frame, "weights", head, hidden, scale)
    data.title = f"α, head {head + 1}"
    return data


def _entry(data: MapData, width: int) -> dict:
    png, grid = _picture(data, width)
    return {"field": data.field, "title": data.title, "png": base64.b64encode(png).decode("ascii"), "grid": grid,
            "cells": readouts(data)}


def _figure(maps: list[dict], i: int, css: str, group: str = "maps") -> str:
    m = maps[i]
    field = html.escape(m["field"])
    return (f"<figure class='map {css}' data-list='{group}' data-index='{i}' data-field='{field}'>"
            f"<img alt='{html.escape(m['title'])}' src='data:image/png;base64,{m['png']}'></figure>")


def script_json(data) -> str:
    """``data`` as JSON to put inside a ``<script>`` element: every ``<``, ``>`` and ``&`` written as its
    ``\\u`` escape (the same string to ``JSON.parse``), so no token (``</script>``, ``<!--<script>``, which
    would end the element or put the HTML parser in its double-escaped state and stop the page's own
    script) is ever markup there."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _document(title: str, subtitle: str, maps: list[dict], walks: dict[str, str], token: int, top: int,
              heads: list[dict] | None = None) -> str:
    figures = [_figure(maps, i, "small") for i in range(len(maps))]
    heads = heads or []
    strip = ("<h2>α of every head</h2><div class=\"maps\">"
             + "".join(_figure(heads, i, "head", "heads") for i in range(len(heads))) + "</div>") if heads else ""
    keep = ("field", "grid", "cells")
    data = {"maps": [{k: m[k] for k in keep} for m in maps], "heads": [{k: m[k] for k in keep} for m in heads],
            "walks": walks, "token": token}
    payload = script_json(data)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="generator" content="Attention Explorer (attn-gui)">
<title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 16px; color: #141414; background: white; }}
h1 {{ font-size: 18px; margin: 0 0 2px 0; }}
.subtitle {{ color: #3c3c46; margin: 0 0 12px 0; }}
.top {{ display: flex; gap: 16px; align-items: flex-start; }}
.maps {{ display: flex; flex-wrap: wrap; gap: 8px; align-items: flex-start; }}
figure.map {{ margin: 0; }}
figure.large {{ flex: 0 0 auto; width: {PAGE_LARGE_W}px; max-width: 60%; }}
figure.small {{ width: {PAGE_SMALL_W}px; max-width: 100%; }}
figure.head {{ width: {PAGE_HEAD_W}px; max-width: 100%; }}
figure.map img {{ display: block; width: auto; max-width: 100%; cursor: crosshair; }}
h2 {{ font-size: 15px; margin: 16px 0 6px 0; }}
#readout {{ position: fixed; display: none; background: #ffffe8; border: 1px solid #888; padding: 2px 6px;
  font-size: 13px; pointer-events: none; white-space: nowrap; z-index: 10; }}
#walk {{ flex: 1 1 auto; font-size: 13px; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="subtitle">{html.escape(subtitle)}. Hover a cell for its value; click a row of a query map to follow
that token.</p>
<div class="top">{_figure(maps, top, "large")}<div id="walk"></div></div>
{strip}
<h2>Every step, as the data flows</h2>
<div class="maps">{''.join(figures)}</div>
<div id="readout"></div>
<script type="application/json" id="attn-data">{payload}</script>
<script>
{SCRIPT}
</script>
</body></html>
"""


# cellAt and describe mirror HeatmapView.cell_at and present.maps.describe_cell
SCRIPT = """
const DATA = JSON.parse(document.getElementById('attn-data').textContent);
const readout = document.getElementById('readout');
function cellAt(map, img, clientX, clientY) {
  const box = img.getBoundingClientRect(), g = map.grid, cells = map.cells;
  const fx = (clientX - box.left) / box.width, fy = (clientY - box.top) / box.height;
  const c = Math.floor((fx - g[0]) / (g[2] - g[0]) * cells.cols.length);
  const r = Math.floor((fy - g[1]) / (g[3] - g[1]) * cells.rows.length);
  if (r < 0 || c < 0 || r >= cells.rows.length || c >= cells.cols.length) return null;
  return [r, c];
}
function describe(cells, r, c) {
  const where = cells.arrow ? cells.rows[r] + ' \\u2192 ' + cells.cols[c] : cells.rows[r] + ', ' + cells.cols[c];
  let text = cells.symbol + '[' + where + '] = ' + cells.values[r][c];
  if (cells.head !== null) text += ', head ' + (cells.head + 1);
  if (cells.rowPooled[r] || cells.colPooled[c]) text += cells.reduced;
  const note = cells.notes[r][c];
  if (note === 'm') text += ' (' + cells.maskedReason + ')';
  else if (note === 'o') text += ' (' + cells.overflow + ')';
  return text;
}
function follow(token) {
  const walk = DATA.walks[String(token)];
  if (walk !== undefined) document.getElementById('walk').innerHTML = walk;
}
document.querySelectorAll('figure.map').forEach(function (figure) {
  const map = DATA[figure.dataset.list][Number(figure.dataset.index)], img = figure.querySelector('img');
  img.addEventListener('mousemove', function (e) {
    const cell = cellAt(map, img, e.clientX, e.clientY);
    if (cell === null) { readout.style.display = 'none'; return; }
    readout.textContent = describe(map.cells, cell[0], cell[1]);
    readout.dataset.field = map.field;
    readout.style.left = (e.clientX + 14) + 'px';
    readout.style.top = (e.clientY + 10) + 'px';
    readout.style.display = 'block';
  });
  img.addEventListener('mouseleave', function () { readout.style.display = 'none'; });
  img.addEventListener('click', function (e) {
    const cell = cellAt(map, img, e.clientX, e.clientY);
    if (cell !== null && map.cells.queryRows) follow(map.cells.firstRow[cell[0]]);
  });
});
follow(DATA.token);
"""


def estimate(frame: Frame, head: int) -> tuple[int, float]:
    """About how many bytes the page takes and how many seconds it takes to draw (ExportError if a
    picture would be too large to draw)."""
    keys = [(field, field, h) for field, h in page_maps(frame, head)]
    sizes = image_sizes(frame, keys, None)
    pixels = sum(w * h for w, h, _ in sizes)
    cells = sum(frame.arrays[f].shape[-2] * frame.arrays[f].shape[-1] for f, _ in page_maps(frame, head))
    walks = min(frame.result.seq_len, MAX_WALKS) * 4000  # a walk is a few kB of HTML
    need = round(4 / 3 * PNG_PER_PIXEL * pixels + CELL_JSON_BYTES * cells + walks)  # base64: 4 bytes per 3
    seconds = PNG_SECONDS[0] * len(sizes) + PNG_SECONDS[1] * pixels
    return need, seconds


def export_page(frame: Frame, path: str | os.PathLike, head: int = 0, token: int | None = 0,
                hide_special: bool = False, scales: dict | tuple = (), focus: str | None = None,
                confirm_over: int | None = CONFIRM_BYTES, confirm_seconds: float | None = CONFIRM_SECONDS,
                cancel: Callable[[], bool] | None = None) -> Path:
    """Write the page of ``frame`` (see ``page_html``) to ``path``, whole or not at all.

    Raises
    ------
    ExportTooLarge
        Estimated larger than ``confirm_over`` bytes or longer than ``confirm_seconds`` to
        draw: refused before anything is drawn or written (None: no limit).
    ExportError
        ``path`` does not end in .html, or a picture would be too large to draw.
    WriteError
        The file cannot be written; an earlier file of that name is unchanged.
    Cancelled
        ``cancel()`` returned True once the page was drawn: nothing was written.
    """
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ExportError(f"a page is one HTML file: name it .html (got {path.name or str(path)})")
    need, seconds = estimate(frame, head)
    if (confirm_over is not None and need > confirm_over) or (
            confirm_seconds is not None and seconds > confirm_seconds):
        raise ExportTooLarge(need, seconds, confirm_over, confirm_seconds)
    text = page_html(frame, head, token, hide_special, scales, focus)
    if cancel is not None and cancel():
        raise Cancelled(str(path))
    atomic_write(path, text.encode("utf-8"))
    return path

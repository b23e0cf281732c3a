"""What a found circuit (``engine.analysis.circuits.Circuit``) shows: its edges as rows, the graph laid out layer by
layer, and the graph and the faithfulness curve as SVG (Qt-free: the export renders the SVG to PNG, the dock draws
the same layout).

The layout follows the one canvas's conventions: the embedding at the bottom, each layer's heads in a row above the
layer below, its MLP at the row's right end, the logits at the top. An edge into a head's query, key or value input
ends below the head, left, middle or right, so that K- and Q-composition are told apart at a glance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from html import escape

from ..engine.analysis.circuits import Circuit
from ..engine.analysis.circuits.graph import Graph
from ..engine.analysis.circuits.scores import Faithfulness, ranked

POSITIVE, NEGATIVE = "#2166ac", "#b2182b"  # RdBu's ends, as the signed maps: blue raises the metric, red lowers it
PORT = {"q": -0.28, "k": 0.0, "v": 0.28}  # where a head's inputs sit below it, in node widths


@dataclass(frozen=True)
class EdgeRow:
    """One edge of the circuit, for the CSV and the dock: its rank by |score| (1 the largest)."""

    rank: int
    writer: str
    reader: str
    kind: str  # "q", "k", "v", "mlp" or "logits": what the reader is
    score: float
    writer_index: int
    reader_index: int


def edge_rows(found: Circuit) -> list[EdgeRow]:
    """Every edge of the graph, largest |score| first."""
    g = found.graph
    rows = []
    for rank, (u, r) in enumerate(ranked(found.scores, g.allowed).tolist(), start=1):
        rows.append(EdgeRow(rank, g.writer_names[u], g.reader_names[r], g.reader_kind(r)[0],
                            float(found.scores[u, r]), u, r))
    return rows


def node_rows(found: Circuit) -> list[tuple[str, float]]:
    """Every writer and its score (the sum of its edges': attribution patching of the node, for EAP)."""
    return [(name, float(v)) for name, v in zip(found.graph.writer_names, found.nodes.tolist(), strict=True)]


@dataclass(frozen=True)
class Layout:
    """Where each node sits, in units: x from 0 to ``width``, y from 0 (the embedding) up to ``height`` (the logits).

    writers : (x, y) of each writer (``Graph`` order); readers : (x, y) of each reader's port
    """

    writers: tuple[tuple[float, float], ...]
    readers: tuple[tuple[float, float], ...]
    width: float
    height: float


def layout(g: Graph) -> Layout:
    """The graph laid out by layer (module docstring): a head at column i + 0.5 of row 2 l + 1 (its MLP at
    column h + 0.5 of row 2 l + 2), the embedding and the logits centred."""
    width = g.heads + 1.0
    height = 2.0 * g.layers + 1
    centre = width / 2
    writers = [(centre, 0.0)]
    for layer in range(g.layers):
        writers += [(i + 0.5, 2.0 * layer + 1) for i in range(g.heads)] + [(g.heads + 0.5, 2.0 * layer + 2)]
    readers = []
    for r in range(g.n_readers):
        kind, _ = g.reader_kind(r)
        layer = g.reader_layer(r)
        if kind == "logits":
            readers.append((centre, height))
        elif kind == "mlp":
            readers.append((g.heads + 0.5, 2.0 * layer + 2 - 0.3))
        else:
            heads = g.reader_heads(r)
            x = (heads.start + heads.stop) / 2
            readers.append((x + PORT[kind], 2.0 * layer + 1 - 0.3))
    return Layout(tuple(writers), tuple(readers), width, height)


def top_edges(found: Circuit, k: int) -> list[EdgeRow]:
    """The ``k`` edges of largest |score| that are not 0."""
    return [row for row in edge_rows(found)[:max(0, k)] if row.score != 0]


def _frame(width: int, height: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">\n'
            f'<rect width="{width}" height="{height}" fill="white"/>\n'
            f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="14">{escape(title)}</text>\n'
            + "\n".join(body) + "\n</svg>\n")


DIGIT_PX = 6.5  # the width of a digit at font-size 10 in a sans-serif font (DejaVu Sans: 6.36)
MARGINS = (60, 20, 40, 30)  # left, right, top, bottom of the graph picture, in pixels


def to_pixels(at: Layout, width: int, height: int) -> tuple[Callable[[float, float], tuple[float, float]], float]:
    """The map from layout units to the picture's pixels (y upwards to downwards), and the pixels of one unit in x."""
    left, right, top, bottom = MARGINS
    sx = (width - left - right) / at.width
    sy = (height - top - bottom) / at.height

    def point(x: float, y: float) -> tuple[float, float]:
        return left + x * sx, height - bottom - y * sy
    return point, sx


def node_radius(unit: float) -> float:
    return max(6.0, min(16.0, unit * 0.3))


def pick_writer(g: Graph, x: float, y: float, width: int, height: int, middle: bool = False) -> int | None:
    """The writer whose node holds the pixel (``x``, ``y``) of a ``width`` x ``height`` graph picture, or None;
    ``middle``: only within half its radius (a click on an edge drawn over it picks the edge elsewhere)."""
    at = layout(g)
    point, unit = to_pixels(at, width, height)
    reach = node_radius(unit) / 2 if middle else node_radius(unit) + 3  # a few pixels of slack round the circle
    best, where = None, reach * reach
    for u, (wx, wy) in enumerate(at.writers):
        px, py = point(wx, wy)
        d = (px - x) ** 2 + (py - y) ** 2
        if d <= where:
            best, where = u, d
    return best


def readable_size(g: Graph) -> tuple[int, int]:
    """The smallest picture that keeps every node and label apart: 90 pixels a column and 24 a half-row (SmolLM2's
    30 x 9 heads: 980 x 1534 pixels; drawn into a dock's 797 x 302 its nodes ran together)."""
    return 90 * (g.heads + 1) + 80, 24 * (2 * g.layers + 1) + 70


def graph_size(g: Graph) -> tuple[int, int]:
    """The picture size of a file: ``readable_size``, 900 x 700 at least."""
    width, height = readable_size(g)
    return max(900, width), max(700, height)


def graph_svg(found: Circuit, k: int = 20, width: int = 900, height: int = 700, short: bool = False,
              chosen: tuple[int, int] | None = None) -> str:
    """The top ``k`` edges on the layered graph: width |score| (the largest 6 px), colour the sign; ``short``: a
    title without the method, task and model (a dock that says them beside it); ``chosen``: an edge (writer, reader)
    drawn over a wide yellow band, the one looked at."""
    g = found.graph
    at = layout(g)
    point, sx = to_pixels(at, width, height)

    edges = top_edges(found, k)
    largest = max((abs(e.score) for e in edges), default=1.0) or 1.0
    used = {e.writer_index for e in edges} | {0}
    body = []
    for layer in range(g.layers):
        _, y = point(0, 2.0 * layer + 1)
        body.append(f'<text x="8" y="{y + 4:.1f}" fill="#555">L{layer + 1}</text>')
    if chosen is not None:
        (x0, y0), (x1, y1) = point(*at.writers[chosen[0]]), point(*at.readers[chosen[1]])
        body.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#facc15" '
                    'stroke-width="12" stroke-opacity="0.7" stroke-linecap="round"/>')
    for e in sorted(edges, key=lambda e: abs(e.score)):  # the largest drawn last, on top
        x0, y0 = point(*at.writers[e.writer_index])
        x1, y1 = point(*at.readers[e.reader_index])
        stroke = POSITIVE if e.score > 0 else NEGATIVE
        body.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="{stroke}" '
                    f'stroke-width="{0.5 + 5.5 * abs(e.score) / largest:.2f}" stroke-opacity="0.8">'
                    f'<title>{escape(e.writer)} -> {escape(e.reader)}: {e.score:+.4g}</title></line>')
    r = node_radius(sx)
    for reader in sorted({e.reader_index for e in edges}):  # the inputs the drawn edges reach, named
        kind, _ = g.reader_kind(reader)
        if kind in PORT:
            px, py = point(*at.readers[reader])
            body.append(f'<text x="{px:.1f}" y="{py + 11:.1f}" text-anchor="middle" font-size="9" '
                        f'fill="#555">{kind}</text>')
    for u, (x, y) in enumerate(at.writers):
        cx, cy = point(x, y)
        if u not in used:  # a node no drawn edge touches: a dot, unnamed (30 x 9 named heads ran together)
            body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2" fill="#cccccc"/>')
            continue
        body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="#fde68a" stroke="#444"/>')
        name = "MLP" if g.writer_head(u) is None and u else g.writer_names[u]
        body.append(f'<text x="{cx + r + 3:.1f}" y="{cy + 4:.1f}" font-size="10">{escape(name)}</text>')
    lx, ly = point(at.width / 2, at.height)
    body.append(f'<rect x="{lx - 30:.1f}" y="{ly - 12:.1f}" width="60" height="20" fill="#dbeafe" stroke="#444"/>'
                f'<text x="{lx:.1f}" y="{ly + 3:.1f}" text-anchor="middle">logits</text>')
    title = (f"{found.method.upper()} on {found.task} ({found.model}): " if not short else "") + (
        f"the {len(edges)} largest of {g.n_edges} edges; blue raises {found.metric}, red lowers it")
    return _frame(width, height, body, title)


def curve_estimate(seconds: float, points: int) -> str:
    """The faithfulness curve's cost, said once its first point is measured (the CLI's line, the Circuit dock's)."""
    took = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
    return f"the faithfulness curve: about {took} more (about {points} more points)"


def faithfulness_svg(curve: Faithfulness, width: int = 640, height: int = 400, title: str = "") -> str:
    """The recovered fraction over k (the ks evenly spaced, labelled), the target dashed, the smallest circuit
    marked."""
    left, right, top, bottom = 60, 20, 40, 50
    values = [v for v in curve.recovered if v == v] or [0.0]  # NaN (no gap) plots nothing
    low, high = min(0.0, *values), max(1.0, *values)
    n = len(curve.ks)

    def point(i: int, v: float) -> tuple[float, float]:
        x = left + (width - left - right) * (i / max(1, n - 1))
        return x, top + (height - top - bottom) * (high - v) / (high - low)

    body = []
    for v in (0.0, 0.5, 1.0, curve.target):
        _, y = point(0, v)
        dash = ' stroke-dasharray="5,4"' if v == curve.target else ""
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#bbb"{dash}/>'
                    f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    pts = [point(i, v) for i, v in enumerate(curve.recovered) if v == v]
    body.append('<polyline fill="none" stroke="#2166ac" stroke-width="2" points="'
                + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
    # every ``step``-th k labelled, so that no two labels run together ("2000500010000200005000070651" in a dock)
    spacing = (width - left - right) / max(1, n - 1)
    step = max(1, math.ceil((DIGIT_PX * max((len(str(k)) for k in curve.ks), default=1) + 8) / spacing))
    for i, k in enumerate(curve.ks):
        x, y = point(i, curve.recovered[i] if curve.recovered[i] == curve.recovered[i] else 0.0)
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#2166ac"/>')
        if i % step == 0:
            body.append(f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle" font-size="10">{k}</text>')
    body.append(f'<text x="{width / 2:.1f}" y="{height - 8}" text-anchor="middle">edges kept (k)</text>')
    smallest = (f"smallest circuit recovering {curve.target:.0%}: {curve.smallest} edges" if curve.smallest
                is not None else f"no circuit recovers {curve.target:.0%}")
    return _frame(width, height, body, title or f"Fraction of the metric recovered; {smallest}")


def _to_segment(px: float, py: float, a: tuple[float, float], b: tuple[float, float]) -> float:
    """The squared distance from (px, py) to the segment a-b."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    t = 0.0 if dx == dy == 0 else max(0.0, min(1.0, ((px - a[0]) * dx + (py - a[1]) * dy) / (dx * dx + dy * dy)))
    return (px - a[0] - t * dx) ** 2 + (py - a[1] - t * dy) ** 2


def pick_edge(found: Circuit, k: int, x: float, y: float, width: int, height: int,
              reach: float = 5.0) -> tuple[int, int] | None:
    """The drawn edge (one of the top ``k``; ``graph_svg``'s lines) passing within ``reach`` pixels of (``x``, ``y``)
    on a ``width`` x ``height`` picture, the nearest, as (writer, reader) indices; or None."""
    at = layout(found.graph)
    point, _ = to_pixels(at, width, height)
    best, where = None, reach * reach
    for e in top_edges(found, k):
        d = _to_segment(x, y, point(*at.writers[e.writer_index]), point(*at.readers[e.reader_index]))
        if d <= where:
            best, where = (e.writer_index, e.reader_index), d
    return best


def edge_middle(found: Circuit, writer: int, reader: int, width: int, height: int) -> tuple[float, float]:
    """The pixel halfway along the line ``graph_svg`` draws for edge ``writer`` -> ``reader``."""
    at = layout(found.graph)
    point, _ = to_pixels(at, width, height)
    (x0, y0), (x1, y1) = point(*at.writers[writer]), point(*at.readers[reader])
    return (x0 + x1) / 2, (y0 + y1) / 2


def alpha_svg(alpha: list[list[float]], tokens: list[str], title: str, width: int = 320, height: int = 320) -> str:
    """α (n x n: query rows, key columns) as a white-to-blue grid, 0 to 1 as the maps' α; tokens along both sides
    while there is room to read them (a cell of 7 pixels or more)."""
    n = len(alpha)
    left, top = 70, 28
    cell = max(1.0, min((width - left - 6) / max(1, n), (height - top - 46) / max(1, n)))
    body = []
    for i, row in enumerate(alpha):
        for j, a in enumerate(row):
            if a > 0.005:  # white is the background: a cell of almost nothing need not be drawn
                shade = round(255 * (1 - min(1.0, max(0.0, a))))
                body.append(f'<rect x="{left + j * cell:.1f}" y="{top + i * cell:.1f}" width="{cell + 0.2:.1f}" '
                            f'height="{cell + 0.2:.1f}" fill="rgb({shade},{shade},255)"/>')
    body.append(f'<rect x="{left}" y="{top}" width="{n * cell:.1f}" height="{n * cell:.1f}" fill="none" '
                'stroke="#888"/>')
    if cell >= 7:
        size = min(10.0, cell * 0.9)
        for i, t in enumerate(tokens[:n]):
            label = escape(t if len(t) <= 10 else t[:9] + "…")
            body.append(f'<text x="{left - 3}" y="{top + (i + 0.75) * cell:.1f}" text-anchor="end" '
                        f'font-size="{size:.1f}">{label}</text>')
            cx, cy = left + (i + 0.5) * cell, top + n * cell + 4
            body.append(f'<text x="{cx:.1f}" y="{cy:.1f}" font-size="{size:.1f}" text-anchor="end" '
                        f'transform="rotate(-90 {cx:.1f} {cy:.1f})">{label}</text>')
    return _frame(width, height, body, title)

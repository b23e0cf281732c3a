"""From a frame to what one heatmap shows: matrix, title, labels, colour scale, read-outs.

The window and the exporter both use ``map_data``, so a picture reads the same in both.
"""

from __future__ import annotations

import html
import re

from dataclasses import dataclass, field

import numpy as np

from ..engine import FIELDS, AttentionResult, formula
from ..engine.kernel.reduce import block_edges
from .explain import explain
from .formats import format_value
from .frame import Frame

NBSP = "\u00a0"

# The window's columns, in data-flow order: (title, fields, relative width).
STAGES: list[tuple[str, tuple[str, ...], int]] = [
    ("1  Embeddings and weights", ("x", "x_source", "w_q", "w_k", "w_v", "b_q", "b_k", "b_v"), 10),
    ("2  Queries, keys, values",
     ("rope_angles", "rope_angles_plain", "q_unrotated", "k_unrotated", "q_normed", "k_normed", "q", "k", "v"), 10),
    ("3  Scores → weights", ("scores", "c2p", "p2c", "position_bias", "scaled", "capped", "weights"), 12),
    ("4  Per-head output", ("head_outputs", "concat"), 10),
    ("5  Output", ("w_o", "b_o", "output"), 10),
]



# where a hook reads each step of a model read through transformers (``engine.sources.via_transformers``)
HOOKED = {"x": "the attention module's input", "q": "the query projection's output",
          "k": "the key projection's output", "q_unrotated": "the query projection's output",
          "k_unrotated": "the key projection's output", "v": "the value projection's output",
          "weights": "output_attentions (eager)", "head_outputs": "the output projection's input, per head",
          "concat": "the output projection's input", "output": "the attention module's output"}


def neighbours(name: str, present: tuple[str, ...], n: int = 2) -> tuple[list[str], list[str]]:
    """The ``n`` fields before and after ``name`` in the data flow (``STAGES`` order), among ``present``."""
    flow = [f for _, names, _ in STAGES for f in names if f in present]
    i = flow.index(name)
    return flow[max(0, i - n):i], flow[i + 1:i + 1 + n]


@dataclass
class MapData:
    """What a heatmap shows: the matrix and how to name its rows, columns and cells.

    Attributes
    ----------
    matrix : (R, C) float array, possibly reduced from a larger one
    title : str
    kind : "weights" (fixed 0..1), "signed" (diverging, centred on 0) or "angle" (0 to its max)
    row_labels, col_labels : labels of the full axes (before reduction)
    row_blocks, col_blocks : [start, end) of the full axis each displayed row/column covers
    symbol : name used in read-outs, e.g. "α"
    head : head index (0-based) or None; titles, read-outs and file names count from 1
    masked_reason : what a -inf cell means ("key after the query")
    pair_arrow : read-outs say "query → key" rather than "row, col"
    field : the result field shown ("weights"), for file names
    masked : (R, C) bool, optional: cells masked although their value is finite (alpha's zeros)
    about : rich text, what this map is (formula, shapes, one plain sentence): the title's tooltip
    row_tokens, col_tokens : the axis runs over token positions (a pooled block is named "1–16", from 1)
    query_rows : the rows are the query tokens (clicking one follows it; the followed one is outlined)
    brief_title : the formula and the shape only, for a small map beside a large one (the
        large map names the head and the layer)
    scale : the colour scale mode (``present.scales``): "auto", "fixed", "max" or "row"
    """

    matrix: np.ndarray
    title: str
    kind: str = "signed"
    row_labels: list[str] = field(default_factory=list)
    col_labels: list[str] = field(default_factory=list)
    row_blocks: list[tuple[int, int]] | None = None
    col_blocks: list[tuple[int, int]] | None = None
    symbol: str = ""
    head: int | None = None
    masked_reason: str = "masked"
    pair_arrow: bool = False
    field: str = ""
    masked: np.ndarray | None = None
    about: str = ""
    row_tokens: bool = False
    col_tokens: bool = False
    query_rows: bool = False
    brief_title: str = ""
    scale: str = "auto"


def map_id(name: str, head: int | None) -> str:
    """The id of a map: ``weights:0`` for head 0 of a per-head field, ``x`` otherwise.

    Widgets are named ``heatmap:<id>``; files use :func:`file_stem`.
    """
    return name if head is None else f"{name}:{head}"


def file_stem(name: str, head: int | None) -> str:
    """The file name (without suffix) of a map: ``weights_head1`` for head 0 (files count heads
    from 1, as the window does), or ``x``."""
    return name if head is None else f"{name}_head{head + 1}"


def special_tokens(result: AttentionResult) -> tuple[int, ...]:
    """Indices of the model's special tokens ([CLS], [SEP], ...) in a model-mode result."""
    spec = result.resolved.spec
    if spec is None:
        return ()
    special = spec.special_tokens  # [UNK] is a real word, not among them
    return tuple(i for i, t in enumerate(result.tokens) if t in special)


def _axis_labels(result: AttentionResult, axis: str, n: int) -> list[str]:
    if axis == "token":
        return list(result.tokens)
    if axis in ("key", "source"):  # the second sentence's tokens in cross-attention
        return list(result.key_tokens)
    return [str(i) for i in range(n)]


def _keep(n: int, hidden: tuple[int, ...]) -> list[int] | None:
    keep = [i for i in range(n) if i not in hidden]
    return keep or None  # a text of special tokens only is shown whole


def map_data(frame: Frame, name: str, head: int | None = None, hidden: tuple[int, ...] = (),
             scale: str = "auto") -> MapData:
    """The MapData of field ``name`` (head ``head`` for per-head fields) in ``frame``.

    ``hidden`` token indices are left out of token axes shown in full (the title says
    "shown r × c"); the numbers of the rest are unchanged. ``scale`` is the colour scale
    mode (``present.scales.SCALES``).
    """
    result, info = frame.result, FIELDS[name]
    matrix = frame.arrays[name]
    # alpha is 0 where a key is masked, a value a real weight can take: its cells are hatched
    # where the scaled scores (reduced the same way) are -inf
    scaled = frame.arrays.get("scaled") if info.kind == "weights" else None  # weights are per head
    masked = None if scaled is None else np.isneginf(scaled[head])  # this head's only: the strip asks h times
    if info.per_head:
        assert head is not None  # a per-head field is shown one head at a time
        matrix = matrix[result.head_index(name, head)]  # grouped-query K, V: the head's K/V head
    R, C = result.shape(name)[-2:]
    row_blocks = block_edges(R, matrix.shape[0]) if matrix.shape[0] != R else None
    col_blocks = block_edges(C, matrix.shape[1]) if matrix.shape[1] != C else None
    if hidden and info.rows in ("token", "source") and row_blocks is None and (keep := _keep(R, hidden)):
        matrix, row_blocks = matrix[keep], [(i, i + 1) for i in keep]
        masked = None if masked is None else masked[keep]
    if hidden and info.cols == "key" and col_blocks is None and (keep := _keep(C, hidden)):
        matrix, col_blocks = matrix[:, keep], [(j, j + 1) for j in keep]
        masked = None if masked is None else masked[:, keep]
    r_shown, c_shown = matrix.shape
    cfg = result.config
    shape = [f"{R} × {C}"]
    if info.per_head and head is not None and result.heads > 1:
        shape.append(f"head {head + 1}/{result.heads}")
        if (kv := result.shape(name)[0]) != result.heads:
            shape.append(f"K/V head {result.head_index(name, head) + 1}/{kv}")
    if (r_shown, c_shown) != (R, C):
        shape.append(f"shown {r_shown} × {c_shown}")
    layer_txt = f"layer {cfg.layer + 1}: " if cfg.model is not None else ""  # counted from 1
    if cfg.dtype == "bfloat16":  # the arithmetic that drew it, in every title (``BFLOAT16_NOTE``)
        layer_txt = f"bfloat16 matmuls, {layer_txt}"
    if result.resolved.what_if:  # a model's forward changed by an option it lacks: every map of it says so
        layer_txt = f"what-if ({', '.join(result.resolved.what_if)}), {layer_txt}"
    # a title may wrap between its words and after a comma, never inside "5 × 3"
    shape_txt = ", ".join(part.replace(" ", NBSP) for part in shape)
    # "(x W)" whole
    text = re.sub(r"\(\w \w\)", lambda m: m.group(0).replace(" ", NBSP), formula(name, result.resolved))
    spec = result.resolved.spec
    if spec is not None and spec.through:  # transformers computed it: say where it was read
        text = f"{info.symbol} = {HOOKED.get(name, name)}"
    return MapData(
        matrix=matrix,
        title=f"{layer_txt}{text}  ({shape_txt})" + (
            f"<br>{frame.saturation.short}" if info.kind == "weights" and frame.saturation else ""),
        brief_title=f"{_brief(text, info.symbol)}  ({shape[0].replace(' ', NBSP)})",
        kind=info.kind,
        row_labels=_axis_labels(result, info.rows, R),
        col_labels=_axis_labels(result, info.cols, C),
        row_blocks=row_blocks,
        col_blocks=col_blocks,
        symbol=info.symbol,
        head=head if info.per_head else None,
        masked_reason=_masked_reason(result.resolved.shown),
        pair_arrow=info.rows == "token" and info.cols == "key",
        field=name,
        masked=masked if masked is not None and masked.any() else None,
        about=explain(name, result),
        row_tokens=info.rows in ("token", "key", "source"),
        col_tokens=info.cols in ("token", "key", "source"),
        query_rows=info.rows == "token" or (info.rows == "source" and result.source_tokens is None),
        scale=scale,
    )


def not_captured_data(frame: Frame, name: str, head: int | None = None) -> MapData:
    """The map of a step the hooks of a model read through transformers cannot see (``result.not_captured``):
    no number, one empty cell, and a title that says so."""
    result, info = frame.result, FIELDS[name]
    cfg, spec = result.config, result.resolved.spec
    text = f"{info.symbol}: not captured for {spec.through if spec is not None else 'this model'}"
    return MapData(matrix=np.full((1, 1), np.nan), title=f"layer {cfg.layer + 1}: {text}",
                   brief_title=f"{info.symbol}: not captured",
                   kind=info.kind, symbol=info.symbol, head=head if info.per_head else None, field=name,
                   masked=np.ones((1, 1), dtype=bool), masked_reason="not captured: no hook sees this step",
                   about=f"{html.escape(text)}: transformers computes it inside the attention module, where no "
                         "hook reaches, and attn-gui does not compute it in its place")


BRIEF_CHARS = 16  # a longer formula is named by its symbol beside a large map (the tooltip has it whole)


def _brief(text: str, symbol: str) -> str:
    """A small map's title: its formula while short ("Z = α V"), else its symbol ("α")."""
    return text if len(text) <= BRIEF_CHARS else symbol


def _masked_reason(options) -> str:
    """What a -inf score means under the shown layer's masks (its ``AttendOptions``, the plan's)."""
    if options.window is not None:
        n = options.sink_tokens
        sinks = (" (the first key stays visible)" if n == 1 else f" (the first {n} keys stay visible)") if n else ""
        after = "after the query or " if options.causal else ""
        return f"masked: this key is {after}outside the window of {options.window}{sinks}"
    if options.causal:
        return "masked: this key comes after the query (causal)"
    return "not finite: overflow in this dtype"


def map_keys(result: AttentionResult) -> list[tuple[str, int | None]]:
    """(field, head) of every map a result has, in data-flow order."""
    keys: list[tuple[str, int | None]] = []
    for name in result.fields():
        if FIELDS[name].per_head:
            keys.extend((name, h) for h in range(result.heads))
        else:
            keys.append((name, None))
    return keys


def axis_name(labels: list[str], blocks, i: int, tokens: bool = False) -> str:
    """The name of displayed row or column ``i``: its token, or the range of a pooled block.

    A block of ``tokens`` is named by positions counted from 1 ("1–16", x₁ to x₁₆); a block
    of dimensions by indices from 0, as the axis labels count them.
    """
    if blocks is None:
        return labels[i] if i < len(labels) else str(i)
    start, end = blocks[i]
    if end - start == 1:
        return labels[start] if start < len(labels) else str(start)
    return f"{start + 1}–{end}" if tokens else f"{start}–{end - 1}"


def tick_label(labels: list[str], blocks, i: int) -> str:
    """The axis label of displayed row or column ``i``: the first token of its block."""
    start = i if blocks is None else blocks[i][0]
    return labels[start] if start < len(labels) else str(start)


def display_row(data: MapData, row: int) -> int | None:
    """The displayed row that holds full-axis row ``row``, or None if it is not shown."""
    return _displayed(data.row_blocks, data.matrix.shape[0], row)


def _displayed(blocks: list[tuple[int, int]] | None, n: int, index: int) -> int | None:
    if blocks is None:
        return index if 0 <= index < n else None
    return next((i for i, (start, end) in enumerate(blocks) if start <= index < end), None)


def display_cells(data: MapData, cells) -> list[tuple[int, int | None]]:
    """Full-axis cells (row, col; col None for a whole row), 0-based, as the displayed cells that
    hold them: pooled rows of a long input and hidden special tokens move or drop them."""
    out = []
    for r, c in cells:
        row = _displayed(data.row_blocks, data.matrix.shape[0], r)
        col = None if c is None else _displayed(data.col_blocks, data.matrix.shape[1], c)
        if row is not None and (c is None or col is not None) and (row, col) not in out:
            out.append((row, col))
    return out


def full_row(data: MapData, shown: int) -> int:
    """The full-axis row of displayed row ``shown`` (the first of its block)."""
    return data.row_blocks[shown][0] if data.row_blocks else shown


def describe_cell(data: MapData, r: int, c: int) -> str:
    """The read-out of displayed cell (r, c): names, exact value and meaning.

    >>> # e.g. "α[in → When] = 0.31608, head 1"
    """
    v = float(data.matrix[r, c])
    rname = axis_name(data.row_labels, data.row_blocks, r, data.row_tokens)
    cname = axis_name(data.col_labels, data.col_blocks, c, data.col_tokens)
    where = f"{rname} → {cname}" if data.pair_arrow else f"{rname}, {cname}"
    value = f"{v:.6g}" if np.isfinite(v) else format_value(v)
    text = f"{data.symbol}[{where}] = {value}"
    if data.head is not None:
        text += f", head {data.head + 1}"
    reduced = (data.row_blocks and data.row_blocks[r][1] - data.row_blocks[r][0] > 1) or (
        data.col_blocks and data.col_blocks[c][1] - data.col_blocks[c][0] > 1)
    if reduced:
        text += " (largest magnitude in this block; zoom in or export for every cell)"
    if np.isneginf(v) or (data.masked is not None and data.masked[r, c]):
        text += f" ({data.masked_reason})"
    elif not np.isfinite(v):
        text += " (not finite: overflow in this dtype)"
    return text

"""What the insight docks show, without Qt: the head-metrics table, rollout maps, the saturation note.

Everything is computed from the result's tensors on their device; only the reduced
arrays (one number per head, rollout maps of at most ``DISPLAY_MAX`` per side) go to the host.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine import METRICS, AttentionResult, head_metrics, rollout
from ..engine.kernel.scores import alibi_slopes, score_weights, scaled_scores
from ..engine.analysis.metrics import METRIC_HELP, METRIC_LABELS
from ..engine.kernel.reduce import reduce_matrix
from .formats import nice_ceil
from .frame import DISPLAY_MAX, Frame
from .saturation import visible_keys
from .maps import MapData, map_data


@dataclass(frozen=True)
class MetricsTable:
    """Head metrics of one result, one row per (layer, head).

    Attributes
    ----------
    values : metric name -> (L, h) array; L = 1 with random weights
    layers : the model's layer of each row of ``values`` (0-based, as the layer control);
        None with random weights
    """

    values: dict[str, np.ndarray]
    layers: tuple[int, ...] | None

    @property
    def shape(self) -> tuple[int, int]:
        return self.values[METRICS[0]].shape

    def rows(self) -> list[tuple[int | None, int, dict[str, float]]]:
        """(layer or None, head 0-based, metric -> value) for every head, layer by layer."""
        L, H = self.shape
        out: list[tuple[int | None, int, dict[str, float]]] = []
        for i in range(L):
            layer = None if self.layers is None else self.layers[i]
            out.extend((layer, h, {m: float(self.values[m][i, h]) for m in METRICS}) for h in range(H))
        return out

    def top(self, metric: str, n: int = 3) -> list[tuple[int | None, int, float]]:
        """The ``n`` heads with the highest ``metric``: (layer, head, value), highest first."""
        ranked = sorted(self.rows(), key=lambda row: -np.nan_to_num(row[2][metric], nan=-np.inf))
        return [(layer, head, values[metric]) for layer, head, values in ranked[:n]]

    def csv(self) -> str:
        """CSV with a header: layer (empty with random weights), head (both counted from 1, as the maps and
        ``weights_head<i>.csv`` count them), one column per metric."""
        text = io.StringIO()
        text.write(",".join(("layer", "head", *METRICS)) + "\n")
        for layer, head, values in self.rows():
            cells = ["" if layer is None else str(layer + 1), str(head + 1)]
            cells += [f"{values[m]:.9g}" for m in METRICS]
            text.write(",".join(cells) + "\n")
        return text.getvalue()


def metrics_table(result: AttentionResult) -> MetricsTable | None:
    """Head metrics of every layer (model mode) or of the result's heads (random weights).

    A streamed model result's are summed block by block as it ran (``engine.kernel.summaries``); None for a
    streamed result with random weights: the metrics need every weight, which it keeps only pooled.
    """
    if result.streamed and result.summaries is not None:
        L = result.summaries.sink.size(0)
        return MetricsTable({m: result.summaries.metrics[m].detach().cpu().numpy() for m in METRICS}, tuple(range(L)))
    if result.streamed:
        return None
    mask = visible_keys(result)
    if result.layer_weights is None:
        assert result.weights is not None  # kept in full when not streamed
        values = head_metrics(result.weights[None], mask, cross=result.source_tokens is not None)
        layers = None
    else:
        L = result.layer_weights.size(0)
        values = head_metrics(result.layer_weights, mask)  # every layer ran with the shown layer's mask (the plan)
        layers = tuple(range(L))
    return MetricsTable({m: v.detach().cpu().numpy() for m, v in values.items()}, layers)


def metric_label(metric: str) -> str:
    return METRIC_LABELS[metric]


def metric_help(metric: str) -> str:
    return METRIC_HELP[metric]


# rollout ---------------------------------------------------------------------------------------

def rollout_arrays(result: AttentionResult, fusion: str = "mean", residual: bool = True,
                   max_side: int = DISPLAY_MAX) -> np.ndarray:
    """Rollout R_1 ... R_L of a model-mode result, reduced on its device: (L, t, t)."""
    if result.layer_weights is None:
        raise ValueError("rollout needs every layer's weights: a model-mode result")
    maps = rollout(result.layer_weights, fusion, residual)
    return reduce_matrix(maps, max_side, max_side, "weights").detach().cpu().numpy()


def as_map(frame: Frame, name: str, array: np.ndarray, index: int | None, hidden: tuple[int, ...] = (),
           **changes: Any) -> MapData:
    """``array`` drawn as field ``name`` of ``frame`` would be (labels, blocks, hidden tokens), then ``changes``.

    ``index`` picks the matrix of a per-head ``array``; ``changes`` replace MapData fields.
    """
    shown = dataclasses.replace(frame, arrays={**frame.arrays, name: array})
    return dataclasses.replace(map_data(shown, name, index, hidden), **changes)


SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def rollout_map(frame: Frame, maps: np.ndarray, layer: int, fusion: str = "mean", residual: bool = True,
                hidden: tuple[int, ...] = ()) -> MapData:
    """The map of rollout ``maps[layer]`` (``layer`` 0-based; the title and file name count from 1)."""
    T = frame.result.seq_len
    mix = f"{fusion} of heads" + (", ½A + ½I" if residual else "")
    last = str(layer + 1).translate(SUBSCRIPTS)
    products = "Â₁" if layer == 0 else f"Â{last} … Â₁"
    return as_map(frame, "weights", maps[layer][None], 0, hidden,
                  title=f"rollout after layer {layer + 1}: R = {products}  ({mix}; {T} × {T})",
                  symbol="R", head=None, field=f"rollout_layer{layer + 1}",
                  masked=None)  # a product over layers: the shown layer's mask is not its mask


# the metrics grid and the why-scaling panel ---------------------------------------------------

BOUNDED = frozenset({"entropy_norm", "max_weight", "sink", "previous", "self"})  # in 0..1


def metrics_map(table: MetricsTable, metric: str) -> MapData:
    """The grid of ``metric`` over every layer (rows) and head (columns), both numbered from 1."""
    L, H = table.shape
    rows = ["heads"] if table.layers is None else [f"layer {layer + 1}" for layer in table.layers]
    top = 1.0 if metric in BOUNDED else nice_ceil(float(np.nanmax(table.values[metric], initial=0.0)))
    return MapData(matrix=table.values[metric].astype(np.float32), title=f"{metric_label(metric)}: "
                   f"{metric_help(metric)}  (0 to {top:g})", kind="weights",
                   row_labels=rows, col_labels=[str(h + 1) for h in range(H)], symbol=metric_label(metric),
                   field=f"head_metrics_{metric}")


def metric_levels(table: MetricsTable, metric: str) -> tuple[float, float]:
    """The colour scale of ``metric``: 0 to 1 for shares and weights, 0 to a round maximum otherwise."""
    if metric in BOUNDED:
        return 0.0, 1.0
    return 0.0, nice_ceil(float(np.nanmax(table.values[metric], initial=0.0)))


@dataclass(frozen=True)
class QuerySoftmax:
    """One query's weights with and without 1/sqrt(d_k), as seed 004 prints them.

    ``divisor``: what the scaled scores are divided by as the shown layer runs them ("√64", "√256" for Gemma's
    query_pre_attn_scalar, "√64 / 3" for GPT-2's layer 3); ``softcap``: its soft-cap, applied to both, or None."""

    keys: list[str]
    scaled: np.ndarray
    unscaled: np.ndarray
    d_k: int
    query: str
    divisor: str = ""
    softcap: float | None = None


def query_softmax(result: AttentionResult, head: int, token: int) -> QuerySoftmax:
    """alpha of query ``token`` in ``head`` with and without scaling, everything else as the shown layer ran it
    (the plan's options: the model's own divisor, soft-cap, mask, window, sinks, ALiBi, temperature): the scaled
    row equals the maps' alpha wherever the layer scales."""
    if result.q is None:  # a model read through transformers whose q is not captured
        raise ValueError("the softmax of one query needs its q and scores, which this result does not hold")
    options = result.resolved.shown
    d_k = result.q.size(-1)
    row = result.row("scores", head, token)
    for term in result.position_terms:  # DeBERTa: the position terms join the content scores before the scale
        row = row + getattr(result, term)[head, token]
    row = row[None, None]  # (1, 1, T_k): only this query's scores
    slopes = alibi_slopes(result.heads, row.dtype, row.device)[head:head + 1] if options.alibi else None
    out = []
    for scale in (True, False):
        scaled = scaled_scores(row, options.replace(scale=scale), d_k, row_start=token, slopes=slopes)
        out.append(score_weights(scaled, options)[1][0, 0].detach().cpu().numpy())
    divisor = " / ".join(options.replace(scale=True).divisor_text(d_k))
    return QuerySoftmax(list(result.key_tokens), out[0], out[1], d_k, result.tokens[token], divisor, options.softcap)

"""What the Why dock and ``attn-gui attribute`` show of ``engine.attribution``: maps and tables, Qt-free.

Heads are named layer.head counted from 1 (24.5), as the effect grid names them.
"""

from __future__ import annotations

import re

import numpy as np

from ..engine.analysis.attribution.qkov import Circuits
from ..engine.analysis.attribution.heads import Detection
from ..engine.analysis.attribution.logit import LogitAttribution
from ..engine.analysis.attribution.score import ScoreAttribution
from .maps import MapData

_HEAD = re.compile(r"L(\d+)(?:H\d+| attn bias)$")


def _axes(values) -> tuple[list[str], list[str]]:
    layers, heads = values.shape
    return [f"layer {i + 1}" for i in range(layers)], [f"head {j + 1}" for j in range(heads)]


def what_dla(a: LogitAttribution, token_text) -> str:
    """The quantity, in words: "logit(' Paris')" or "logit(' Paris') - logit(' London')"."""
    what = f'logit("{token_text(a.token)}")'
    return what if a.against is None else what + f' - logit("{token_text(a.against)}")'


def dla_map(a: LogitAttribution, token_text) -> MapData:
    """The (layers x heads) grid of direct terms on a diverging scale."""
    values = a.heads.numpy()
    rows, cols = _axes(values)
    what = what_dla(a, token_text)
    return MapData(values, f"DLA: each head's direct term in {what} = {a.logit:.4g}", "signed", rows, cols,
                   symbol="DLA",
                   about=f"term = (Z_i W_O,i at the last token) · s γ · u: the final norm's scale s frozen on the "
                         f"real residual, u the unembedding row of {what}. Every component's terms (heads, MLPs, "
                         f"embeddings, biases) sum to the logit.")


def top_heads(values, k: int = 5, largest: bool = True) -> list[tuple[str, float]]:
    """The ``k`` heads with the largest (or smallest) values of a (layers x heads) grid: ("24.5", value)."""
    flat = np.asarray(values, dtype=float).ravel()
    heads = np.asarray(values).shape[1]
    finite = np.where(np.isfinite(flat), flat, -np.inf if largest else np.inf)
    order = np.argsort(-finite if largest else finite, kind="stable")[:k]
    return [(f"{i // heads + 1}.{i % heads + 1}", float(flat[i])) for i in order]


def grouped(s: ScoreAttribution) -> tuple[np.ndarray, list[str], list[str]]:
    """The score's matrix with each layer's heads and attention bias summed into "L{l} attn" (readable for
    a model of hundreds of heads); the sum is unchanged."""
    def groups(names):
        labels = [(f"L{m[1]} attn" if (m := _HEAD.match(n)) else n) for n in names]
        order = list(dict.fromkeys(labels))
        index = np.array([order.index(label) for label in labels])
        return order, index
    q_names, q_index = groups(s.query_names)
    k_names, k_index = groups(s.key_names)
    m = s.matrix.numpy()
    rows = np.zeros((len(q_names), m.shape[1]))
    np.add.at(rows, q_index, m)
    out = np.zeros((len(q_names), len(k_names)))
    np.add.at(out.T, k_index, rows.T)
    return out, q_names, k_names


def score_map(s: ScoreAttribution, tokens: list[str]) -> MapData:
    """The score attribution matrix (grouped by layer), query-side components as rows."""
    matrix, rows, cols = grouped(s)
    return MapData(matrix, f"ω′ {tokens[s.query]} → {tokens[s.key]} of head {s.layer + 1}.{s.head + 1} = "
                           f"{s.score:.4g}, by query-side × key-side component", "signed", rows, cols,
                   symbol="term",
                   about="(R q_a) · (R k_b) / √d_k for query-side component a and key-side component b, the "
                         "norm's scale frozen on the real residual, RoPE applied to each term; the cells sum "
                         "to the score.")


def circuit_maps(c: Circuits) -> tuple[MapData, MapData]:
    """The QK circuit (query token x key token) and the OV circuit (attended token x logit of token)."""
    name = f"{c.layer + 1}.{c.head + 1}"
    qk = MapData(c.qk.numpy(), f"QK circuit of head {name}: score of query token × key token", "signed",
                 c.tokens, c.tokens, symbol="QK",
                 about="(W_Q γ e_a) · (W_K γ e_b) / √d_k: the score one token gives another from its embedding "
                       "alone, no position (no RoPE), the layer norm's gain γ folded in.")
    ov = MapData(c.ov.numpy(), f"OV circuit of head {name}: attended token × logit of token", "signed",
                 c.tokens, c.tokens, symbol="OV",
                 about="u_b · γ_f W_O W_V γ e_a: the logit of token b that attending to token a writes directly. "
                       "A positive diagonal copies.")
    return qk, ov


def copying_map(scores) -> MapData:
    values = np.asarray(scores, dtype=float)
    rows, cols = _axes(values)
    return MapData(values, "copying score: Σλ / Σ|λ| of each head's W_U W_OV W_E", "signed", rows, cols,
                   symbol="copying",
                   about="Elhage et al. 2021: 1 when every eigenvalue of the head's full OV circuit is positive "
                         "(the head raises the logit of the token it attends to), -1 when every one is negative.")


def detector_lines(d: Detection, shown: int = 6) -> list[str]:
    """One line per detector: its labelled heads, highest score first (the first ``shown`` of them):
    "induction (2 heads): 2.1 0.83, 2.2 0.61"; sinks are common, so every detector gets its own line."""
    lines = []
    for name, scores in d.scores.items():
        heads = [(float(scores[layer, head]), f"{layer + 1}.{head + 1}") for layer, labels in enumerate(d.labels)
                 for head, label in enumerate(labels) if label == name]
        heads.sort(reverse=True)
        listed = ", ".join(f"{h} {v:.2f}" for v, h in heads[:shown]) + (" …" if len(heads) > shown else "")
        lines.append(f"{name} ({len(heads)} head{'s' if len(heads) != 1 else ''}): {listed or '-'}")
    return lines


def score_lines(s: ScoreAttribution, shown: int = 4) -> list[str]:
    """The largest terms of a score: the query-side and key-side components (row and column sums, layers' heads
    grouped) and the pairs, by size."""
    matrix, rows, cols = grouped(s)

    def largest(values, names):
        order = np.argsort(-np.abs(values), kind="stable")[:shown]
        return ", ".join(f"{names[i]} {values[i]:+.2f}" for i in order)
    pairs = [f"{rows[i]} × {cols[j]}" for i in range(len(rows)) for j in range(len(cols))]
    return [f"query side: {largest(matrix.sum(1), rows)}", f"key side: {largest(matrix.sum(0), cols)}",
            f"pairs: {largest(matrix.ravel(), pairs)}"]


def dla_rows(a: LogitAttribution) -> list[tuple[str, float]]:
    """Every component and its term, in the model's order, then the total (the logit)."""
    return [*zip(a.names, a.values.tolist(), strict=True), ("total (the logit)", float(a.values.sum()))]

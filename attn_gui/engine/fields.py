"""What each intermediate of the result is: its formula, axes and colour scale.

Shared by the window, the exporter and the CLI, so a title reads the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldInfo:
    """Description of one result field.

    Attributes
    ----------
    name : str
        Field name on ``AttentionResult``.
    symbol : str
        Short name as in the paper ("alpha", "W_q").
    formula : str
        How it is computed, in plain text.
    per_head : bool
        True when the first axis is the head axis.
    rows, cols : str
        What the axes index: "token" (query rows), "key" (key columns) or "dim".
    kind : str
        "weights" (fixed 0..1 scale), "signed" (diverging map centred on 0).
    """

    name: str
    symbol: str
    formula: str
    per_head: bool
    rows: str
    cols: str
    kind: str = "signed"


# Data-flow order: X -> W -> Q, K, V -> omega -> scaled -> alpha -> Z -> concat -> W_o -> output
FIELDS: dict[str, FieldInfo] = {
    f.name: f
    for f in (
        FieldInfo("x", "X", "embeddings", False, "token", "dim"),
        FieldInfo("w_q", "W_q", "query projection", True, "dim", "dim"),
        FieldInfo("w_k", "W_k", "key projection", True, "dim", "dim"),
        FieldInfo("w_v", "W_v", "value projection", True, "dim", "dim"),
        FieldInfo("q", "Q", "Q = X W_q", True, "token", "dim"),
        FieldInfo("k", "K", "K = X W_k", True, "token", "dim"),
        FieldInfo("v", "V", "V = X W_v", True, "token", "dim"),
        FieldInfo("scores", "omega", "omega = Q K^T", True, "token", "key"),
        FieldInfo("scaled", "omega'", "omega / sqrt(d_k)", True, "token", "key"),
        FieldInfo("weights", "alpha", "alpha = softmax(omega / sqrt(d_k))", True, "token", "key", "weights"),
        FieldInfo("head_outputs", "Z", "Z = alpha V", True, "token", "dim"),
        FieldInfo("concat", "concat", "Concat(Z_1..Z_h)", False, "token", "dim"),
        FieldInfo("w_o", "W_O", "output projection", False, "dim", "dim"),
        FieldInfo("output", "output", "Concat(Z) W_O", False, "token", "dim"),
    )
}

TENSOR_FIELDS: tuple[str, ...] = tuple(FIELDS)


def formula(name: str, config) -> str:
    """The formula of ``name`` as ``config`` computes it (layout, scale, mask, similarity)."""
    info = FIELDS[name]
    col = config.layout == "column"
    if not config.projections and name in ("q", "k", "v"):
        return f"{info.symbol} = X (no projection)"
    if name in ("q", "k", "v"):
        w = "W_" + name
        return f"{info.symbol}^T = {w} X^T" if col else f"{info.symbol} = X {w}"
    if name == "scores":
        if config.similarity == "cosine":
            return "omega = cos(Q, K)"
        return "omega = Q K^T"
    if name in ("scaled", "weights"):
        parts = []
        if config.scale:
            parts.append("sqrt(d_k)")
        if config.temperature != 1.0:
            parts.append(f"{config.temperature:g}")
        inner = "omega / " + " / ".join(parts) if parts else "omega"
        if config.causal:
            inner += " + causal mask"
        return f"omega' = {inner}" if name == "scaled" else f"alpha = softmax({inner})"
    if name == "output":
        if not config.projections:
            return "output = Concat(Z) (no W_O)"
        return "output^T = W_O Concat(Z)^T" if col else "output = Concat(Z) W_O"
    if name in ("w_q", "w_k", "w_v", "w_o"):
        return f"{info.symbol} ({'column: q = W x' if col else 'row: q = x W'})"
    return info.formula

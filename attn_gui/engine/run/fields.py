"""What each intermediate of the result is: its formula, axes and colour scale.

Shared by the window, the exporter and the CLI, so a title reads the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..model.plan import Plan


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
        What the axes index: "token" (query rows: the sentence's tokens), "key" (key columns),
        "source" (rows of the keys' and values' tokens: the sentence's own in self-attention,
        the second sentence's in cross-attention), "dim", "pair" (RoPE's dimension pairs),
        or "one" (the single row of a bias, added to every token's row).
    kind : str
        "weights" (fixed 0..1 scale), "signed" (diverging map centred on 0), "angle" (never negative: 0 to the
        map's max, RoPE's θ).
    kept : str
        Where ``AttentionResult`` keeps it: "" for an attribute of its own (the core: x, q, k, v, the
        scores, ...), else "group.attribute" in the group that produces it ("rope.angles": RoPE's
        ``attention.Rotary``); ``result.<name>`` reads it either way, None where its group is None.
    """

    name: str
    symbol: str
    formula: str
    per_head: bool
    rows: str
    cols: str
    kind: str = "signed"
    kept: str = ""


# Data-flow order: X -> W, b -> Q, K, V (before RoPE, normed, rotated) -> omega -> scaled -> alpha -> Z
# -> concat -> W_o, b_o -> output
FIELDS: dict[str, FieldInfo] = {
    f.name: f
    for f in (
        FieldInfo("x", "X", "X: token embeddings", False, "token", "dim"),
        FieldInfo("x_source", "X_src", "X_src: the second sentence's embeddings", False, "source", "dim",
                  kept="cross.x"),
        FieldInfo("w_q", "W_q", "W_q", True, "dim", "dim", kept="projections.w_q"),
        FieldInfo("w_k", "W_k", "W_k", True, "dim", "dim", kept="projections.w_k"),
        FieldInfo("w_v", "W_v", "W_v", True, "dim", "dim", kept="projections.w_v"),
        FieldInfo("b_q", "b_q", "b_q: query bias", True, "one", "dim", kept="projections.b_q"),
        FieldInfo("b_k", "b_k", "b_k: key bias", True, "one", "dim", kept="projections.b_k"),
        FieldInfo("b_v", "b_v", "b_v: value bias", True, "one", "dim", kept="projections.b_v"),
        FieldInfo("rope_angles", "θ", "θ = p · base^(−2i/d_k): RoPE's angle of pair i at position p", False,
                  "token", "pair", kind="angle", kept="rope.angles"),
        FieldInfo("rope_angles_plain", "θ (unscaled)", "θ = p · base^(−2i/d_k): the angles before the model's "
                  "RoPE scaling", False, "token", "pair", kind="angle", kept="rope.angles_plain"),
        FieldInfo("q_unrotated", "Q (before RoPE)", "Q = X W_q, before the rotation", True, "token", "dim",
                  kept="rope.q_unrotated"),
        FieldInfo("k_unrotated", "K (before RoPE)", "K = X W_k, before the rotation", True, "source", "dim",
                  kept="rope.k_unrotated"),
        FieldInfo("q_normed", "Q (normed)", "Q = RMSNorm(X W_q) ⊙ g_q, per head, before the rotation", True,
                  "token", "dim", kept="qk_norm.q_normed"),
        FieldInfo("k_normed", "K (normed)", "K = RMSNorm(X W_k) ⊙ g_k, per head, before the rotation", True,
                  "source", "dim", kept="qk_norm.k_normed"),
        FieldInfo("q", "Q", "Q = X W_q", True, "token", "dim"),
        FieldInfo("k", "K", "K = X W_k", True, "source", "dim"),
        FieldInfo("v", "V", "V = X W_v", True, "source", "dim"),
        FieldInfo("scores", "ω", "ω = Q Kᵀ", True, "token", "key"),
        FieldInfo("c2p", "c2p", "c2p = Q K_rᵀ at δ(i, j): content → position (DeBERTa)", True, "token", "key",
                  kept="positions.c2p"),
        FieldInfo("p2c", "p2c", "p2c = K Q_rᵀ at δ(i, j), transposed: position → content (DeBERTa)", True,
                  "token", "key", kept="positions.p2c"),
        FieldInfo("position_bias", "m", "m = -slope_h (i - j): ALiBi's bias", True, "token", "key",
                  kept="positions.bias"),
        FieldInfo("scaled", "ω′", "ω′ = ω / √d_k", True, "token", "key"),
        FieldInfo("capped", "ω″", "ω″ = c · tanh(ω′ / c): the scores soft-capped within ±c", True, "token", "key"),
        FieldInfo("weights", "α", "α = softmax(ω / √d_k)", True, "token", "key", "weights"),
        FieldInfo("head_outputs", "Z", "Z = α V", True, "token", "dim"),
        FieldInfo("concat", "concat", "Concat(Z₁…Z_h)", False, "token", "dim"),
        FieldInfo("w_o", "W_O", "W_O", False, "dim", "dim", kept="projections.w_o"),
        FieldInfo("b_o", "b_O", "b_O: output bias", False, "one", "dim", kept="projections.b_o"),
        FieldInfo("output", "output", "output = Concat(Z) W_O", False, "token", "dim"),
    )
}

TENSOR_FIELDS: tuple[str, ...] = tuple(FIELDS)


def formula(name: str, plan: Plan) -> str:
    """The formula of ``name`` as the compute of ``plan`` (``engine.model.plan``) runs the shown layer: layout,
    biases, q/k norms, RoPE with its scaling and rotated dimensions, the scale the model divides by, mask and
    soft-cap."""
    info = FIELDS[name]
    config, spec, o = plan.config, plan.spec, plan.shown
    col = config.layout == "column"
    projections = plan.dims.projections
    bias = config.bias if spec is None else spec.has_bias
    d_k = plan.dims.d_k
    if name in ("q", "k", "v"):
        if not projections:
            return f"{info.symbol} = X (no projection)"
        w, b = "W_" + name, (f" + b_{name}" if bias else "")
        x = "X_src" if config.cross and name != "q" else "X"  # cross-attention: K and V from the second sentence
        if col:
            text = f"{info.symbol} = {x} {w}ᵀ{b}  ({name}_i = {w} {x.lower()}_i{b})"
        else:
            text = f"{info.symbol} = {x} {w}{b}"
        if spec is not None and spec.qk_norm and name in ("q", "k"):
            text += ", RMS-normed over all heads" if spec.qk_norm_across else ", RMS-normed per head"
        if o.rope_base is not None and name in ("q", "k"):
            turned = f"its first {o.rope_dims} dimensions rotated" if o.rope_dims else "rotated"
            return text + f", {turned} (RoPE{_rope_scaled(o, d_k)})"
        return text
    if name in ("q_normed", "k_normed") and spec is not None and spec.qk_norm_across:
        return info.formula.replace("per head", "over all heads of a token (h·d_k)")
    if name in ("q_unrotated", "k_unrotated") and spec is not None and spec.qk_norm:
        return info.formula.replace("before the rotation", "before the norm and the rotation")
    terms = spec.score_terms if spec is not None else ()
    if name == "scores":
        text = "ω = cos(Q, K)" if o.similarity == "cosine" else "ω = Q Kᵀ"
        return text + ": content → content" if terms else text
    if name in ("c2p", "p2c"):
        return f"{info.formula}, δ(i, j) = bucket(i − j) + s"
    if name in ("scaled", "weights"):
        summed = f"({' + '.join(('ω', *terms))})" if terms else "ω"
        root = o.root_text(d_k).replace(str(d_k), "d_k") if o.scale_dim is None else o.root_text(d_k)
        inner = f"{summed} / {root}" if o.scale else summed
        if o.alibi:
            inner += " + m"
        rest = [f"{x:g}" for x in (o.layer_scale, o.temperature) if x != 1.0]
        if rest:
            inner = f"({inner}) / {' / '.join(rest)}" if " + " in inner else f"{inner} / {' / '.join(rest)}"
        if o.causal or o.window is not None:
            inner += " + mask"
        if name == "weights" and o.softcap is not None:
            return "α = softmax(ω″)"
        return f"ω′ = {inner}" if name == "scaled" else f"α = softmax({inner})"
    if name == "capped":
        return f"ω″ = {o.softcap:g} · tanh(ω′ / {o.softcap:g})"
    if name == "position_bias":
        return info.formula if o.causal else "m = -slope_h |i - j|: ALiBi's bias"
    if name == "rope_angles":
        offset = o.position_offset  # a model reads from position 0
        p = f"(t + {offset})" if offset else "t"  # t: the token's index
        scaling = dict(o.rope_scaling)
        base = o.rope_base if o.rope_base is not None else config.rope_base
        if scaling:  # the model's scaled frequencies f_i (engine.rope_scaling)
            return f"θ = {p} · f_i, f_i = {base:g}^(−2i/d_k) with {scaling['rope_type']} scaling"
        dims = o.rope_dims  # partial rotary: pairs within the first r dimensions
        return f"θ = {p} · {base:g}^(−2i/{dims or 'd_k'})" + (f", r = {dims} of d_k turned" if dims else "")
    if name == "output":
        if not projections:
            return "output = Concat(Z), no W_O"
        b = " + b_O" if bias else ""
        return f"output = Concat(Z) W_Oᵀ{b}" if col else f"output = Concat(Z) W_O{b}"
    if name in ("w_q", "w_k", "w_v", "w_o"):
        return f"{info.symbol}  ({'W x' if col else 'x W'})"
    if name == "x" and spec is not None:
        return f"X: {spec.x_is}"
    return info.formula


def _rope_scaled(options, d_k: int) -> str:
    """", llama3 scaling" (and YaRN's and LongRoPE's factor on cos and sin) for a scaled RoPE; else ""."""
    if not options.rope_scaling:
        return ""
    from ..kernel.rope import inv_freq

    scaling = dict(options.rope_scaling)
    factor = inv_freq(options.rope_dims or d_k, options.rope_base, options.rope_scaling)[1]
    return f", {scaling['rope_type']} scaling" + (f", cos and sin × {factor:.4g}" if factor != 1.0 else "")

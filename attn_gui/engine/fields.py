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
        What the axes index: "token" (query rows: the sentence's tokens), "key" (key columns),
        "source" (rows of the keys' and values' tokens: the sentence's own in self-attention,
        the second sentence's in cross-attention), "dim", "pair" (RoPE's dimension pairs),
        or "one" (the single row of a bias, added to every token's row).
    kind : str
        "weights" (fixed 0..1 scale), "signed" (diverging map centred on 0).
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
                  "token", "pair", kept="rope.angles"),
        FieldInfo("rope_angles_plain", "θ (unscaled)", "θ = p · base^(−2i/d_k): the angles before the model's "
                  "RoPE scaling", False, "token", "pair", kept="rope.angles_plain"),
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


def _has_bias(config) -> bool:
    from .sources import model_spec

    if config.model is None:
        return config.bias
    return model_spec(config.model).has_bias


def formula(name: str, config) -> str:
    """The formula of ``name`` as ``config`` computes it (layout, biases, scale, mask, similarity)."""
    info = FIELDS[name]
    col = config.layout == "column"
    projections = config.dims.projections
    bias = _has_bias(config)
    if name in ("q", "k", "v"):
        if not projections:
            return f"{info.symbol} = X (no projection)"
        w, b = "W_" + name, (f" + b_{name}" if bias else "")
        x = "X_src" if config.cross and name != "q" else "X"  # cross-attention: K and V from the second sentence
        if col:
            text = f"{info.symbol} = {x} {w}ᵀ{b}  ({name}_i = {w} {x.lower()}_i{b})"
        else:
            text = f"{info.symbol} = {x} {w}{b}"
        if _qk_norm(config) and name in ("q", "k"):
            text += ", RMS-normed over all heads" if _across(config) else ", RMS-normed per head"
        if _rope(config) and name in ("q", "k"):
            dims = _rope_dims(config)
            turned = f"its first {dims} dimensions rotated" if dims else "rotated"
            return text + f", {turned} (RoPE{_rope_scaled(config)})"
        return text
    if name in ("q_normed", "k_normed") and _across(config):
        return info.formula.replace("per head", "over all heads of a token (h·d_k)")
    if name in ("q_unrotated", "k_unrotated") and _qk_norm(config):
        return info.formula.replace("before the rotation", "before the norm and the rotation")
    terms, factor = _score_terms(config)
    if name == "scores":
        text = "ω = cos(Q, K)" if config.similarity == "cosine" else "ω = Q Kᵀ"
        return text + ": content → content" if terms else text
    if name in ("c2p", "p2c"):
        return f"{info.formula}, δ(i, j) = bucket(i − j) + s"
    if name in ("scaled", "weights"):
        scale, temperature = config.score_scaling
        summed = f"({' + '.join(('ω', *terms))})" if terms else "ω"
        d_k = f"({factor}·d_k)" if factor != 1 else "d_k"
        inner = f"{summed} / √{d_k}" if scale else summed
        if config.model is None and config.positional == "alibi":
            inner += " + m"
        if temperature != 1.0:
            inner = f"({inner}) / {temperature:g}" if " + " in inner else f"{inner} / {temperature:g}"
        if config.is_causal or config.sliding_window is not None:
            inner += " + mask"
        if name == "weights" and config.softcap is not None:
            return "α = softmax(ω″)"
        return f"ω′ = {inner}" if name == "scaled" else f"α = softmax({inner})"
    if name == "capped":
        return f"ω″ = {config.softcap:g} · tanh(ω′ / {config.softcap:g})"
    if name == "position_bias":
        return info.formula if config.is_causal else "m = -slope_h |i - j|: ALiBi's bias"
    if name == "rope_angles":
        offset = config.position_offset if config.model is None else 0  # a model reads from position 0
        p = f"(t + {offset})" if offset else "t"  # t: the token's index
        scaling = dict(config.rope_scaling)
        if scaling:  # the model's scaled frequencies f_i (engine.rope_scaling)
            return f"θ = {p} · f_i, f_i = {config.rope:g}^(−2i/d_k) with {scaling['rope_type']} scaling"
        dims = _rope_dims(config)  # partial rotary: pairs within the first r dimensions
        return f"θ = {p} · {config.rope or config.rope_base:g}^(−2i/{dims or 'd_k'})" + (
            f", r = {dims} of d_k turned" if dims else "")
    if name == "output":
        if not projections:
            return "output = Concat(Z), no W_O"
        b = " + b_O" if bias else ""
        return f"output = Concat(Z) W_Oᵀ{b}" if col else f"output = Concat(Z) W_O{b}"
    if name in ("w_q", "w_k", "w_v", "w_o"):
        return f"{info.symbol}  ({'W x' if col else 'x W'})"
    if name == "x" and config.model is not None:
        from .sources import model_spec

        return f"X: {model_spec(config.model).x_is}"
    return info.formula


def _score_terms(config) -> tuple[tuple[str, ...], int]:
    """The model's position terms added to ω (DeBERTa's c2p, p2c) and its scale factor; (), 1 for others."""
    from .sources import model_spec

    if config.model is None:
        return (), 1
    spec = model_spec(config.model)
    return spec.score_terms, spec.scale_factor


def _rope(config) -> bool:
    return config.rope is not None


def _rope_dims(config) -> int | None:
    """The dimensions of each head RoPE turns where a model turns only some (GPT-NeoX), else None."""
    from .sources import model_spec

    return model_spec(config.model).rope_dims if config.model is not None else None


def _across(config) -> bool:
    from .sources import model_spec

    return config.model is not None and model_spec(config.model).qk_norm_across


def _rope_scaled(config) -> str:
    """", llama3 scaling" (and YaRN's and LongRoPE's factor on cos and sin) for a scaled RoPE; else ""."""
    if not config.rope_scaling:
        return ""
    from .rope_scaling import inv_freq

    scaling = dict(config.rope_scaling)
    factor = inv_freq(config.dims.d_k, config.rope, config.rope_scaling)[1]
    return f", {scaling['rope_type']} scaling" + (f", cos and sin × {factor:.4g}" if factor != 1.0 else "")


def _qk_norm(config) -> bool:
    from .sources import model_spec

    return config.model is not None and model_spec(config.model).qk_norm

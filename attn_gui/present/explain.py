"""What each map is, for the tooltip on its title: formula, shapes, one plain sentence.

Built from ``engine.fields.FIELDS`` and the formula the config computes, so the text
says what the map in front of the reader really is (layout, biases, heads, grouping).
"""

from __future__ import annotations

import html

from ..engine import FIELDS, AttentionResult, formula

CAPTION_CHARS = 140  # a longer sentence is cut with "…" in a figure's title

# One plain sentence per field: what a reader sees in the map.
MEANING: dict[str, str] = {
    "x": "Each row is one token's vector: the input that every later step starts from.",
    "x_source": "Each row is one token of the second sentence: the keys and values are made from these.",
    "rope_angles": "How far RoPE turns each pair of dimensions (column) at each position (row): "
                   "fast turns in the first pairs, slow in the last.",
    "capped": "The scaled scores squashed into ±c by c · tanh(score / c) (soft-capping): no score can dominate "
              "without bound; small scores pass almost unchanged.",
    "rope_angles_plain": "RoPE's angles as they would be without the model's scaling: compare them with the "
                         "scaled ones beside (the slow pairs turn slower still, stretching the context).",
    "w_q": "The learned matrix that turns each token's vector into its query: what it looks for.",
    "w_k": "The learned matrix that turns each token's vector into its key: what it offers to be found by.",
    "w_v": "The learned matrix that turns each token's vector into its value: what it passes on when attended to.",
    "b_q": "A row added to every token's query.",
    "b_k": "A row added to every token's key.",
    "b_v": "A row added to every token's value.",
    "q_unrotated": "Each token's query before the position rotation.",
    "k_unrotated": "Each token's key before the position rotation.",
    "q_normed": "Each token's query with every head's vector scaled to a steady size (RMSNorm), before the rotation.",
    "k_normed": "Each token's key with every head's vector scaled to a steady size (RMSNorm), before the rotation.",
    "q": "Each row is one token's query: what that token is looking for.",
    "k": "Each row is one token's key: what that token can be found by.",
    "v": "Each row is one token's value: what that token hands on to whoever attends to it.",
    "scores": "How well each query (row) matches each key (column): large means a good match.",
    "c2p": "How much each query (row) looks for a key at that key's distance from it (content → position).",
    "p2c": "How much each key (column) wants to be found from the query's distance to it (position → content).",
    "position_bias": "ALiBi's penalty for distance: the further a key is from the query, the lower its score.",
    "scaled": "The scores scaled down so the softmax does not saturate; hatched cells are masked out.",
    "weights": "How much each query token (row) attends to each key token (column); every row sums to 1.",
    "head_outputs": "Each token's new vector from this head: the values mixed in the proportions of α.",
    "concat": "Every head's output side by side, one row per token.",
    "w_o": "The learned matrix that mixes the heads' outputs back to the model's width.",
    "b_o": "A row added to every token's output.",
    "output": "Each row is one token's new vector after attention: what the next layer receives.",
}

_AXES = {"token": "query tokens", "key": "key tokens", "source": "key tokens", "one": "one row", "dim": "",
         "pair": "dimension pairs"}


def axis_titles(name: str) -> tuple[str, str]:
    """The names of the rows and columns of field ``name`` in a picture: ("query", "key") for
    the token-by-token maps, "token" and "dimension" elsewhere, "" for a bias's single row."""
    info = FIELDS[name]
    names = {"token": "query" if info.cols == "key" else "token", "key": "key", "source": "token",
             "dim": "dimension", "one": "", "pair": "dimension pair"}
    return names[info.rows], names[info.cols]


def _dims_names(name: str, result: AttentionResult) -> tuple[str, str]:
    """The symbolic names of the rows and columns of ``name`` (``T``, ``d_model``, ``d_k`` ...)."""
    cfg, dims = result.config, result.config.dims
    col = cfg.layout == "column"
    inner = {"q": "d_k", "k": "d_k", "v": "d_v"}
    if not dims.projections:
        inner = {"q": "d_model", "k": "d_model", "v": "d_model"}
    width = {"x": "d_model", "q_unrotated": "d_k", "q_normed": "d_k", "head_outputs": inner["v"],
             "concat": f"h·{inner['v']}", "output": "d_model", "b_o": "d_model"}
    if name in ("w_q", "w_k", "w_v"):
        rows, cols = "d_model", inner[name[-1]]
        return (cols, rows) if col else (rows, cols)
    if name == "w_o":
        rows, cols = f"h·{inner['v']}", "d_model"
        return (cols, rows) if col else (rows, cols)
    if name in ("b_q", "b_k", "b_v"):
        return "1", inner[name[-1]]
    keys = "T_k" if result.source_tokens is not None else "T"  # cross-attention: the second sentence's length
    if name in ("q", "k", "v"):
        return ("T" if name == "q" else keys), inner[name]
    if name in ("k_unrotated", "k_normed"):
        return keys, "d_k"
    if name == "x_source":
        return keys, "d_model"
    if name in ("rope_angles", "rope_angles_plain"):
        return "T", "d_k/2"
    if FIELDS[name].cols == "key":
        return "T", keys
    return ("1" if FIELDS[name].rows == "one" else "T"), width[name]


def explain(name: str, result: AttentionResult) -> str:
    """The "what is this" of field ``name`` in ``result``, as rich text for a tooltip.

    >>> # e.g. "<b>α = softmax(ω / √d_k)</b><br>shape T × T = 5 × 5 (query tokens × key tokens),
    >>> #      one per head (4 heads)<br>How much each query token ..."
    """
    info = FIELDS[name]
    shape = result.shape(name)
    R, C = shape[-2:]
    rows, cols = _dims_names(name, result)
    parts = [f"shape {rows} × {cols} = {R} × {C}"]
    axes = [_AXES[info.rows], _AXES[info.cols]]
    if any(axes):
        parts[0] += f" ({axes[0] or 'dimensions'} × {axes[1] or 'dimensions'})"
    if info.per_head:
        n, heads = shape[0], result.heads
        if n == heads:
            parts.append(f"one per head ({heads} head{'s' if heads > 1 else ''})")
        else:
            parts.append(f"one per key/value head ({n}), shared by {heads // n} query heads each")
    return (f"<b>{html.escape(formula(name, result.resolved))}</b><br>{html.escape(', '.join(parts))}"
            f"<br>{html.escape(MEANING[name])}")


def figure_caption(result: AttentionResult, head: int) -> tuple[str, str]:
    """The two title lines of a whole figure: the sentence, then the sizes and the head shown.

    Positions are counted from 1, as a reader counts them.
    """
    cfg, dims, spec = result.config, result.resolved.dims, result.resolved.spec
    sentence = " ".join(cfg.sentence.split())
    if len(sentence) > CAPTION_CHARS:
        sentence = sentence[:CAPTION_CHARS - 1].rstrip() + "…"
    parts = [f"T = {result.seq_len} tokens", f"d_model = {dims.d_model}, d_k = {dims.d_k}, d_v = {dims.d_v}"]
    kv = result.shape("k")[0] if "k" in result.fields() else result.heads
    heads = f"{result.heads} head{'s' if result.heads > 1 else ''}"
    parts.append(heads + (f" sharing {kv} key/value heads" if kv != result.heads else ""))
    if spec is not None:
        parts.insert(0, f"{spec.label}, layer {cfg.layer + 1} of {spec.layers}")
    if result.heads > 1:
        parts.append(f"per-head maps: head {head + 1}")
    if result.next_tokens is not None:  # a decoder: the top 5 the window's next-token panel shows
        # repr's body: a newline or tab token stays visible on the one line
        top = ", ".join(f"“{repr(token)[1:-1]}” {p:.1%}" for token, p in result.next_tokens)
        parts.append(f"next token: {top}")
    if result.source_tokens is not None:
        source = " ".join((cfg.source_sentence or "").split())
        if len(source) > CAPTION_CHARS // 2:
            source = source[:CAPTION_CHARS // 2 - 1].rstrip() + "…"
        sentence = sentence[:CAPTION_CHARS // 2]
        parts.insert(1, f"T_k = {len(result.source_tokens)} keys")
        return f"“{sentence}” attending to “{source}”", "  ·  ".join(parts)
    return f"“{sentence}”", "  ·  ".join(parts)

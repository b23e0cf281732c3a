"""The walk of one query token through every step, as the tutorials follow x_2 "in" (HTML, no Qt).

In cross-attention the walk follows a query of the sentence across to the keys and values
of the second sentence."""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np

from ..engine import AttentionResult
from .formats import cell_formats, format_value

MAX_KEYS = 16  # keys listed in full; longer inputs list the strongest
MAX_TERMS = 4  # terms of a dot product written out


# alpha's colour map (viridis, render.style.WEIGHTS_CMAP) at 0, 1/16, ..., 1, as pyqtgraph gives it
VIRIDIS = ("#440154", "#481769", "#472c7a", "#423f85", "#3b518b", "#33628d", "#2c718e", "#26818e", "#21908c",
           "#1f9f88", "#27ad80", "#3dbc73", "#5cc862", "#81d34c", "#aadc31", "#d5e219", "#fde725")


def alpha_colour(value: float) -> str:
    """The colour of ``value`` on alpha's fixed 0 to 1 scale, as the maps draw it ("#rrggbb"; between two of
    ``VIRIDIS``'s stops, linearly)."""
    x = min(1.0, max(0.0, value if np.isfinite(value) else 0.0)) * (len(VIRIDIS) - 1)
    i = min(int(x), len(VIRIDIS) - 2)
    lo, hi = (np.array([int(c[k:k + 2], 16) for k in (1, 3, 5)]) for c in VIRIDIS[i:i + 2])
    r, g, b = np.round(lo + (hi - lo) * (x - i)).astype(int)
    return f"#{r:02x}{g:02x}{b:02x}"


def _vec(v: np.ndarray, limit: int = 12) -> str:
    items = [format_value(float(a)) for a in v[:limit]]
    more = f", … ({len(v)} values)" if len(v) > limit else ""
    return "[" + ", ".join(items) + more + "]"


def _terms(a: np.ndarray, b: np.ndarray) -> str:
    def f(v: float) -> str:
        return f"({format_value(v)})" if v < 0 else format_value(v)

    parts = [f"{f(float(x))}·{f(float(y))}" for x, y in zip(a[:MAX_TERMS], b[:MAX_TERMS], strict=True)]
    return " + ".join(parts) + (f" + … ({len(a)} terms)" if len(a) > MAX_TERMS else "")


HINT = ("<p style='color:#556'>Click a row of any map (a query token) to follow it through "
        "every step: x<sub>i</sub> → q<sub>i</sub> → ω<sub>i</sub> → α<sub>i</sub> → "
        "z<sub>i</sub>, with the numbers.</p>")


@dataclass(frozen=True)
class _Slices:
    """What the walk of one query token through one head prints, on the host (only small slices travel)."""

    x: np.ndarray  # the token's hidden state
    q: np.ndarray
    k: np.ndarray  # every key of the head's K/V head
    v: np.ndarray
    omega: np.ndarray  # its row of scores, scaled scores, soft-capped scores (or None) and weights
    scaled: np.ndarray
    soft: np.ndarray | None
    alpha: np.ndarray
    z: np.ndarray
    rel: dict[str, np.ndarray]  # DeBERTa's position terms, by name


def walk_html(result: AttentionResult, token: int, head: int) -> str:
    """The step-by-step walk of query ``token`` through head ``head``, as HTML."""
    tok = html.escape(result.tokens[token])
    missing = [n for n in ("x", "q", "k", "v", "scores", "scaled", "head_outputs") if n in result.not_captured]
    X, Q, K, V, Z = result.x, result.q, result.k, result.v, result.head_outputs
    if missing or X is None or Q is None or K is None or V is None or Z is None:  # read through transformers
        spec = result.resolved.spec
        through = spec.through if spec is not None else "this model"
        return (f"<p>The walk of <b>{tok}</b> needs {', '.join(missing)}, which are not captured for "
                f"{html.escape(through)}: its maps say so.</p>")
    host = lambda t: t.detach().cpu().numpy()  # noqa: E731 - only small slices travel
    cap = result.resolved.shown.softcap
    s = _Slices(x=host(X[token]), q=host(Q[head, token]),
                k=host(K[result.head_index("k", head)]),  # grouped-query: the head's K/V head
                v=host(V[result.head_index("v", head)]),
                omega=host(result.row("scores", head, token)),  # one row, recomputed when streamed
                scaled=host(result.row("scaled", head, token)),
                soft=host(result.row("capped", head, token)) if cap is not None else None,
                alpha=host(result.row("weights", head, token)), z=host(Z[head, token]),
                rel={t: host(getattr(result, t)[head, token]) for t in result.position_terms})
    out = _opening(result, token, head, tok, s)
    T = result.key_len  # keys: the second sentence's in cross-attention
    order = np.argsort(-s.alpha, kind="stable")[:MAX_KEYS] if T > MAX_KEYS else np.arange(T)
    out.append(_scores_step(result, token, s, T))
    out.append(_score_table(result, token, s, order))
    out.append(f"<p>The weights sum to {float(s.alpha.sum()):.4f}.</p>")
    terms = " + ".join(f"{float(s.alpha[j]):.3f}·v<sub>{j + 1}</sub>" for j in order[:6])
    if len(order) > 6 or T > len(order):
        terms += " + …"
    n = token + 1
    out.append(f"<p><b>5. Context vector</b> z<sub>{n}</sub> = Σ<sub>j</sub> α<sub>{n}j</sub> v<sub>j</sub> = "
               f"{terms} = {_vec(s.z)}</p>")
    if s.v.shape[1] and result.w_o is not None:
        out.append("<p><b>6.</b> The heads' z are concatenated and multiplied by W<sub>O</sub> "
                   "to give the output row (last map).</p>")
    return "".join(out)


def _opening(result: AttentionResult, token: int, head: int, tok: str, s: _Slices) -> list[str]:
    """The walk's title and its steps 1 (the hidden state) and 2 (the query), and where the keys come from."""
    cfg = result.config
    n = token + 1  # the tutorials count tokens from 1
    col = cfg.layout == "column"
    head_txt = f", head {head + 1} of {result.heads}" if result.heads > 1 else ""
    out = [f"<h3 style='margin:2px'>Following x<sub>{n}</sub> “{tok}”{head_txt}</h3>"]
    step1 = f"Hidden state entering layer {cfg.layer + 1}" if cfg.model else "Embedding"
    out.append(f"<p><b>1. {step1}</b> x<sub>{n}</sub> = {_vec(s.x)}</p>")
    if result.w_q is not None:
        proj = f"W<sub>q</sub> x<sub>{n}</sub>" if col else f"x<sub>{n}</sub> W<sub>q</sub>"
        if result.b_q is not None:  # a model's biases, or random ones (bias on)
            proj += " + b<sub>q</sub>"
        out.append(f"<p><b>2. Query</b> q<sub>{n}</sub> = {proj} = {_vec(s.q)}</p>")
    else:
        out.append(f"<p><b>2. Query</b> q<sub>{n}</sub> = x<sub>{n}</sub> (no projection)</p>")
    if result.source_tokens is not None:
        kproj = "W<sub>k</sub> x′<sub>j</sub>" if col else "x′<sub>j</sub> W<sub>k</sub>"
        out.append(f"<p><b>Across sentences:</b> the keys and values come from the second sentence, "
                   f"k<sub>j</sub> = {kproj} for each of its {result.key_len} tokens x′<sub>j</sub>; "
                   f"this query of the first sentence weighs them.</p>")
    return out


def _scores_step(result: AttentionResult, token: int, s: _Slices, T: int) -> str:
    """Steps 3 (the scores) and 4 (the weights) in words, as the model computes them (its scale, soft-cap,
    similarity and position terms: the shown layer's options)."""
    n = token + 1
    options = result.resolved.shown  # the shown layer as the compute ran it: the model's scale and soft-cap
    sim = "cos(q, k)" if options.similarity == "cosine" else "q · k"
    extra = result.position_terms  # DeBERTa's c2p and p2c, added to ω before the scale
    div = " / ".join(options.divisor_text(s.q.shape[0])) or "1"
    cap = options.softcap
    note = f" (the {MAX_KEYS} keys with the largest weight of {T:,})" if T > MAX_KEYS else ""
    summed = f"(ω<sub>{n}j</sub> + {' + '.join(f'{t}<sub>{n}j</sub>' for t in extra)})" if extra \
        else f"ω<sub>{n}j</sub>"
    position = (f"; DeBERTa adds its position terms {' and '.join(extra)} (content → position, position → "
                "content) before the scale") if extra else ""
    logit = f"{summed} / {div}" if cap is None else f"{cap:g} · tanh({summed} / {div} / {cap:g})"
    capped = "" if cap is None else (f"; the model soft-caps the scaled scores at ±{cap:g} before the softmax "
                                     "(ω″ = c · tanh(ω′ / c))")
    return (f"<p><b>3. Scores</b> ω<sub>{n}j</sub> = {sim}<sub>j</sub>{position}, "
            f"<b>4. weights</b> α<sub>{n}j</sub> = softmax<sub>j</sub>({logit}){note}{capped}</p>")


def _score_table(result: AttentionResult, token: int, s: _Slices, order: np.ndarray) -> str:
    """The keys in ``order``, a row each: the dot product term by term, ω, the position terms, the scaled
    (and soft-capped) score and α with a bar."""
    options = result.resolved.shown
    extra = result.position_terms
    div = " / ".join(options.divisor_text(s.q.shape[0])) or "1"
    head_sum = f"(ω + {' + '.join(extra)})" if extra else "ω"
    rows = ["<tr style='background:#eef1f6'><th>j</th><th>key</th><th>q · k<sub>j</sub> term by term</th>"
            "<th>ω</th>" + "".join(f"<th>{t}</th>" for t in extra)
            + f"<th>{html.escape(head_sum)} / " + html.escape(div) + "</th>"
            + ("<th>ω″</th>" if options.softcap is not None else "") + "<th>α</th></tr>"]
    alpha, scaled, soft = s.alpha, s.scaled, s.soft
    finite = np.abs(scaled[np.isfinite(scaled)])
    scaled_text = cell_formats(float(finite.max()) if finite.size else 1.0)[0]  # ω/√d_k/100 read "0.00" each
    for j in order:
        masked = np.isneginf(scaled[j])
        why = "key after the query" if j > token else "outside the window"  # a causal mask, or the window's
        terms = f"masked ({why})" if masked else (
            "cosine of the angle" if options.similarity == "cosine" else _terms(s.q, s.k[j]))
        bar = (f"<span style='background:{alpha_colour(float(alpha[j]))}'>"
               f"{'&nbsp;' * max(0, int(round(alpha[j] * 20)))}</span>")
        rows.append(
            f"<tr><td>{j + 1}</td><td>{html.escape(result.key_tokens[j])}</td><td>{terms}</td>"
            f"<td align=right>{format_value(float(s.omega[j]))}</td>"
            + "".join(f"<td align=right>{format_value(float(s.rel[t][j]))}</td>" for t in extra) +
            f"<td align=right>{scaled_text(float(scaled[j]))}</td>"
            + (f"<td align=right>{format_value(float(soft[j]))}</td>" if soft is not None else "") +
            f"<td align=right>{float(alpha[j]):.4f} {bar}</td></tr>")
    return "<table cellspacing=0 cellpadding=3 border=0>" + "".join(rows) + "</table>"

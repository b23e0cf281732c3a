"""Why this head: direct logit attribution, score attribution, the logit lens, QK/OV circuits, a head detector.

Every function reads a decoder of the one decoder forward (``sources/llama.py``): the bundled
SmolLM2, Hugging Face folders of every decoder family, GGUF files and the checkpoints of
``attn-gui train``. The residual stream is a sum of components, each written by one part of
the model (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"):

    x = embed [+ positions] + sum over layers l of (sum_i head_{l,i} + b_O,l + mlp_l)

head_{l,i} = Z_i W_O,i is what head i of layer l writes: its output Z_i (n, d_v), the rows of
o_proj's input that are its own, times its d_v columns of W_O (the value bias b_V rides in Z_i,
as transformers computes it). A norm is linear once its scale is frozen at the value it has on
the actual residual (TransformerLens' ``apply_ln=True``): RMSNorm(x) = sum_c c * s * gamma with
s = 1 / sqrt(mean(x^2) + eps); LayerNorm centres each component and adds its bias beta once.
So the logit of a token, and one attention score, split exactly into the components' terms.

- ``direct_logit_attribution``: each component's direct term in the logit of ``token`` at the
  last position (or in logit(token) - logit(against)); the terms sum to the logit.
- ``score_attribution``: one scaled score omega'[query, key] of the shown layer's head as a
  matrix of query-side component x key-side component terms (q and k are linear in the
  residual with the norm's scale frozen; RoPE rotates each term; Qwen3's per-head q/k norms
  are frozen likewise); the matrix sums to the score.
- ``logit_lens``: the residual entering each layer (and the last) through the final norm and
  the unembedding: the top k tokens and their p at every position (nostalgebraist 2020).
- ``circuits``: a head's QK circuit and OV circuit over the sentence's tokens, and
  ``copying_scores``, Elhage et al.'s summary of the eigenvalues of W_U W_OV W_E per head.
- ``detect_heads``: previous-token, duplicate-token, induction and sink scores per head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ...ablation import ablation_hooks
from ...kernel.rope import rope_tables, rotate
from ...base.errors import ConfigError
from ..interventions import _ids, target_id
from ...plan import Plan, Request, as_plan, next_token_refusal  # noqa: F401  (re-exported: the census and its tests ask here)
from ...sources.llama import BLOCKS, decoder_layer, gain, head_weights, layer_pieces, logits, norm
from ...readers.stored import rows

FINAL = "model.norm"


@dataclass(frozen=True)
class Trace:
    """One forward pass with every residual component kept (``trace``).

    Attributes
    ----------
    names : list of C str
        The components, in the order they are written: "embed", "positions" (GPT-2), then per
        layer l (counted from 1) "L{l}H{i}" for each head, "L{l} attn bias" (W_O's bias, where
        the weights hold one) and "L{l} mlp". Where a norm stands between attention and the residual
        (Gemma's sandwich, OLMo 2: ``llama.Block.attn_post``), each head's part is its share of that norm's
        output with the norm's scale frozen on the real attention output, as the rest of the split freezes them.
    parts : (C, n, d)
        What each component adds to the residual stream at every position.
    entering : list of L + 1 ints
        How many components make up the residual entering layer l (the last: all of them).
    residual : list of L + 1 tensors (n, d)
        The residual stream entering each layer; the last is the final residual, before the final norm.
    weights : (L, h, n, n)
        Every layer's attention weights.
    scaled : (L, h, n, n)
        Every layer's scaled scores omega' (-inf where masked).
    ids : the sentence's token ids
    logits : (V,)
        The model's own next-token logits, from its forward pass (``source.forward``), which the
        split is checked against.
    """

    names: list[str]
    parts: torch.Tensor
    entering: list[int]
    residual: list[torch.Tensor]
    weights: torch.Tensor
    scaled: torch.Tensor
    ids: tuple[int, ...]
    logits: torch.Tensor


def _model(p: Plan):
    """The decoder ``p`` runs (``Plan.runner``), its weights and shape on the plan's device and dtype."""
    src = p.runner("intervene")
    device, dtype = p.exact_device()
    w, shape = src.decoder(device, dtype)
    return src, w, shape, device, dtype


def head_writes(z: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """What each head writes to the residual stream: Z_i W_O,i.  z (..., h, n, d_v), w_o (d, h*d_v) -> (..., h, n, d)"""
    heads, _, d_v = z.shape[-3:]
    return torch.einsum("...hnv,dhv->...hnd", z, w_o.view(-1, heads, d_v))


def trace(request: Request) -> Trace:
    """Run ``config``'s sentence through its decoder, keeping every component of the residual stream.

    Heads knocked out by ``config.ablate`` write what the ablation leaves (zero, or their mean).
    The components must sum to the residual entering every layer, and the final norm and
    unembedding of that residual must give the model's own logits (its forward pass): a model
    whose forward gains a step this split does not know is refused, never split wrongly.
    """
    planned = as_plan(request)
    config = planned.config
    src, w, shape, device, dtype = _model(planned)
    ids = _ids(src, config)
    token_ids = torch.tensor(ids, device=device)
    hooks = ablation_hooks(tuple(config.ablate))  # {} without ablated heads
    block = BLOCKS[shape.block]
    with torch.no_grad():
        h = rows(w, "model.embed_tokens.weight", token_ids)  # (n, d)
        if shape.embed_scale:  # Gemma: the embedding times √d, as llama.forward
            h = h * h.new_tensor(h.shape[-1] ** 0.5)
        names, parts = ["embed"], [h]
        if "model.embed_positions.weight" in w:  # GPT-2's learned positions
            pos = rows(w, "model.embed_positions.weight", torch.arange(len(ids), device=device))
            names.append("positions")
            parts.append(pos)
            h = h + pos
        residual, entering, weights, scaled = [h], [len(names)], [], []
        total = h  # the running sum of the components
        for layer in range(shape.layers):
            pieces = layer_pieces(h, w, layer, shape, z_hook=hooks.get(layer))
            steps = pieces.steps
            w_o = head_weights(w, layer, shape).w_o
            assert w_o is not None  # a decoder layer has every projection
            writes = head_writes(steps.head_outputs, w_o)  # (h, n, d): what each head adds to attention's output
            b_o = f"model.layers.{layer}.self_attn.o_proj.bias"
            bias = w[b_o].expand_as(h)[None] if b_o in w else None
            if block.attn_post is not None:  # a norm after attention: each head's share of its output
                both = writes if bias is None else torch.cat([writes, bias])
                shares, beta = frozen_norm(both, steps.output, w, f"model.layers.{layer}.{block.attn_post}", shape)
                assert beta is None  # the post-norms are RMSNorms
                writes, bias = (shares, None) if bias is None else (shares[:-1], shares[-1:])
            names += [f"L{layer + 1}H{i + 1}" for i in range(shape.heads)]
            parts += list(writes)
            if bias is not None:
                names.append(f"L{layer + 1} attn bias")
                parts.append(bias[0])
            names.append(f"L{layer + 1} mlp")
            parts.append(pieces.mlp_write)
            total = total + sum(parts[entering[-1]:])
            _check_sum(total, pieces.resid_post, f"layer {layer + 1}'s output")
            h = pieces.resid_post
            residual.append(h)
            entering.append(len(names))
            weights.append(steps.alpha)
            assert steps.scaled is not None  # never streamed here
            scaled.append(steps.scaled)
        model = src.forward(token_ids, device, dtype, z_hooks=hooks).logits  # (V,)
        _check_sum(logits(norm(h[-1:], w, FINAL, shape), w, shape.final_softcap)[0], model, "the model's logits")
    return Trace(names, torch.stack(parts), entering, residual, torch.stack(weights), torch.stack(scaled), ids,
                 model)


def _check_sum(total: torch.Tensor, real: torch.Tensor, what: str) -> None:
    """Refuse (one line) when the components' ``total`` is not the model's own ``real`` (relative 1e-4)."""
    if float((total - real).abs().max()) > 1e-4 * max(1.0, float(real.abs().max())):
        raise ConfigError(f"this model's forward pass has a step the attribution does not split ({what} differ "
                          "from the sum of the components); attribution is not available for it")


def frozen_norm(parts: torch.Tensor, x: torch.Tensor, w: dict, prefix: str | None,
                shape) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Each component's share of norm(x), the norm's scale frozen at its value on the actual residual ``x``.

    parts (C, n, d) sum to x (n, d). RMSNorm: c * s * gamma, s = 1 / sqrt(mean(x^2) + eps), gamma the gain the
    family applies (``llama.gain``: Gemma's 1 + γ); LayerNorm: (c - mean(c)) * s * gamma, s = 1 / sqrt(var(x) +
    eps), and its bias beta (d,) once (returned second; None for RMSNorm). The shares sum to norm(x).
    ``prefix`` None: no norm there (OLMo 2 reads the residual itself): the parts as they are.
    """
    if prefix is None:
        return parts, None
    gamma = gain(w, prefix, shape)
    if shape.norm == "layer":
        s = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + shape.eps)  # (n, 1)
        centred = parts - parts.mean(-1, keepdim=True)
        return centred * s * gamma, w[prefix + ".bias"]
    s = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + shape.eps)  # (n, 1), in float32 as Gemma's norm
    return (parts * s * gamma).to(parts.dtype), None


def _unembedding(w: dict, ids: list[int], device) -> torch.Tensor:
    key = "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight"
    return rows(w, key, torch.tensor(ids, device=device))  # (k, d)


@dataclass(frozen=True)
class LogitAttribution:
    """The direct terms of one logit (or logit difference) at the last position.

    Attributes
    ----------
    heads : (L, h) tensor
        Each head's direct term.
    names, values : the C components (``Trace.names``, plus "final norm bias" for LayerNorm) and their terms (C,)
    logit : float
        The model's own logit (difference), which the terms sum to.
    token, against : vocabulary ids (against: None without a difference)
    """

    heads: torch.Tensor
    names: list[str]
    values: torch.Tensor
    logit: float
    token: int
    against: int | None


def direct_logit_attribution(request: Request, token: str | int | None = None,
                             against: str | int | None = None, traced: Trace | None = None) -> LogitAttribution:
    """Each component's direct contribution to the logit of ``token`` after the last token of the sentence.

    term_c = (norm-share of component c at the last position) . u_token, with the final norm's
    scale frozen on the actual residual (TransformerLens' ``apply_ln=True``), u the unembedding
    row; with ``against``, u_token - u_against: the logit difference. The terms sum to the logit.
    ``token`` None: the model's top next token. ``traced``: ``trace(config)`` if already run.
    """
    planned = as_plan(request)
    src, w, shape, device, _ = _model(planned)
    if shape.final_softcap is not None:
        raise ConfigError("its logits are soft-capped (final_logit_softcapping), which no sum of the components' "
                          "terms gives: direct logit attribution is not available for it")
    t = traced or trace(planned)
    last = t.residual[-1][-1:]  # (1, d)
    with torch.no_grad():
        model_logits = t.logits
        tok = target_id(src, token, model_logits)
        other = None if against is None else target_id(src, against, model_logits)
        if other == tok:
            raise ConfigError("token and against are the same token: the difference is 0 by definition")
        u = _unembedding(w, [tok] if other is None else [tok, other], device)
        u = u[0] if other is None else u[0] - u[1]  # (d,)
        shares, beta = frozen_norm(t.parts[:, -1:], last, w, FINAL, shape)  # (C, 1, d)
        values = shares[:, 0] @ u  # (C,)
        names = list(t.names)
        if beta is not None:
            names.append("final norm bias")
            values = torch.cat([values, (beta @ u)[None]])
        logit = model_logits[tok] - (0 if other is None else model_logits[other])
    heads = torch.stack([values[names.index(f"L{l + 1}H{i + 1}")] for l in range(shape.layers)  # noqa: E741
                         for i in range(shape.heads)]).view(shape.layers, shape.heads)
    return LogitAttribution(heads.double().cpu(), names, values.double().cpu(), float(logit), tok, other)


@dataclass(frozen=True)
class ScoreAttribution:
    """One scaled score omega'[query, key] of a head, split into query-side x key-side component terms.

    Attributes
    ----------
    matrix : (C_q, C_k) tensor
        matrix[a, b] = (R_query q_a) . (R_key k_b) / divisor: the query that component a gives against the key
        that component b gives, each rotated by its position as the layer's RoPE turns it (its scaling, its
        rotated dimensions), over what the layer divides its scores by (the plan's: √d_k, Gemma's
        √query_pre_attn_scalar, GPT-2's layer number, none where the model does not scale).
    query_names, key_names : the components of each side: those of the residual entering the layer,
        then "bias" (the norm's bias and the projection's bias) where the model has one
    score : float, the model's own scaled score ω′, which the matrix sums to
    capped : float or None, the soft-capped score ω″ = c tanh(ω′ / c) the softmax reads (Gemma 2), which no sum
        of terms gives; None without a soft-cap
    divisor : str, what the scores are divided by ("√64", "√256", "√64 / 3")
    """

    matrix: torch.Tensor
    query_names: list[str]
    key_names: list[str]
    score: float
    layer: int
    head: int
    query: int
    key: int
    capped: float | None = None
    divisor: str = ""


def _side(t: Trace, w: dict, shape, layer: int, pos: int, w_all: torch.Tensor, b_all, x_norm,
          index: int) -> tuple:
    """One side's per-component vectors (C [+ 1], d_k) before RoPE, and its names.

    ``w_all``, ``b_all``: every head's projection (H, d_k, d) and bias (H, 1, d_k) or None, of which head ``index``
    is this side's; ``x_norm``: the q/k norm's gain (per head, d_k; or over all heads, H d_k), or None."""
    count = t.entering[layer]
    block = BLOCKS[shape.block]
    prefix = None if block.attn_norm is None else f"model.layers.{layer}.{block.attn_norm}"
    shares, beta = frozen_norm(t.parts[:count, pos:pos + 1], t.residual[layer][pos:pos + 1], w, prefix,
                               shape)  # (C, 1, d)
    w_x = w_all[index]  # (d_k, d)
    vectors = shares[:, 0] @ w_x.T  # (C, d_k)
    names = list(t.names[:count])
    bias = None if beta is None else beta @ w_x.T
    if b_all is not None:
        bias = b_all[index].reshape(-1) if bias is None else bias + b_all[index].reshape(-1)
    if bias is not None:
        vectors = torch.cat([vectors, bias[None]])
        names.append("bias")
    if x_norm is not None:  # the q/k RMSNorm, its scale frozen on the whole vector this token gives
        d_k = vectors.size(-1)
        full = vectors.sum(0)
        if x_norm.numel() != d_k:  # OLMo 2: over every head of the token (H d_k); this head's slice of the gain
            x = shares[:, 0].sum(0) + (0 if beta is None else beta)  # what attention reads at ``pos`` (d,)
            full = torch.einsum("hkd,d->hk", w_all, x) + (0 if b_all is None else b_all.reshape(w_all.size(0), -1))
            x_norm = x_norm.view(w_all.size(0), d_k)[index]
        vectors = vectors * torch.rsqrt(full.pow(2).mean() + shape.eps) * x_norm
    return vectors, names


def score_attribution(request: Request, head: int, query: int, key: int,
                      traced: Trace | None = None) -> ScoreAttribution:
    """Split the scaled score omega'[query, key] of head ``head`` (0-based) of the shown layer (``config.layer``)
    into the terms of each pair (query-side component, key-side component); the terms sum to the score.

    The layer's arithmetic is its plan's (``engine.plan``): RoPE with its scaling and rotated dimensions, its
    divisor. Positions are 0-based token indices; a key the query cannot see (after it, or out of the window) is
    refused.
    """
    planned = as_plan(request)
    _, w, shape, _, _ = _model(planned)
    layer = planned.config.layer
    if not 0 <= layer < shape.layers:
        raise ConfigError(f"layer {layer + 1} does not exist: layers are 1 to {shape.layers}")
    if not 0 <= head < shape.heads:
        raise ConfigError(f"head {head + 1} does not exist: heads are 1 to {shape.heads}")
    t = traced or trace(planned)
    n = len(t.ids)
    if not (0 <= query < n and 0 <= key < n):
        raise ConfigError(f"query and key must be token positions 1 to {n}; got {query + 1} and {key + 1}")
    score = t.scaled[layer, head, query, key]
    if not torch.isfinite(score):
        raise ConfigError(f"token {query + 1} cannot see token {key + 1} (masked): its score is -inf")
    p = head_weights(w, layer, shape)
    assert p.w_q is not None and p.w_k is not None  # a decoder layer has every projection
    options = shape.options(layer)  # the plan's: as this compute ran the layer
    group = head // (shape.heads // shape.kv_heads)  # the K head this query head reads
    with torch.no_grad():
        qs, q_names = _side(t, w, shape, layer, query, p.w_q, p.b_q, p.q_norm, head)
        ks, k_names = _side(t, w, shape, layer, key, p.w_k, p.b_k, p.k_norm, group)
        d_k = qs.size(-1)
        if options.rope_base is not None:  # rotate each term by its position: the rotation is linear
            r = options.rope_dims or d_k  # partial rotary: the first r dimensions turn
            _, cos, sin = rope_tables(n, r, options.rope_base, qs.dtype, qs.device, 0, options.rope_scaling)
            qs, ks = rotate(qs, cos[query], sin[query]), rotate(ks, cos[key], sin[key])
        if options.similarity == "cosine":
            raise ConfigError("a cosine similarity divides each score by |q| |k|, which no sum of terms gives: "
                              "score attribution splits dot-product scores")
        matrix = qs @ ks.T / options.divisor(d_k)  # (C_q, C_k)
    capped = None if options.softcap is None else options.softcap * math.tanh(float(score) / options.softcap)
    return ScoreAttribution(matrix.double().cpu(), q_names, k_names, float(score), layer, head, query, key,
                            capped, " / ".join(options.divisor_text(d_k)) or "1")


@dataclass(frozen=True)
class LogitLens:
    """The top ``k`` tokens and their p at every position, read from the residual entering each layer.

    Attributes
    ----------
    tokens : list (L + 1) of lists (n) of k token texts; row l is the residual entering layer l + 1, the last row
        the model's own output
    probs : (L + 1, n, k) tensor
    """

    tokens: list[list[list[str]]]
    probs: torch.Tensor


LENS_ROWS = 256  # residual rows unembedded at a time: (256, V) logits


def logit_lens(request: Request, k: int = 5, traced: Trace | None = None) -> LogitLens:
    """Each layer's residual stream through the final norm (its own scale) and the unembedding: top k tokens."""
    planned = as_plan(request)
    src, w, shape, _, _ = _model(planned)
    t = traced or trace(planned)
    normed = norm(torch.cat(t.residual), w, FINAL, shape)  # ((L + 1) n, d)
    values, indices = [], []
    with torch.no_grad():
        for start in range(0, normed.size(0), LENS_ROWS):
            p = torch.softmax(logits(normed[start:start + LENS_ROWS], w).double(), -1)  # (rows, V)
            top = p.topk(min(k, p.size(-1)), -1)
            values.append(top.values.cpu())
            indices.append(top.indices.cpu())
    n = len(t.ids)
    probs, ids = torch.cat(values).view(len(t.residual), n, -1), torch.cat(indices).view(len(t.residual), n, -1)
    texts = [[[src.token_text(i) for i in row] for row in layer] for layer in ids.tolist()]
    return LogitLens(texts, probs)


@dataclass(frozen=True)
class Circuits:
    """A head's QK and OV circuits restricted to the sentence's distinct tokens (in order of appearance).

    qk[a, b]: the scaled score query token a gives key token b, position-free (no RoPE, no biases, no q/k norms),
    over the layer's own divisor;
    ov[a, b]: the logit of token b that attending to token a writes directly. Norms enter as their gains
    (gamma), folded into the weights as TransformerLens' ``fold_ln`` does; their scale is left out.
    """

    tokens: list[str]
    qk: torch.Tensor
    ov: torch.Tensor
    layer: int
    head: int


def _ov_parts(w: dict, shape, layer: int, head: int):
    """W_V,g diag(gamma_layer) (d_v, d) and diag(gamma_final) W_O,i (d, d_v) of head ``head``, each gamma the gain
    its family applies (``llama.gain``: Gemma's 1 + γ; ones where attention reads the residual without a norm,
    OLMo 2)."""
    p = head_weights(w, layer, shape)
    assert p.w_v is not None and p.w_o is not None  # a decoder layer has every projection
    group = head // (shape.heads // shape.kv_heads)
    d_v = p.w_v.size(1)
    block = BLOCKS[shape.block]
    gamma = torch.ones(p.w_v.size(-1), dtype=p.w_v.dtype, device=p.w_v.device) if block.attn_norm is None else \
        gain(w, f"model.layers.{layer}.{block.attn_norm}", shape).to(p.w_v.dtype)
    w_o = p.w_o.view(-1, shape.heads, d_v)[:, head]  # (d, d_v)
    return p.w_v[group] * gamma, gain(w, FINAL, shape).to(w_o.dtype)[:, None] * w_o, p, group, gamma


def circuits(request: Request, head: int) -> Circuits:
    """The QK and OV circuits of head ``head`` (0-based) of the shown layer, token -> token over the sentence."""
    planned = as_plan(request)
    src, w, shape, device, _ = _model(planned)
    layer = planned.config.layer
    if not (0 <= layer < shape.layers and 0 <= head < shape.heads):
        raise ConfigError(f"head {layer + 1}.{head + 1} does not exist: layers are 1 to {shape.layers}, "
                          f"heads 1 to {shape.heads}")
    distinct = list(dict.fromkeys(_ids(src, planned.config)))
    with torch.no_grad():
        e = rows(w, "model.embed_tokens.weight", torch.tensor(distinct, device=device))  # (u, d)
        w_v, w_o, p, group, gamma = _ov_parts(w, shape, layer, head)
        x = e * gamma
        q, k = x @ p.w_q[head].T, x @ p.w_k[group].T  # (u, d_k)
        qk = q @ k.T / shape.options(layer).divisor(q.size(-1))  # the layer's own divisor (the plan's)
        written = e @ w_v.T @ w_o.T  # (u, d)
        ov = written @ _unembedding(w, distinct, device).T  # (u, u)
    return Circuits([src.token_text(i) for i in distinct], qk.double().cpu(), ov.double().cpu(), layer, head)


def copying_scores(request: Request) -> torch.Tensor:
    """Every head's copying score, (L, h): Elhage et al.'s summary of the eigenvalues lambda of its full OV circuit
    W_U diag(gamma_final) W_O,i W_V,i diag(gamma_layer) W_E^T (V x V), sum(lambda) / sum(|lambda|).

    1 when every eigenvalue is positive (the head raises the logit of the token it attends to: copying), -1 when
    every one is negative. The V x V matrix has the non-zero eigenvalues of the d_v x d_v product
    W_V,i diag(gamma_layer) (W_E^T W_U) diag(gamma_final) W_O,i, which is what is computed.
    """
    _, w, shape, _, _ = _model(as_plan(request))
    scores = torch.empty(shape.layers, shape.heads, dtype=torch.float64)
    with torch.no_grad():
        embed = w["model.embed_tokens.weight"]
        unembed = w.get("lm_head.weight", embed)
        eu = (embed.T.double() @ unembed.double())  # (d, d): W_E^T W_U
        for layer in range(shape.layers):
            for head in range(shape.heads):
                w_v, w_o, _, _, _ = _ov_parts(w, shape, layer, head)
                small = w_v.double() @ eu @ w_o.double()  # (d_v, d_v)
                lam = torch.linalg.eigvals(small)
                scores[layer, head] = (lam.sum().real / lam.abs().sum()).cpu()
    return scores


DETECTORS = ("previous-token", "duplicate-token", "induction", "sink")
THRESHOLD = 0.4  # a head is labelled with its highest score at or above this


@dataclass(frozen=True)
class Detection:
    """Each detector's score per head (L, h) on the current input, and each head's label ("" for none)."""

    scores: dict[str, torch.Tensor]
    labels: list[list[str]]


def detector_scores(weights: torch.Tensor, ids: tuple[int, ...]) -> dict[str, torch.Tensor]:
    """The detectors' scores of attention weights (L, h, n, n) on tokens ``ids``, (L, h) each; NaN where no row
    of the input qualifies. Each is the mean, over the qualifying query rows i, of the weight on the keys j:

    - previous-token: j = i - 1 (rows i >= 1);
    - duplicate-token: every earlier j with the same token as i (rows with one);
    - induction: every j >= 1 whose previous token equals token i, j - 1 < i (the token after an earlier copy);
    - sink: j = 0, the first token (rows i >= 1).
    """
    n = len(ids)
    tok = torch.tensor(ids)
    before = torch.arange(n)[None, :] < torch.arange(n)[:, None]  # (n, n): j < i
    patterns = {
        "previous-token": torch.diag(torch.ones(n - 1, dtype=torch.bool), -1),
        "duplicate-token": (tok[:, None] == tok[None, :]) & before,
        "induction": torch.zeros(n, n, dtype=torch.bool),
        "sink": torch.zeros(n, n, dtype=torch.bool),
    }
    patterns["induction"][:, 1:] = (tok[:, None] == tok[None, :-1]) & before[:, :-1]  # token j - 1 = token i
    patterns["sink"][1:, 0] = True
    a = weights.double().cpu()
    out = {}
    for name, pattern in patterns.items():
        qualify = pattern.any(-1)  # (n,)
        if not qualify.any():
            out[name] = torch.full(a.shape[:2], float("nan"), dtype=torch.float64)
            continue
        out[name] = (a * pattern).sum(-1)[..., qualify].mean(-1)
    return out


def detect_heads(request: Request, traced: Trace | None = None) -> Detection:
    """Score every head of ``config``'s model on its sentence (``detector_scores``) and label it with the detector
    it scores highest on, if that score reaches ``THRESHOLD``."""
    t = traced or trace(request)
    scores = detector_scores(t.weights, t.ids)
    stacked = torch.stack([scores[name].nan_to_num(-1.0) for name in DETECTORS])  # (4, L, h)
    best, which = stacked.max(0)
    labels = [[DETECTORS[int(k)] if float(v) >= THRESHOLD else "" for v, k in zip(row_v, row_k, strict=True)]
              for row_v, row_k in zip(best, which, strict=True)]
    return Detection(scores, labels)


def next_token_attribution(w: dict, shape, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every head's direct logit attribution of the actual next token at every position of one passage, and the
    attention weights of the same forward pass (the corpus census's ``dla``).

    Position i (0-based, i < n - 1) is scored on the token that follows it, t = ids[i + 1]: head (l, h)'s term is
    what it writes there, Z_h[i] W_O,h, through the final norm with its scale frozen at position i, dotted with the
    unembedding row u_t, as ``direct_logit_attribution`` computes it at the last position (TransformerLens's
    per-position DLA with ``tokens`` the actual next tokens). RMSNorm: s_i (Z_h[i] W_O,h) . (gamma * u_t);
    LayerNorm: the write centred first, which is the same as centring gamma * u_t. The term splits over the keys
    j the head read, alpha[i, j] (v_j W_O,h) . (...) (b_V rides in v, the weights sum to 1); the key whose share
    is largest is returned beside it.

    Parameters
    ----------
    w, shape : a decoder's weights and shape (``Source.decoder``); ``next_token_refusal(shape)`` must be None
    ids : (n,) token ids

    Returns
    -------
    weights (L, h, n, n), dla (L, h, n - 1) and key (L, h, n - 1), the key with the largest share (0-based).
    """
    n = ids.numel()
    with torch.no_grad():
        h = rows(w, "model.embed_tokens.weight", ids)  # (n, d), as llama.forward starts
        if shape.embed_scale:
            h = h * h.new_tensor(h.shape[-1] ** 0.5)
        if "model.embed_positions.weight" in w:
            h = h + rows(w, "model.embed_positions.weight", torch.arange(n, device=ids.device))
        unembed = "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight"
        read = rows(w, unembed, ids[1:]) * gain(w, FINAL, shape)  # (n - 1, d): gamma * u_t at each position
        if shape.norm == "layer":
            read = read - read.mean(-1, keepdim=True)
        weights, direct, keys = [], [], []
        for layer in range(shape.layers):
            h, _, steps = decoder_layer(h, w, layer, shape)
            w_o = head_weights(w, layer, shape).w_o  # (d, h * d_v)
            assert w_o is not None  # a decoder layer has every projection
            alpha, z = steps.alpha, steps.head_outputs  # (h, n, n), (h, n, d_v)
            heads, d_v = z.shape[0], z.shape[-1]
            through = torch.einsum("nd,dhv->hnv", read.to(z.dtype), w_o.view(-1, heads, d_v))  # (h, n - 1, d_v)
            direct.append((z[:, :-1] * through).sum(-1))  # (h, n - 1)
            v = steps.v.repeat_interleave(heads // steps.v.shape[0], 0)  # (h, n, d_v): GQA's shared heads
            shares = alpha[:, :-1] * (through @ v.transpose(-2, -1))  # (h, n - 1, n): key j's part of the term
            keys.append(shares.argmax(-1))
            weights.append(alpha)
        if shape.norm == "layer":
            s = torch.rsqrt(h.var(-1, unbiased=False) + shape.eps)  # (n,): the final norm's frozen scale
        else:
            s = torch.rsqrt(h.float().pow(2).mean(-1) + shape.eps).to(h.dtype)
        dla = torch.stack(direct) * s[:-1]  # (L, h, n - 1)
    return torch.stack(weights), dla, torch.stack(keys)

"""Direct logit attribution (the last position's, and every position's for the corpus census) and the logit
lens, on a traced forward (``trace``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...base.errors import ConfigError
from ..interventions import target_id
from ...model.plan import Request, as_plan
from ...model.decoder.forward import forward
from ...model.decoder.parts import gain, head_weights, logits, norm
from ...readers.stored import rows
from .trace import FINAL, Trace, decoder_parts, trace, frozen_norm


def unembedding(w: dict, ids: list[int], device) -> torch.Tensor:
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
    src, w, shape, device, _ = decoder_parts(planned)
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
        u = unembedding(w, [tok] if other is None else [tok, other], device)
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
    """Each layer's residual stream through the final norm (its own scale), the unembedding and the model's own
    output transform (Gemma 2's soft-cap c tanh(./c), as its forward applies it): top k tokens. The last row is
    the model's own next-token distribution."""
    planned = as_plan(request)
    src, w, shape, _, _ = decoder_parts(planned)
    t = traced or trace(planned)
    normed = norm(torch.cat(t.residual), w, FINAL, shape)  # ((L + 1) n, d)
    values, indices = [], []
    with torch.no_grad():
        for start in range(0, normed.size(0), LENS_ROWS):
            p = torch.softmax(logits(normed[start:start + LENS_ROWS], w, shape.final_softcap).double(), -1)  # (rows, V)
            top = p.topk(min(k, p.size(-1)), -1)
            values.append(top.values.cpu())
            indices.append(top.indices.cpu())
    n = len(t.ids)
    probs, ids = torch.cat(values).view(len(t.residual), n, -1), torch.cat(indices).view(len(t.residual), n, -1)
    texts = [[[src.token_text(i) for i in row] for row in layer] for layer in ids.tolist()]
    return LogitLens(texts, probs)


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
    with torch.no_grad():
        kept = forward(w, ids, shape, keep=True).activations  # the one forward, every point kept
        assert kept is not None  # a kept run
        unembed = "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight"
        read = rows(w, unembed, ids[1:]) * gain(w, FINAL, shape)  # (n - 1, d): gamma * u_t at each position
        if shape.norm == "layer":
            read = read - read.mean(-1, keepdim=True)
        weights, direct, keys = [], [], []
        for layer, pieces in enumerate(kept.pieces):
            steps = pieces.steps
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
        h = kept.pieces[-1].resid_post  # (n, d): what the final norm reads
        if shape.norm == "layer":
            s = torch.rsqrt(h.var(-1, unbiased=False) + shape.eps)  # (n,): the final norm's frozen scale
        else:
            s = torch.rsqrt(h.float().pow(2).mean(-1) + shape.eps).to(h.dtype)
        dla = torch.stack(direct) * s[:-1]  # (L, h, n - 1)
    return torch.stack(weights), dla, torch.stack(keys)

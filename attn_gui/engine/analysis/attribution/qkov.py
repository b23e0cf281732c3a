"""A head's QK and OV circuits over the sentence's tokens, and every head's copying score."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...base.errors import ConfigError
from ..interventions import _ids
from ...model.plan import Request, as_plan
from ...specs.wiring import BLOCKS
from ...model.decoder.parts import gain, head_weights
from ...readers.stored import rows
from .trace import FINAL, decoder_parts
from .logit import unembedding


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
    src, w, shape, device, _ = decoder_parts(planned)
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
        ov = written @ unembedding(w, distinct, device).T  # (u, u)
    return Circuits([src.token_text(i) for i in distinct], qk.double().cpu(), ov.double().cpu(), layer, head)


def copying_scores(request: Request) -> torch.Tensor:
    """Every head's copying score, (L, h): Elhage et al.'s summary of the eigenvalues lambda of its full OV circuit
    W_U diag(gamma_final) W_O,i W_V,i diag(gamma_layer) W_E^T (V x V), sum(lambda) / sum(|lambda|).

    1 when every eigenvalue is positive (the head raises the logit of the token it attends to: copying), -1 when
    every one is negative. The V x V matrix has the non-zero eigenvalues of the d_v x d_v product
    W_V,i diag(gamma_layer) (W_E^T W_U) diag(gamma_final) W_O,i, which is what is computed.
    """
    _, w, shape, _, _ = decoder_parts(as_plan(request))
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

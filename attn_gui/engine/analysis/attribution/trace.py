"""Why this head: a traced forward whose residual stream splits into its components.

Every function of ``analysis.attribution`` reads a decoder of the one decoder forward (``model.decoder.forward``): the
bundled SmolLM2, Hugging Face folders of every decoder family, GGUF files and the checkpoints of
``attn-gui train``. The residual stream is a sum of components, each written by one part of
the model (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"):

    x = embed [+ positions] + sum over layers l of (sum_i head_{l,i} + b_O,l + mlp_l)

head_{l,i} = Z_i W_O,i is what head i of layer l writes: its output Z_i (n, d_v), the rows of
o_proj's input that are its own, times its d_v columns of W_O (the value bias b_V rides in Z_i,
as transformers computes it). A norm is linear once its scale is frozen at the value it has on
the actual residual (TransformerLens' ``apply_ln=True``): RMSNorm(x) = sum_c c * s * gamma with
s = 1 / sqrt(mean(x^2) + eps); LayerNorm centres each component and adds its bias beta once.
So the logit of a token, and one attention score, split exactly into the components' terms.

- ``trace`` (here): the forward with every component kept, checked against the model's own.
- ``logit.direct_logit_attribution``: each component's direct term in the logit of ``token`` at the
  last position (or in logit(token) - logit(against)); the terms sum to the logit. ``logit.logit_lens``: the
  residual entering each layer (and the last) through the final norm and the unembedding: the top k tokens and
  their p at every position (nostalgebraist 2020).
- ``score.score_attribution``: one scaled score omega'[query, key] of the shown layer's head as a
  matrix of query-side component x key-side component terms (q and k are linear in the
  residual with the norm's scale frozen; RoPE rotates each term; Qwen3's per-head q/k norms
  are frozen likewise); the matrix sums to the score.
- ``qkov.circuits``: a head's QK circuit and OV circuit over the sentence's tokens, and
  ``qkov.copying_scores``, Elhage et al.'s summary of the eigenvalues of W_U W_OV W_E per head.
- ``heads.detect_heads``: previous-token, duplicate-token, induction and sink scores per head.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...model.hooks import ablation_hooks
from ...base.errors import ConfigError
from ..interventions import _ids
from ...model.plan import Plan, Request, as_plan
from ...specs.wiring import BLOCKS
from ...model.decoder.parts import gain, head_weights, logits, norm


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


def decoder_parts(p: Plan):
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
    src, w, shape, device, dtype = decoder_parts(planned)
    ids = _ids(src, config)
    token_ids = torch.tensor(ids, device=device)
    hooks = ablation_hooks(tuple(config.ablate))  # {} without ablated heads
    block = BLOCKS[shape.block]
    with torch.no_grad():
        run = src.forward(token_ids, device, dtype, hooks=hooks, keep=True)  # the one forward, every point kept
        kept = run.activations
        assert kept is not None  # a kept run
        names, parts = ["embed"], [kept["hook_embed"]]  # (n, d); Gemma's times √d, as the forward embeds
        if kept.pos_embed is not None:  # GPT-2's learned positions
            names.append("positions")
            parts.append(kept.pos_embed)
        residual, entering, weights, scaled = [kept["blocks.0.hook_resid_pre"]], [len(names)], [], []
        total = sum(parts)  # the running sum of the components
        for layer, pieces in enumerate(kept.pieces):
            steps = pieces.steps
            w_o = head_weights(w, layer, shape).w_o
            assert w_o is not None  # a decoder layer has every projection
            writes = head_writes(steps.head_outputs, w_o)  # (h, n, d): what each head adds to attention's output
            b_o = f"model.layers.{layer}.self_attn.o_proj.bias"
            bias = w[b_o].expand_as(total)[None] if b_o in w else None
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
            residual.append(pieces.resid_post)
            entering.append(len(names))
            weights.append(steps.alpha)
            assert steps.scaled is not None  # never streamed here
            scaled.append(steps.scaled)
        model = run.logits  # (V,)
        _check_sum(logits(norm(total[-1:], w, FINAL, shape), w, shape.final_softcap)[0], model, "the model's logits")
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

"""The parts of a decoder layer and its ends: the norms, each head's weights, the feed-forward, the
embedding (the only one) and the output head."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...kernel.project import rms_norm
from ...kernel.types import Projections
from ...readers import stored
from ...readers.stored import rows
from ...specs.decoder import LlamaShape


def norm(x: torch.Tensor, w: dict, prefix: str, shape: LlamaShape) -> torch.Tensor:
    """The model's norm of ``x`` with the weights at ``prefix``: RMSNorm, or LayerNorm with its bias (GPT-2)."""
    if shape.norm == "layer":
        return F.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w[prefix + ".bias"], shape.eps)
    if shape.norm == "gemma":  # Gemma's RMSNorm: in float32, the gain 1 + g (stored as g, zero-centred)
        return rms_norm(x.float(), 1.0 + w[prefix + ".weight"].float(), shape.eps).type_as(x)
    return rms_norm(x, w[prefix + ".weight"], shape.eps)


def gain(w: dict, prefix: str, shape: LlamaShape) -> torch.Tensor:
    """The gain the norm at ``prefix`` multiplies by, as the family applies it: γ, or Gemma's 1 + γ (stored
    zero-centred; in float32, as ``norm`` computes it)."""
    g = w[prefix + ".weight"]
    return 1.0 + g.float() if shape.norm == "gemma" else g


def head_weights(w: dict, layer: int, shape: LlamaShape, multiply: bool = False) -> Projections:
    """Layer ``layer``'s projections per head, in column layout (q_i = W x_i + b).

    nn.Linear stores W_q as (h * d_k, d); head i owns rows i*d_k:(i+1)*d_k (K and V: g heads).
    Q, K and V have biases where the weights hold them (Qwen2, GPT-2), else none (Llama); W_O too (GPT-2);
    q and k are RMS-normed per head where the weights hold q_norm and k_norm (Qwen3).
    ``multiply`` (the forward's own): where ``w`` multiplies its stored matrices in bfloat16
    (``stored.matrix``), W_Q … W_O come as those matrices (``Projections.matmuls``), the W fields as shapes.
    """
    p = f"model.layers.{layer}.self_attn"
    names = [f"{p}.{n}_proj.weight" for n in "qkvo"]
    matmuls = [stored.matrix(w, name) for name in names] if multiply else []
    if matmuls and all(m is not None for m in matmuls):
        w_q, w_k, w_v, w_o = (torch.empty(m.shape, device="meta") for m in matmuls)  # type: ignore[union-attr]
    else:
        matmuls = []
        w_q, w_k, w_v, w_o = (w[name] for name in names)  # read once: an upcasting ``w`` converts on every read
    d = w_q.shape[1]
    extras: dict = {"matmuls": tuple(matmuls)} if matmuls else {}
    if f"{p}.q_norm.weight" in w:
        q_norm, k_norm = w[f"{p}.q_norm.weight"], w[f"{p}.k_norm.weight"]  # (d_k,)
        if shape.norm == "gemma":  # Gemma 3: the gain 1 + g
            q_norm, k_norm = 1.0 + q_norm, 1.0 + k_norm
        extras |= dict(q_norm=q_norm, k_norm=k_norm, norm_eps=shape.eps)
    if f"{p}.q_proj.bias" in w:
        extras |= dict(b_q=w[f"{p}.q_proj.bias"].view(shape.heads, 1, -1),  # (h, 1, d_k)
                       b_k=w[f"{p}.k_proj.bias"].view(shape.kv_heads, 1, -1),  # (g, 1, d_k)
                       b_v=w[f"{p}.v_proj.bias"].view(shape.kv_heads, 1, -1))  # (g, 1, d_v)
    return Projections(
        w_q=w_q.view(shape.heads, -1, d),  # (h, d_k, d)
        w_k=w_k.view(shape.kv_heads, -1, d),  # (g, d_k, d)
        w_v=w_v.view(shape.kv_heads, -1, d),  # (g, d_v, d)
        w_o=w_o,  # (d, h * d_v)
        b_o=w[f"{p}.o_proj.bias"].view(1, -1) if f"{p}.o_proj.bias" in w else None,  # (1, d)
        **extras,
    )


ACTS = {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "relu": F.relu, "silu": F.silu}


def act(x: torch.Tensor, name: str) -> torch.Tensor:
    """The feed-forward's activation by name: gelu (erf, BERT's), gelu_tanh (GPT-2's "gelu_new"), relu, silu."""
    return ACTS[name](x)


def _linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    """nn.Linear at ``prefix``, with its bias where the weights hold one (Llama's mlp_bias, GPT-2)."""
    bias = prefix + ".bias"
    return stored.linear(x, w, prefix + ".weight", w.get(bias))  # in bfloat16 where w multiplies so


def feed_forward(x: torch.Tensor, w: dict, layer: int, shape: LlamaShape) -> torch.Tensor:
    """Gated: W_down (act(W_gate x) * W_up x) (SwiGLU with silu); plain: W_down act(W_up x + b_up) + b_down (GPT-2);
    each with its biases where the weights hold them.  (n, d) -> (n, d)"""
    p = f"model.layers.{layer}.mlp"
    if shape.mlp == "plain":
        return _linear(act(_linear(x, w, f"{p}.up_proj"), shape.act), w, f"{p}.down_proj")
    return _linear(act(_linear(x, w, f"{p}.gate_proj"), shape.act) * _linear(x, w, f"{p}.up_proj"), w,
                   f"{p}.down_proj")


def embed_parts(w: dict, ids: torch.Tensor, shape: LlamaShape,
                start: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The two writers a layer-0 residual starts as: the token embedding of ``ids`` (..., n), times √d for Gemma
    (TransformerLens' hook_embed), and GPT-2's learned positions counted from ``start`` (hook_pos_embed; None for
    the families without).  -> (..., n, d), (n, d) or None"""
    h = rows(w, "model.embed_tokens.weight", ids.reshape(-1)).unflatten(0, ids.shape)  # a GGUF reads rows of ids
    if shape.embed_scale:  # Gemma: the embedding times √d
        h = h * h.new_tensor(h.shape[-1] ** 0.5)
    if "model.embed_positions.weight" not in w:
        return h, None
    n = ids.shape[-1]  # learned absolute positions (GPT-2)
    return h, rows(w, "model.embed_positions.weight", torch.arange(start, start + n, device=ids.device))


def embed(w: dict, ids: torch.Tensor, shape: LlamaShape, start: int = 0) -> torch.Tensor:
    """What a layer-0 residual starts as: ``embed_parts``' sum.  -> (..., n, d)"""
    h, positions = embed_parts(w, ids, shape, start)
    return h if positions is None else h + positions


def logits(last: torch.Tensor, w: dict, softcap: float | None = None) -> torch.Tensor:
    """The next-token logits of final-normed rows ``last`` (..., d): ``lm_head.weight``, else the tied embedding;
    soft-capped, c tanh(logits / c), with ``softcap`` (Gemma 2's final_logit_softcapping)."""
    out = stored.logits(last, w, "lm_head.weight" if "lm_head.weight" in w else "model.embed_tokens.weight")
    return out if softcap is None else torch.tanh(out / softcap) * softcap

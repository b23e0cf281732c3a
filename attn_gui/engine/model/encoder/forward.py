"""The one encoder's forward pass, written out, for any BERT, RoBERTa, DistilBERT, DeBERTa-v2/v3 or
ModernBERT folder.

Embeddings (word + position + token type 0 where the model has them, then LayerNorm), then per
layer: self-attention through the engine's one ``attention.attend``, residual + LayerNorm, the
feed-forward (GELU), residual + LayerNorm (post-LN). The families differ by declared facts only
(``families.FAMILIES``, ``encoder_config``); every family's weights are renamed here to BERT's:
RoBERTa counts positions from its padding id + 1; DistilBERT names its weights its own way
(``RENAMES``) and has no token types; DeBERTa-v2/v3 adds the disentangled position terms c2p
and p2c to the scores (``attention.Relative``, from its relative embeddings) and may have no
absolute positions; ModernBERT (``Family.block`` "pre_ln") has no positions but RoPE, local and global
layers (each its window and RoPE base), one fused W_qkv (split here), LayerNorms before attention
and the GeGLU feed-forward (``Family.mlp``), biases only where its config says, and a final norm.
MiniLM-L6 (``minilm.py``) is a BERT folder inside its package. The tests compare every layer with
transformers' ``BertModel``, ``RobertaModel``, ``DistilBertModel``, ``DebertaV2Model`` and
``ModernBertModel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ...base import progress
from ...kernel.types import AttendOptions, Projections, Relative
from ...kernel.attend import attend
from ...kernel.scores import relative_index
from ...readers import stored
from ...specs.encoder_config import RelativeShape, relative_shape
from ...specs.families import Family
from ...readers.hf.spec import activation, position_offset, size
from ..decoder.parts import act
from ...specs.spec import ModelSpec


@dataclass(frozen=True)
class EncoderShape:
    """The constants of a BERT-family encoder."""

    layers: int
    heads: int
    eps: float  # LayerNorm's epsilon
    act: str  # the feed-forward's activation (llama.act): gelu, gelu_tanh, relu
    position_offset: int  # the first token's position id (RoBERTa: padding id + 1)
    positions: bool = True  # learned absolute positions added to the embeddings (DeBERTa: position_biased_input)
    block: str = "post_ln"  # "post_ln": LayerNorm after each residual (BERT); "pre_ln": before attention and the
    #                         MLP, and a final norm (ModernBERT)
    mlp: str = "gelu"  # "gelu": W_2 act(W_1 x); "geglu": W_o (act(a) * g) with a, g = W_i x split in two
    relative: RelativeShape | None = None  # DeBERTa's relative positions


def encoder_shape(spec: ModelSpec, cfg: dict, family: Family, folder: Path) -> EncoderShape:
    """The constants of an encoder of ``family`` from its config.json (``encoder_config`` reads the new ones)."""
    return EncoderShape(spec.layers, spec.heads, float(size(cfg, family, "eps", 1e-12)),
                        activation(cfg, family, folder), position_offset(cfg),
                        positions=bool(cfg.get("position_biased_input", True)),
                        block=family.block, mlp="geglu" if family.mlp == "geglu" else "gelu",
                        relative=relative_shape(cfg, folder) if family.relative else None)


def _layer_norm(x: torch.Tensor, w: dict, prefix: str, eps: float) -> torch.Tensor:
    """LayerNorm with the gain and (where the model has one) the bias stored under ``prefix``."""
    return F.layer_norm(x, x.shape[-1:], w[prefix + ".weight"], w.get(prefix + ".bias"), eps)


def _linear(x: torch.Tensor, w: dict, prefix: str) -> torch.Tensor:
    return F.linear(x, w[prefix + ".weight"], w.get(prefix + ".bias"))


def head_weights(w: dict, layer: int, heads: int) -> Projections:
    """Layer ``layer``'s projections per head, in column layout (q_i = W x_i + b); biases where the model has them.

    nn.Linear stores W as (out, in) = (h * d_k, d); head i owns rows i*d_k:(i+1)*d_k.
    """
    p = f"encoder.layer.{layer}.attention"
    out = {}
    for name, key in (("q", "self.query"), ("k", "self.key"), ("v", "self.value")):
        weight, bias = w[f"{p}.{key}.weight"], w.get(f"{p}.{key}.bias")
        d = weight.shape[1]
        out["w_" + name] = weight.view(heads, -1, d)  # (h * d_k, d) -> (h, d_k, d)
        out["b_" + name] = None if bias is None else bias.view(heads, 1, -1)  # (h * d_k,) -> (h, 1, d_k)
    out["w_o"] = w[f"{p}.output.dense.weight"]  # (d, h * d_v): column layout
    bias = w.get(f"{p}.output.dense.bias")
    out["b_o"] = None if bias is None else bias.view(1, -1)  # (1, d)
    return Projections(**out)


def relative_positions(w: dict, layer: int, shape: EncoderShape, T: int) -> Relative | None:
    """DeBERTa's position terms of layer ``layer`` for ``T`` tokens (``attention.Relative``); None for others.

    The relative embeddings P (2s, d), LayerNormed where ``norm_rel_ebd`` says, projected per head by
    the layer's position projections (``pos_key_proj``, ``pos_query_proj``) or, with ``share_att_key``,
    by its content W_k and W_q (biases included).
    """
    rel = shape.relative
    if rel is None:
        return None
    if not rel.on:  # relative_attention off: content scores only, still over sqrt(d_k * scale_factor)
        return Relative(None, None, None)
    emb = w["encoder.rel_embeddings.weight"][: 2 * rel.span]  # (2s, d)
    if rel.norm:
        emb = _layer_norm(emb, w, "encoder.LayerNorm", shape.eps)
    p = f"encoder.layer.{layer}.attention.self"
    per_head = lambda t: t.view(t.size(0), shape.heads, -1).transpose(0, 1)  # noqa: E731  (2s, h d_k) -> (h, 2s, d_k)
    pos_k = per_head(_linear(emb, w, f"{p}.{'key' if rel.shared else 'pos_key_proj'}")) if "c2p" in rel.terms \
        else None
    pos_q = per_head(_linear(emb, w, f"{p}.{'query' if rel.shared else 'pos_query_proj'}")) if "p2c" in rel.terms \
        else None
    index = relative_index(T, T, rel.span, rel.buckets, rel.max_position, device=emb.device)  # (T, T)
    return Relative(index, pos_k, pos_q)


def layer_options(options: AttendOptions, w: dict, layer: int, shape: EncoderShape, T: int) -> AttendOptions:
    """Layer ``layer``'s attention options (the plan's, ``specs.decoder.model_layers``: column layout, its RoPE
    base and window) with DeBERTa's position terms for ``T`` tokens, which only the loaded weights give."""
    if shape.relative is not None:
        options = options.replace(relative=relative_positions(w, layer, shape, T))
    return options


def embed(w: dict, ids: torch.Tensor, shape: EncoderShape) -> torch.Tensor:
    """Word + position (where the model adds them) + token type 0 (where it has token types) embeddings,
    then LayerNorm: (T, d).

    RoBERTa (``position_offset`` > 0) numbers positions as transformers' ``create_position_ids_from_input_ids``:
    its padding id's token gets the padding position and is not counted, every other token padding id + 1 +
    the count of tokens before it that are not padding."""
    T = ids.shape[0]
    x = stored.rows(w, "embeddings.word_embeddings.weight", ids)
    if shape.positions and "embeddings.position_embeddings.weight" in w:
        positions = torch.arange(shape.position_offset, shape.position_offset + T)
        if shape.position_offset:
            pad = shape.position_offset - 1  # RoBERTa's padding id
            real = (ids.cpu() != pad).long()
            positions = torch.cumsum(real, 0) * real + pad
        x = x + stored.rows(w, "embeddings.position_embeddings.weight", positions)
    if "embeddings.token_type_embeddings.weight" in w:
        x = x + w["embeddings.token_type_embeddings.weight"][0]
    return _layer_norm(x, w, "embeddings.LayerNorm", shape.eps)


def feed_forward(x: torch.Tensor, w: dict, layer: int, shape: EncoderShape) -> torch.Tensor:
    """BERT's W_2 act(W_1 x + b_1) + b_2, or ModernBERT's GeGLU W_o (act(a) * g), a, g = W_i x split in two."""
    p = f"encoder.layer.{layer}"
    hidden = _linear(x, w, f"{p}.intermediate.dense")  # (T, n), GeGLU (T, 2n)
    if shape.mlp == "geglu":
        a, gate = hidden.chunk(2, dim=-1)  # (T, n) each
        hidden = act(a, shape.act) * gate
    else:
        hidden = act(hidden, shape.act)
    return _linear(hidden, w, f"{p}.output.dense")


def encoder_layer(x: torch.Tensor, w: dict, layer: int, shape: EncoderShape, options: AttendOptions):
    """A full layer, its attention with ``options`` (``layer_options``); returns (next hidden state, the layer's
    attention steps, what its attention read).

    Post-LN (BERT, DeBERTa): LayerNorm(x + attention(x)), then LayerNorm(h + MLP(h)). Pre-LN
    (ModernBERT): x + attention(LayerNorm(x)) (layer 0 has no norm: its embeddings are normed), then
    h + MLP(LayerNorm(h)).
    """
    p = f"encoder.layer.{layer}"
    if shape.block == "pre_ln":
        normed = _layer_norm(x, w, f"{p}.attention.norm", shape.eps) if f"{p}.attention.norm.weight" in w else x
        steps = attend(normed, head_weights(w, layer, shape.heads), options)
        h1 = x + steps.output
        return h1 + feed_forward(_layer_norm(h1, w, f"{p}.intermediate.norm", shape.eps), w, layer, shape), \
            steps, normed
    steps = attend(x, head_weights(w, layer, shape.heads), options)
    h1 = _layer_norm(steps.output + x, w, f"{p}.attention.output.LayerNorm", shape.eps)
    h2 = _layer_norm(feed_forward(h1, w, layer, shape) + h1, w, f"{p}.output.LayerNorm", shape.eps)
    return h2, steps, x


def run(w: dict, ids: torch.Tensor, shape: EncoderShape, layers: tuple[AttendOptions, ...]):
    """Every layer's attention input and the output (L + 1 of them), and every layer's attention weights; each
    layer's attention with ``layers``' options (the plan's, ``engine.model.plan.Plan.layers``).

    Returns
    -------
    hidden : list of (T, d) tensors, hidden[l] is what layer l's attention reads (its input, LayerNormed
        first in a pre-LN model); the last is the model's output (after its final norm, where it has one)
    weights : (L, h, T, T) attention weights of every layer and head
    """
    x = embed(w, ids, shape)
    hidden, all_weights = [], []
    progress.at(0, shape.layers)
    for layer in range(shape.layers):
        x, steps, read = encoder_layer(x, w, layer, shape, layer_options(layers[layer], w, layer, shape, ids.shape[0]))
        hidden.append(read)
        all_weights.append(steps.alpha)
        progress.at(layer + 1, shape.layers)
    hidden.append(_layer_norm(x, w, "encoder.final_norm", shape.eps) if shape.block == "pre_ln" else x)
    return hidden, torch.stack(all_weights)


__all__ = ["EncoderShape", "embed", "encoder_layer", "encoder_shape", "feed_forward", "head_weights",
           "layer_options", "relative_positions", "run"]

"""What a loaded decoder is, below the model room so that the readers can build it: its shape
(``LlamaShape``, built by ``decoder_shape``), each layer's attention options as the model runs them
(``model_layers``, from the spec alone) and the loaded model (``DecoderModel``)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..kernel.types import AttendOptions
from .spec import ModelSpec

if TYPE_CHECKING:
    from tokenizers import Tokenizer


@functools.lru_cache(maxsize=64)
def model_layers(spec: ModelSpec) -> tuple[AttendOptions, ...]:
    """Each layer's attention options as the model of ``spec`` runs it (column layout: q = W x).

    The scores are divided by √d_k (DeBERTa: √(d_k · its scale factor); Gemma 2 and 3: √query_pre_attn_scalar;
    not at all where GPT-2's scale_attn_weights is off), then by the layer's number where GPT-2 scales by the
    inverse layer index; RoPE with this layer's base, scaling and rotated dimensions; the soft-cap; this layer's
    window; causal for a decoder. DeBERTa's position terms (``Relative``) hold tensors: its source adds them to
    these options for each layer (``ModelSource.layer_options``).
    """
    layers = []
    for layer in range(spec.layers):
        rope_base = spec.rope_at(layer)
        layers.append(AttendOptions(
            layout="column", scale=spec.scale, scale_factor=spec.scale_factor, scale_dim=spec.score_scalar,
            layer_scale=layer + 1.0 if spec.layer_scale else 1.0, causal=spec.causal, rope_base=rope_base,
            rope_scaling=spec.rope_scaling_at(layer) if rope_base is not None else (),
            rope_dims=spec.rope_dims if rope_base is not None else None, softcap=spec.softcap,
            window=spec.window_at(layer)))
    return tuple(layers)


@dataclass(frozen=True)
class LlamaShape:
    """The sizes and constants of a decoder, and each layer's attention as the model runs it.

    Built once per model by ``decoder_shape`` from its spec and family (folders, GGUF files, registered
    objects alike). A compute whose plan changes the attention (a what-if, ``engine.model.plan``) runs the same
    forward with ``attention`` replaced (``with_attention``).
    """

    layers: int
    heads: int
    kv_heads: int
    d_k: int
    eps: float  # the norm's epsilon
    norm: str = "rms"  # "rms": RMSNorm (Llama); "layer": LayerNorm with a bias (GPT-2); "gemma": x̂ (1 + g), float32
    mlp: str = "gated"  # "gated": W_down (act(W_gate x) * W_up x) (SwiGLU); "plain": W_down act(W_up x + b) + b
    act: str = "silu"  # the feed-forward's activation (``act``): silu, gelu, gelu_tanh, relu
    block: str = "pre"  # the residual wiring: a row of ``BLOCKS``
    attention: tuple[AttendOptions, ...] = ()  # each layer's options (``specs.decoder.model_layers``); ():
    #                                            plain causal attention in every layer
    final_softcap: float | None = None  # the logits soft-capped, c tanh(logits / c) (final_logit_softcapping)
    embed_scale: bool = False  # the embedding multiplied by √d (Gemma)

    def options(self, layer: int) -> AttendOptions:
        """Layer ``layer``'s attention options (column layout, causal)."""
        return self.attention[layer] if self.attention else CAUSAL

    def with_attention(self, attention: tuple[AttendOptions, ...]) -> LlamaShape:
        """This shape with each layer's attention options replaced (a plan's what-if)."""
        return self if attention == self.attention else dataclasses.replace(self, attention=attention)


CAUSAL = AttendOptions(layout="column", causal=True)


def decoder_shape(spec, family, eps: float, act: str, final_softcap: float | None = None) -> LlamaShape:
    """The one constructor of a decoder's shape: its spec (sizes, each layer's attention, its residual wiring) and
    its family's declared differences (norm, MLP, embedding scale); the norm's ``eps``, the activation (``act``'s
    name) and the logits' soft-cap as the file says."""
    return LlamaShape(spec.layers, spec.heads, spec.kv_head_count, spec.d_k, eps, norm=family.norm, mlp=family.mlp,
                      act=act, block=spec.block, attention=model_layers(spec), final_softcap=final_softcap,
                      embed_scale=family.embed_scale)


@dataclass(frozen=True)
class DecoderModel:
    """A loaded decoder: its weights (CPU, transformers' names), tokenizer and constants."""

    spec: ModelSpec
    shape: LlamaShape
    weights: Mapping[str, torch.Tensor]  # a dict, or a GGUF's tensors read from its mapped file (quantized.py)
    tokenizer: Tokenizer
    vocab: tuple[str, ...]  # readable text of each id
    special_ids: frozenset[int]
    eos_id: int
    add_bos: int | None  # the id to put first, or None (the tokenizer adds none)
    add_eos: int | None = None  # the id to put last (add_eos_token: an end token after every text), or None
    predicts: bool = True  # False: no language-model head (a folder saved from AutoModel): no next tokens

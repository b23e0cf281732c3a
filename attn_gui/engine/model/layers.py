"""Each layer's attention options as a model runs it, from its spec alone (``engine.plan`` reads them)."""

from __future__ import annotations

import functools

from ..kernel.types import AttendOptions
from ..specs.spec import ModelSpec


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

"""Knocking heads out: hooks at the decoder forward's ``blocks.{l}.attn.hook_z`` that zero a head's Z, or fill it
with its mean.

Apart from ``interventions`` (which runs grids of them) so that ``compute`` and ``decoding`` apply
the config's ``ablate`` without importing what imports them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..base.errors import ConfigError
from .wiring import Hook, hook_name

MODES = ("zero", "mean")
Head = tuple[int, int]  # (layer, head), 0-based


def knock_out(heads: list[int], mode: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """A z_hook setting the given heads of Z (h, n, d_v) to zero or to their mean over positions."""
    if mode not in MODES:
        raise ConfigError(f"ablation mode must be one of {', '.join(MODES)}; got {mode!r}")

    def hook(z):
        z = z.clone()
        z[heads] = 0.0 if mode == "zero" else z[heads].mean(-2, keepdim=True).expand_as(z[heads])
        return z
    return hook


def by_layer(heads: tuple[Head, ...]) -> dict[int, list[int]]:
    layers: dict[int, list[int]] = {}
    for layer, head in heads:
        layers.setdefault(layer, []).append(head)
    return layers


def z_hooks(per_layer: dict[int, Hook]) -> dict[str, Hook]:
    """The forward's ``hooks`` of functions of Z (h, n, d_v) by layer (0-based): each at its ``attn.hook_z``."""
    return {hook_name(layer, "attn.z"): hook for layer, hook in per_layer.items()}


def ablation_hooks(heads: tuple[Head, ...], mode: str = "zero") -> dict[str, Hook]:
    """The decoder forward's ``hooks`` that knock the (layer, head) pairs out (at each layer's ``attn.hook_z``)."""
    return z_hooks({layer: knock_out(hs, mode) for layer, hs in by_layer(heads).items()})

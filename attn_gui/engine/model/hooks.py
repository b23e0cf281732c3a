"""Knocking heads out: the ``z_hooks`` of the decoder forward that zero a head's Z, or fill it with its mean.

Apart from ``interventions`` (which runs grids of them) so that ``compute`` and ``decoding`` apply
the config's ``ablate`` without importing what imports them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..base.errors import ConfigError

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


def ablation_hooks(heads: tuple[Head, ...], mode: str = "zero") -> dict[int, Callable[[torch.Tensor], torch.Tensor]]:
    """The ``z_hooks`` (layer -> hook) of the decoder forward that knock the (layer, head) pairs out."""
    return {layer: knock_out(hs, mode) for layer, hs in by_layer(heads).items()}

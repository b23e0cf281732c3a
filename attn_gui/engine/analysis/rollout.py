"""Attention rollout (Abnar & Zuidema, 2020): how much each layer's tokens draw on each input token."""

from __future__ import annotations

import torch

FUSIONS: tuple[str, ...] = ("mean", "max", "min")


def rollout(layer_weights: torch.Tensor, fusion: str = "mean", residual: bool = True) -> torch.Tensor:
    """Attention rollout of every layer.

    Each layer's heads are fused (mean, max or min over heads) into one matrix A_l; with
    ``residual`` the residual path is added as 0.5 A_l + 0.5 I; rows are renormalised to
    sum to 1. Then R_1 = A_1 and R_l = A_l R_(l-1), so R_L = A_L ... A_1.

    Parameters
    ----------
    layer_weights : (L, h, T, T) tensor
        alpha of every layer and head, first layer first.
    fusion : "mean", "max" or "min"
    residual : bool

    Returns
    -------
    (L, T, T) tensor
        R_1 ... R_L on the weights' device: row i of R_l says how much token i's
        representation after layer l draws on each input token (rows sum to 1).
    """
    if layer_weights.dim() != 4 or layer_weights.size(-1) != layer_weights.size(-2):
        raise ValueError(f"layer_weights must be (L, h, T, T); got {tuple(layer_weights.shape)}")
    if fusion == "mean":
        fused = layer_weights.mean(dim=1)  # (L, T, T)
    elif fusion == "max":
        fused = layer_weights.amax(dim=1)
    elif fusion == "min":
        fused = layer_weights.amin(dim=1)
    else:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}; got {fusion!r}")
    L, T, _ = fused.shape  # layers, tokens
    if residual:
        eye = torch.eye(T, dtype=fused.dtype, device=fused.device)
        fused = 0.5 * fused + 0.5 * eye
    # a row of zeros (min over heads that never agree) stays zero rather than dividing by 0
    fused = fused / fused.sum(-1, keepdim=True).clamp_min(torch.finfo(fused.dtype).tiny)
    out = torch.empty_like(fused)
    out[0] = fused[0]
    for layer in range(1, L):
        out[layer] = fused[layer] @ out[layer - 1]  # (T, T) @ (T, T)
    return out

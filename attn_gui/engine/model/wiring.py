"""One decoder layer's named pieces (``LayerPieces``), as TransformerLens's hook points name them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..kernel.types import Steps


@dataclass(frozen=True)
class LayerPieces:
    """One decoder layer's named pieces, as TransformerLens's hook points name the residual stream's parts.

    resid_pre (n, d): the residual entering the layer; attn_in: X, what attention reads (its norm's output, or the
    residual); steps: attention's steps (``Steps``); attn_write: what attention adds to the residual
    (its output, normed where the block says: ``Block.attn_post``); resid_mid: the residual after attention;
    mlp_in: what the MLP reads; mlp_out: its output; mlp_write: what it adds; resid_post: the residual leaving.
    """

    resid_pre: torch.Tensor
    attn_in: torch.Tensor
    steps: Steps
    attn_write: torch.Tensor
    resid_mid: torch.Tensor
    mlp_in: torch.Tensor
    mlp_out: torch.Tensor
    mlp_write: torch.Tensor
    resid_post: torch.Tensor

"""One decoder layer's named pieces (``LayerPieces``) and the forward's hook points, named as TransformerLens names
them (``blocks.3.hook_resid_pre``, ``blocks.3.attn.hook_z``), with the cache a run keeps (``HookCache``).

The decoder forward (``model.decoder.forward``) is the one place a layer is wired; an analysis asks it for the
points it reads (``keep=True``: every layer's pieces, read by name through ``Forward.activations``) and changes a
point with a hook (``hooks={"blocks.3.attn.hook_z": fn}``) instead of walking the layers itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch

from ..kernel.types import Steps

Hook = Callable[[torch.Tensor], torch.Tensor]
"""A function of a hook point's tensor returning what the forward goes on with (the same tensor: it only looks)."""

HOOKABLE = ("resid_pre", "attn_in", "attn.z", "attn_out", "resid_mid", "mlp_in", "mlp_out", "resid_post")
"""The points a hook may change, in the order a layer reaches them. q, k, v, the scores and the pattern are read
(``HookCache``), not changed: the attention kernel makes them in one pass."""

READ_ONLY = ("attn.q", "attn.k", "attn.v", "attn.rot_q", "attn.rot_k", "attn.attn_scores", "attn.pattern")
"""The attention points a run keeps for reading: q, k (before RoPE and any q/k norm: TransformerLens' hook_q,
hook_k), v, q and k as RoPE leaves them (hook_rot_q, hook_rot_k), the scaled and masked scores (soft-capped where
the model caps them) and α."""


def hook_name(layer: int, point: str) -> str:
    """TransformerLens' name of ``point`` (one of ``HOOKABLE`` or ``READ_ONLY``) in layer ``layer`` (0-based)."""
    return f"blocks.{layer}.hook_{point}" if "." not in point else f"blocks.{layer}.attn.hook_{point[5:]}"


def check_hooks(hooks: Mapping[str, Hook], layers: int) -> None:
    """Refuse (ValueError, one line) a hook at a name the forward has no changeable point for."""
    known = {hook_name(layer, point) for layer in range(layers) for point in HOOKABLE}
    wrong = sorted(set(hooks) - known)
    if wrong:
        read = {hook_name(layer, point) for layer in range(layers) for point in READ_ONLY}
        why = "is read, not changed (keep the run and read it)" if wrong[0] in read else "is no hook point here"
        raise ValueError(f"{wrong[0]} {why}; a hook may change {', '.join(hook_name(0, p) for p in HOOKABLE)} "
                         f"of layers 0 to {layers - 1}")


def at(hooks: Mapping[str, Hook] | None, layer: int, point: str, x: torch.Tensor) -> torch.Tensor:
    """``x`` through the hook at ``point`` of ``layer``, if there is one."""
    hook = None if not hooks else hooks.get(hook_name(layer, point))
    return x if hook is None else hook(x)


@dataclass(frozen=True)
class LayerPieces:
    """One decoder layer's named pieces, as TransformerLens's hook points name the residual stream's parts.

    resid_pre (n, d): the residual entering the layer; attn_in: X, what attention reads (its norm's output, or the
    residual); steps: attention's steps (``Steps``); attn_write: what attention adds to the residual
    (its output, normed where the block says: ``Block.attn_post``; TransformerLens' hook_attn_out);
    resid_mid: the residual after attention; mlp_in: what the MLP reads; mlp_out: its output; mlp_write: what it
    adds (hook_mlp_out); resid_post: the residual leaving.
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

    def point(self, point: str) -> torch.Tensor:
        """The tensor at ``point`` (one of ``HOOKABLE`` or ``READ_ONLY``); KeyError where this layer has none
        (rot_q without RoPE, the scores of a streamed run)."""
        s = self.steps
        rope = s.rope
        found: torch.Tensor | None
        if point == "attn.q":
            found = rope.q_unrotated if rope is not None else s.q
        elif point == "attn.k":
            found = rope.k_unrotated if rope is not None else s.k
        elif point in ("attn.rot_q", "attn.rot_k"):
            found = None if rope is None else (s.q if point == "attn.rot_q" else s.k)
        else:
            found = {"attn.v": s.v, "attn.z": s.head_outputs, "attn.pattern": s.weights,
                     "attn.attn_scores": s.capped if s.capped is not None else s.scaled,
                     "attn_out": self.attn_write, "mlp_out": self.mlp_write}.get(point)
            if found is None and point in HOOKABLE:
                found = getattr(self, point)
        if found is None:
            raise KeyError(f"this layer keeps no {point}")
        return found


@dataclass(frozen=True)
class HookCache(Mapping[str, torch.Tensor]):
    """A kept run's points by TransformerLens' names: ``hook_embed``, ``hook_pos_embed`` (learned positions only),
    ``blocks.{l}.hook_resid_pre`` … ``blocks.{l}.attn.hook_pattern`` (``hook_name``), ``ln_final.hook_normalized``.

    ``pieces`` holds each layer's ``LayerPieces`` for the readers that want a layer whole (its RoPE, its steps)."""

    embed: torch.Tensor
    pos_embed: torch.Tensor | None
    pieces: tuple[LayerPieces, ...]
    final: torch.Tensor

    def __getitem__(self, name: str) -> torch.Tensor:
        if name == "hook_embed":
            return self.embed
        if name == "hook_pos_embed" and self.pos_embed is not None:
            return self.pos_embed
        if name == "ln_final.hook_normalized":
            return self.final
        parts = name.split(".")
        if len(parts) >= 3 and parts[0] == "blocks" and parts[1].isdigit() and int(parts[1]) < len(self.pieces):
            point = ".".join(parts[2:]).replace("attn.hook_", "attn.").replace("hook_", "")
            if hook_name(int(parts[1]), point) == name:
                return self.pieces[int(parts[1])].point(point)
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield "hook_embed"
        if self.pos_embed is not None:
            yield "hook_pos_embed"
        for layer, pieces in enumerate(self.pieces):
            for point in (*HOOKABLE, *READ_ONLY):
                try:
                    pieces.point(point)
                except KeyError:
                    continue
                yield hook_name(layer, point)
        yield "ln_final.hook_normalized"

    def __len__(self) -> int:
        return sum(1 for _ in self)

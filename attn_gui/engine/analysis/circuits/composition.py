"""One edge of the circuit graph looked at closely: how much the writer head's OV circuit and the reader head's
input line up in the weights (Elhage et al. 2021's composition scores), and both heads' α on a prompt.

Composition (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits", section "Composition"): with
W_OV = W_O,i W_V,i (d x d) of the writer head and W_QK = W_Q,j^T W_K,j (d x d) of the reader head (column vectors,
x_dst^T W_QK x_src its score before the scaling), the reader's query, key or value input composing with the writer is
scored as

    Q: ||W_QK^T W_OV||_F / (||W_QK||_F ||W_OV||_F)
    K: ||W_QK W_OV||_F / (||W_QK||_F ||W_OV||_F)
    V: ||W_OV,j W_OV||_F / (||W_OV,j||_F ||W_OV||_F)

0: the reader's input ignores every direction the writer writes; 1 at most. The norm gain before attention (γ,
Gemma's 1 + γ) is folded into each head's reading projections, as TransformerLens's ``fold_ln`` does; what a norm
does per token (1 / rms, LayerNorm's centring) and the biases are not weights of a direction and are left out.

Grouped-query attention: a key or value reader is shared by the query heads of its group; each of them composes
with the writer on its own, so a score is given per query head the reader feeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...model.decoder.parts import gain, head_weights
from ...model.decoder.forward import forward
from ...model.wiring import hook_name
from .split import Split

KIND_OF = {"q": "Q", "k": "K", "v": "V"}


def _ov(split: Split, layer: int, head: int) -> torch.Tensor:
    """W_O,i W_V,i (d x d) of query head ``head`` of ``layer``, the norm's gain folded into W_V."""
    shape, w = split.shape, split.w
    p = head_weights(w, layer, shape)
    assert p.w_v is not None and p.w_o is not None
    w_v = p.w_v[head // (shape.heads // shape.kv_heads)].double() * _gain(split, layer)  # (d_v, d)
    d_v = w_v.size(0)
    return p.w_o[:, head * d_v:(head + 1) * d_v].double() @ w_v


def _qk(split: Split, layer: int, head: int) -> torch.Tensor:
    """W_Q,i^T W_K,i (d x d) of query head ``head`` of ``layer``, the norm's gain folded into both."""
    shape = split.shape
    p = head_weights(split.w, layer, shape)
    assert p.w_q is not None and p.w_k is not None
    g = _gain(split, layer)
    return (p.w_q[head].double() * g).T @ (p.w_k[head // (shape.heads // shape.kv_heads)].double() * g)


def _gain(split: Split, layer: int) -> torch.Tensor:
    name = split.block.attn_norm
    if name is None:
        return torch.ones(())
    return gain(split.w, f"model.layers.{layer}.{name}", split.shape).double()


def _score(a: torch.Tensor, b: torch.Tensor, product: torch.Tensor) -> float:
    return float(torch.linalg.matrix_norm(product) / (torch.linalg.matrix_norm(a) * torch.linalg.matrix_norm(b)))


def composition(split: Split, writer: int, reader: int) -> tuple[float, ...]:
    """The composition score of edge ``writer`` -> ``reader`` (graph indices), one per query head the reader feeds
    (module docstring); () where the edge is not from a head into a head's query, key or value."""
    g = split.graph
    head = g.writer_head(writer)
    kind, _ = g.reader_kind(reader)
    if head is None or kind not in KIND_OF:
        return ()
    ov = _ov(split, g.writer_layer(writer), head)
    layer = g.reader_layer(reader)
    scores = []
    for j in g.reader_heads(reader):
        if kind == "v":
            other = _ov(split, layer, j)
            scores.append(_score(other, ov, other @ ov))
        else:
            qk = _qk(split, layer, j)
            scores.append(_score(qk, ov, (qk.T if kind == "q" else qk) @ ov))
    return tuple(scores)


def alphas(split: Split, ids: torch.Tensor, heads: list[tuple[int, int]]) -> list[torch.Tensor]:
    """α (n, n) of each (layer, head) (0-based) on prompt ``ids`` (n,), from the one decoder forward."""
    with torch.no_grad():
        kept = forward(split.w, ids, split.shape, keep=True).activations
    assert kept is not None  # a kept run
    return [kept[hook_name(layer, "attn.pattern")][head].cpu() for layer, head in heads]


@dataclass(frozen=True)
class EdgeLook:
    """One edge looked at: its names, its score in the circuit, its composition scores and the heads' α.

    kind : "Q", "K" or "V" (the reader input a head-to-head edge names), else ""
    composition : one score per query head the reader feeds (``heads``); () unless head to head
    writer_alpha, reader_alpha : (n, n) on the prompt ``ids``, None where that end is not a head; the reader's is
        its query head of largest composition (its first, without one)
    """

    writer: str
    reader: str
    score: float
    kind: str
    heads: tuple[int, ...]
    composition: tuple[float, ...]
    writer_head: tuple[int, int] | None
    reader_head: tuple[int, int] | None
    writer_alpha: torch.Tensor | None
    reader_alpha: torch.Tensor | None


def look(split: Split, scores: torch.Tensor, writer: int, reader: int, ids: Sequence[int] | torch.Tensor) -> EdgeLook:
    """Edge ``writer`` -> ``reader`` of a circuit whose edge scores are ``scores`` (W, R), on prompt ``ids`` (n,)."""
    ids = torch.as_tensor(ids, device=split.w["model.embed_tokens.weight"].device)
    g = split.graph
    kind, _ = g.reader_kind(reader)
    heads = tuple(g.reader_heads(reader))
    comp = composition(split, writer, reader)
    head = g.writer_head(writer)
    w_head = None if head is None else (g.writer_layer(writer), head)
    r_head = None
    if heads:
        best = heads[max(range(len(comp)), key=comp.__getitem__)] if comp else heads[0]
        r_head = (g.reader_layer(reader), best)
    wanted = [h for h in (w_head, r_head) if h is not None]
    maps = dict(zip(wanted, alphas(split, ids, wanted), strict=True))
    return EdgeLook(g.writer_names[writer], g.reader_names[reader], float(scores[writer, reader]),
                    KIND_OF.get(kind, "") if w_head is not None else "", heads, comp, w_head, r_head,
                    None if w_head is None else maps[w_head], None if r_head is None else maps[r_head])

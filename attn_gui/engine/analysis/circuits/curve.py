"""The faithfulness curve's patched forwards, several k at once (issue 63).

A point of the curve keeps the top k edges and reads every other edge from the corrupted run: reader r reads
base_r + Σ_u keep[u, r] δ[u], with base_r the corrupted run's residual where r reads, and δ[u] = a[u] - a_corrupt[u]
what writer u adds in this run less what it adds in the corrupted one (the same sum as ``Split.run`` with a
``Patch``: the residual less the dropped edges' δ, whichever reads fewer writers). Here:

- K values of k share one forward: the variants are stacked along the batch axis (variant-major), each with its own
  mask, the readers' inputs mixed by one batched matrix product per layer (``torch.bmm``).
- The corrupted (and clean) runs are the cached ones (``scores.Pairs``), computed once for every k.
- A point begins where it first differs from a run already made: below the lowest layer that reads a kept edge the
  run is the corrupted one (but for the embedding, the clean prompt's), and below the lowest layer that reads a
  dropped edge it is the clean one. k = 0 and k = every edge thus cost the metric alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...model.decoder.parts import feed_forward, head_weights
from ..attribution.trace import head_writes
from .split import Run, Split
from .tasks import Batch, PairTask

ROWS_BYTES = 384 * 2**20  # the δ of one batched forward (K variants x the batch's pairs), about


def starts(split: Split, order: torch.Tensor, k: int) -> tuple[int, int]:
    """(the lowest layer reading one of the top ``k`` edges of ``order``, the lowest reading one of the others):
    the layer a point can begin from the corrupted run, and from the clean one (the layer count where none)."""
    g = split.graph
    layers = torch.tensor([g.reader_layer(r) for r in range(g.n_readers)])
    kept, dropped = order[:k, 1], order[k:, 1]
    low_kept = int(layers[kept].min()) if len(kept) else g.layers
    low_dropped = int(layers[dropped].min()) if len(dropped) else g.layers
    return low_kept, low_dropped


def layers_run(split: Split, order: torch.Tensor, k: int) -> int:
    """How many layers a point's forward runs (``patched_metrics``' start)."""
    return split.graph.layers - max(starts(split, order, k))


def per_forward(split: Split, batch: Batch) -> int:
    """How many variants of ``batch`` one forward takes: their δ within ``ROWS_BYTES``."""
    d = split.w["model.embed_tokens.weight"].shape[1]
    one = split.graph.n_writers * batch.clean.numel() * d * 4
    return max(1, ROWS_BYTES // one)


def pairs_per_forward(split: Split, task: PairTask) -> int:
    """How many pairs one point's forward takes: their δ (every writer's part, at the longest prompt's length)
    within ``ROWS_BYTES``. One forward of many pairs costs much less than as many forwards of a few (the matrix
    products are larger; issue 63 measured two to three times less a pair at 29 pairs than at 4)."""
    n = max(len(p.clean) for p in task.pairs)
    weight = split.w["model.embed_tokens.weight"]
    one = split.graph.n_writers * n * weight.shape[1] * weight.element_size()
    return max(1, ROWS_BYTES // one)


def _stacked(batch: Batch, k: int) -> Batch:
    """``batch`` repeated ``k`` times along its batch axis (variant-major)."""
    def rep(t: torch.Tensor) -> torch.Tensor:
        return t.repeat(k, *([1] * (t.dim() - 1)))
    return Batch(rep(batch.clean), rep(batch.corrupt), rep(batch.positions), rep(batch.answers),
                 rep(batch.answer_mask), rep(batch.wrongs), rep(batch.wrong_mask), batch.index * k)


def _mix(base: torch.Tensor, total: torch.Tensor, delta: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Each reader's input (K, B, R, n, d): base (B, n, d) + Σ_u keep[k, u, r] δ[k, u], or base + Σ_u δ[k, u] (total,
    (K, B, n, d)) less the dropped ones, whichever reads fewer writers. keep: (K, U, R) bool over δ's U writers."""
    K, U, R = keep.shape
    kept_rows = keep.any(2).any(0).nonzero()[:, 0]
    dropped_rows = (~keep).any(2).any(0).nonzero()[:, 0]
    if len(kept_rows) <= len(dropped_rows):
        rows, mask, out, sign = kept_rows, keep, base.expand_as(total), 1.0
    else:
        rows, mask, out, sign = dropped_rows, ~keep, base + total, -1.0
    out = out[:, :, None].expand(-1, -1, R, -1, -1)
    if len(rows) == 0:
        return out
    if 2 * len(rows) < U:  # a few writers: their δ copied together, the product over them alone
        chosen, m = delta[:, :U].index_select(1, rows), mask[:, rows].to(delta.dtype).transpose(1, 2)  # (K, R, U')
    else:  # most writers: the product over every one (a zero where not read), no copy of δ
        chosen, m = delta[:, :U], mask.to(delta.dtype).transpose(1, 2)
    shape = total.shape
    part = torch.bmm(m, chosen.flatten(2)).view(K, R, *shape[1:]).transpose(1, 2)  # (K, B, R, n, d)
    return out + sign * part


def patched_metrics(split: Split, batch: Batch, keeps: torch.Tensor, corrupt: Run, clean: Callable[[], Run],
                    room: list[torch.Tensor] | None = None) -> torch.Tensor:
    """The metric (K, B) of ``batch``'s pairs with, for each of K variants, the edges of ``keeps`` (K, W, R) read from
    this run and every other edge from ``corrupt``; ``clean()``: the clean prompts' run, asked for where a run begins
    from it. ``room``: a list holding the δ's memory from one call to the next (fresh pages cost the kernel's time)."""
    g, shape, w = split.graph, split.shape, split.w
    K = keeps.size(0)
    keeps = keeps.to(corrupt.writes.device) & g.allowed.to(corrupt.writes.device)
    allowed = g.allowed.to(keeps.device)
    layers = torch.tensor([g.reader_layer(r) for r in range(g.n_readers)], device=keeps.device)
    kept_any, dropped_any = keeps.any(1).any(0), (allowed & ~keeps).any(1).any(0)
    from_corrupt = int(layers[kept_any].min()) if bool(kept_any.any()) else g.layers
    from_clean = int(layers[dropped_any].min()) if bool(dropped_any.any()) else g.layers
    size = (K, g.n_writers, *corrupt.writes.shape[1:])  # (K, W, B, n, d); every row is written before it is read
    if room and room[0].numel() >= math.prod(size) and room[0].dtype == corrupt.writes.dtype \
            and room[0].device == corrupt.writes.device:
        delta = room[0][:math.prod(size)].view(size)
    else:
        delta = torch.empty(size, dtype=corrupt.writes.dtype, device=corrupt.writes.device)
        if room is not None:
            room[:] = [delta.view(-1)]
    if from_clean > from_corrupt:
        begin = from_clean
        below = g.writers_before(begin)  # every writer at the logits (layer L)
        delta[:, :below] = clean().writes[:below] - corrupt.writes[:below]
    else:
        begin = from_corrupt
        delta[:, :g.writers_before(begin)] = 0
        delta[:, 0] = split.embed(batch.clean) - corrupt.writes[0]
    total = delta[:, :g.writers_before(begin)].sum(1)  # (K, B, n, d): Σ δ of the writers so far
    stacked = _stacked(batch, K)
    B, n, d = corrupt.writes.shape[1:]
    for layer in range(begin, shape.layers):
        count = g.writers_before(layer)
        q0, m0 = g.reader(layer, "q"), g.reader(layer, "mlp")
        x = _mix(corrupt.bases[2 * layer], total, delta[:, :count], keeps[:, :count, q0:m0]).flatten(0, 1)
        if split.block.attn_norm is not None:
            x = split._norm(x, f"model.layers.{layer}.{split.block.attn_norm}")
        h, kv = shape.heads, shape.kv_heads
        p = head_weights(w, layer, shape)
        assert p.w_o is not None
        z = split._heads(x[:, :h], x[:, h:h + kv], x[:, h + kv:], p, shape.options(layer))
        parts = head_writes(z, p.w_o).view(K, B, h, n, d).transpose(1, 2)  # (K, h, B, n, d)
        delta[:, count:count + h] = parts - corrupt.writes[count:count + h]
        before = total  # a parallel block's MLP reads the residual before the layer's heads (``Graph.allowed``)
        total = total + delta[:, count:count + h].sum(1)
        mlp_rows = count if split.block.parallel else count + h
        y = _mix(corrupt.bases[2 * layer + 1], before if split.block.parallel else total, delta[:, :mlp_rows],
                 keeps[:, :mlp_rows, m0:m0 + 1])
        y = y.flatten(0, 1)[:, 0]
        if split.block.mlp_norm is not None:
            y = split._norm(y, f"model.layers.{layer}.{split.block.mlp_norm}")
        out = feed_forward(y, w, layer, shape)
        delta[:, count + h] = out.view(K, B, n, d) - corrupt.writes[count + h]
        total = total + delta[:, count + h]
    final = _mix(corrupt.bases[-1], total, delta, keeps[:, :, g.logits:g.logits + 1]).flatten(0, 1)[:, 0]
    return split._metric(final, stacked).view(K, B)

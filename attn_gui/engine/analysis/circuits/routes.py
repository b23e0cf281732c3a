"""Information-flow routes (Ferrando and Voita 2024, "Information Flow Routes"): each writer's share of the residual a
reader reads, from one forward of the clean prompts, with no corrupted prompt and no gradient.

Their importance of a part z of a sum y (their eq. 2, the proximity of the part to the whole):

    proximity(z, y) = max(||y||_1 - ||y - z||_1, 0),   importance(z, y) = proximity(z, y) / Σ_z' proximity(z', y)

with the sum over every writer that writes before the reader (``Graph.allowed``). Here y is the residual a reader
reads (``split.Run.bases``) and z each writer's part of it (``split.Run.writes``); a reader's edges share 1 at each
position. An edge's score is its importance averaged over the positions the reader matters at (every position for a
head's and an MLP's input; the scored positions for the logits) and over the pairs. Every reader of one layer's
attention reads the same residual, so a layer's query, key and value inputs get the same scores (the routes follow
the residual, not what a head does with it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .scores import Pairs, Progress, _check


def proximity(parts: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """max(||y||_1 - ||y - z||_1, 0) for each part z of ``parts`` (W, ..., d) and the whole y ``whole`` (..., d)."""
    return (whole.abs().sum(-1) - (whole - parts).abs().sum(-1)).clamp(min=0)


def route_scores(pairs: Pairs, progress: Progress | None = None,
                 cancelled: Callable[[], bool] | None = None) -> torch.Tensor:
    """Every edge's route importance (module docstring), (W, R) float64, 0 off the graph; a reader's column sums to
    1 where any writer is near its input."""
    g = pairs.split.graph
    scores = torch.zeros(g.n_writers, g.n_readers, dtype=torch.float64)
    for i, batch in enumerate(pairs.batches):
        _check(cancelled)
        run = pairs.run("clean", i)
        for base in range(run.bases.size(0)):
            layer, which = divmod(base, 2)
            if layer == g.layers:
                readers = [g.logits]
            elif which == 0:
                readers = list(range(g.reader(layer, "q"), g.reader(layer, "mlp")))
            else:
                readers = [g.reader(layer, "mlp")]
            writers = g.allowed[:, readers[0]].nonzero()[:, 0]
            near = proximity(run.writes[writers], run.bases[base]).double()  # (w, B, n)
            share = near / near.sum(0).clamp(min=torch.finfo(torch.float64).tiny)
            if layer == g.layers:  # the logits matter where the metric reads them
                share = share.gather(2, batch.positions.to(share.device).expand(share.size(0), -1, -1))
            per_pair = share.mean(2).sum(1).cpu()  # mean over positions, summed over the batch's pairs
            for r in readers:
                scores[writers.cpu(), r] += per_pair / pairs.count
        if progress is not None:
            progress(i + 1, len(pairs.batches), "routes")
    return scores

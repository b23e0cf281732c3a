"""Edge attribution (EAP, EAP-IG), exact edge patching and faithfulness, on the split forward (``split.Split``).

With a_clean[u] and a_corrupt[u] what writer u adds on the clean and on the corrupted prompt, and m the metric:

- EAP (Syed et al. 2023; Hanna et al. 2024's sign, as the issue writes it):
  score(u -> r) = (a_clean[u] - a_corrupt[u]) . dm/d input_r, the gradient taken on the clean prompt, summed over
  positions and averaged over pairs: one corrupted forward, one clean forward and one backward per batch of pairs.
  It is the first-order estimate of m(clean) - m(clean with that one edge read from the corrupted prompt).
  ``at="corrupted"`` takes the gradient on the corrupted prompt instead (TransformerLens' and Syed et al.'s
  attribution patching, the clean edge's effect on the corrupted run): the first-order estimate of
  m(corrupted with that one edge read from the clean prompt) - m(corrupted). The two agree to first order only.
- EAP-IG (Hanna et al. 2024, "Have Faith in Faithfulness"): the same with dm/d input_r averaged over m points of
  the straight line from the corrupted to the clean embedding, at k/m for k = 1 ... m.
- Node attribution (attribution patching of a writer): (a_clean[u] - a_corrupt[u]) . dm/d a[u], which is the sum of
  u's edge scores (u's write reaches the metric through its readers only).
- Exact patching of an edge: m(clean) - m(clean with that edge read from the corrupted prompt), one forward per
  edge from the reader's layer up.
- Faithfulness (Hanna et al. 2024): keep the top k edges by |score|, read every other edge from the corrupted prompt,
  and measure (m - m_corrupt) / (m_clean - m_corrupt): 0 is the corrupted prompt's metric, 1 the clean one's.
"""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...base.errors import ConfigError
from .curve import layers_run, pairs_per_forward, patched_metrics, per_forward
from .split import Patch, Run, Split
from .tasks import Batch, PairTask

Progress = Callable[[int, int, str], None]  # (done, total, what)
Estimate = Callable[[float, int], None]  # (seconds, points): what the rest of the faithfulness curve should take
BATCH_BYTES = 384 * 2**20  # a batch of pairs' writes and gradient graph, about
CACHE_BYTES = 1024 * 2**20  # the corrupted and clean runs kept between passes over the pairs (the corrupted first)


class Cancelled(Exception):
    """The caller's ``cancelled()`` said stop."""


def batch_size(split: Split, task: PairTask) -> int:
    """Pairs per batch: the writes and the readers' inputs of a batch within ``BATCH_BYTES``."""
    g = split.graph
    n = max(len(p.clean) for p in task.pairs)
    d = split.w["model.embed_tokens.weight"].shape[1]
    per_pair = n * d * 4 * (2 * g.n_writers + 3 * g.layers * (g.per_layer + 1))
    return max(1, min(64, BATCH_BYTES // per_pair))


class Pairs:
    """A task's pairs in batches, with each batch's clean and corrupted runs (no gradient), kept while they fit."""

    def __init__(self, split: Split, task: PairTask, size: int | None = None, label: str = ""):
        self.split, self.task, self.label = split, task, label
        self.batches: list[Batch] = task.batches(size or batch_size(split, task))
        self.count = len(task.pairs)
        self._kept: OrderedDict[tuple[str, int], Run] = OrderedDict()
        self._bytes = 0

    def run(self, which: str, i: int) -> Run:
        """Batch ``i``'s "clean" or "corrupt" run."""
        key = (which, i)
        if key in self._kept:
            return self._kept[key]
        batch = self.batches[i]
        with torch.no_grad():
            run = self.split.run(self.split.embed(batch.clean if which == "clean" else batch.corrupt), batch)
        size = run.writes.numel() * run.writes.element_size() + run.bases.numel() * run.bases.element_size()
        while which == "corrupt" and self._bytes + size > CACHE_BYTES and any(w == "clean" for w, _ in self._kept):
            old = next(key for key in self._kept if key[0] == "clean")  # every point of a curve reads the corrupted
            gone = self._kept.pop(old)
            self._bytes -= gone.writes.numel() * gone.writes.element_size() + \
                gone.bases.numel() * gone.bases.element_size()
        if self._bytes + size <= CACHE_BYTES:
            self._kept[key] = run
            self._bytes += size
        return run

    def grouped(self, size: int) -> Pairs:
        """The same pairs in batches of at most ``size`` (itself where they are so already); its runs are let go
        when another takes its place (they are computed again when asked for)."""
        other = Pairs(self.split, self.task, size, self.label)
        if [b.index for b in other.batches] == [b.index for b in self.batches]:
            return self
        self._kept.clear()
        self._bytes = 0
        return other

    def metrics(self) -> tuple[float, float]:
        """The mean metric over the pairs, clean and corrupted."""
        clean = sum(float(self.run("clean", i).metric.double().sum()) for i in range(len(self.batches)))
        corrupt = sum(float(self.run("corrupt", i).metric.double().sum()) for i in range(len(self.batches)))
        return clean / self.count, corrupt / self.count


def _check(cancelled) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled


LAYER_GROUP = 6  # readers of this many layers scored at once: the writers' differences read once per group


def _product(scores: torch.Tensor, diff: torch.Tensor, grads: torch.Tensor, g, scale: float) -> None:
    """scores[u, r] += scale Σ_{b, n, d} diff[u] grads[r], for the writers that can feed each group of readers."""
    for first in range(0, g.layers + 1, LAYER_GROUP):
        last = min(g.layers + 1, first + LAYER_GROUP)  # layer L: the logits
        r0, r1 = first * g.per_layer, min(g.n_readers, last * g.per_layer)
        count = g.n_writers if last > g.layers else g.writers_before(last - 1) + g.heads + 1
        part = diff[:count].flatten(1) @ grads[r0:r1].flatten(1).T  # (count, readers)
        scores[:count, r0:r1] += part.double() * scale


GRADIENT_AT = ("clean", "corrupted")  # where EAP takes its gradient (``edge_scores(at=)``)
POINTS_BYTES = 1024 * 2**20  # EAP-IG's points of a batch run together: their forward's graph, about


def points_at_once(split: Split, batch: Batch) -> int:
    """How many of EAP-IG's points one forward and one backward take together (``Split.gradients``' points):
    within ``POINTS_BYTES``, each point's kept forward for the batch's prompts, about 20 residual-sized tensors
    and 4 of the MLP's hidden size a layer (SmolLM2-135M, 4 IOI pairs of 14 tokens: 118 MB a point, measured
    about 100 to 120 MB as the peak's rise over ten points: 8 points at once)."""
    g, (b, n) = split.graph, batch.clean.shape
    d = split.w["model.embed_tokens.weight"].shape[1]
    down = "model.layers.0.mlp.down_proj.weight"
    hidden = split.w[down].shape[-1] if down in split.w else 4 * d
    per_point = b * n * 4 * g.layers * (20 * d + 4 * hidden)
    return max(1, POINTS_BYTES // per_point)


def edge_scores(pairs: Pairs, steps: int = 0, progress: Progress | None = None,
                cancelled: Callable[[], bool] | None = None, at: str = "clean") -> torch.Tensor:
    """EAP (``steps`` 0) or EAP-IG with ``steps`` points: every edge's score, (W, R) float64, 0 off the graph.

    Per batch: the corrupted run (no gradient), then a forward and a backward from the clean embedding (its writes
    are a_clean, ``Split.gradients``); for EAP-IG, the points of the line clean end first, several in one forward
    and one backward (``points_at_once``), their gradients summed before the product with the writers'
    differences. EAP with ``at`` "corrupted": the backward from the corrupted embedding, a_clean from the clean run
    (no gradient).
    """
    if at not in GRADIENT_AT:
        raise ConfigError(f"the gradient is taken at one of {', '.join(GRADIENT_AT)}; got {at!r}")
    if steps and at != "clean":
        raise ConfigError("EAP-IG averages the gradient over the line from the corrupted to the clean prompt; "
                          "a gradient point is EAP's alone")
    split = pairs.split
    g = split.graph
    scores = torch.zeros(g.n_writers, g.n_readers, dtype=torch.float64)
    points = [1.0 if at == "clean" else 0.0] if steps == 0 else [k / steps for k in range(steps, 0, -1)]
    total = len(pairs.batches) * len(points)
    for i, batch in enumerate(pairs.batches):
        corrupt = pairs.run("corrupt", i)
        e_clean, e_corrupt = split.embed(batch.clean), split.embed(batch.corrupt)
        summed: torch.Tensor | None = None
        diff = corrupt.writes
        together = points_at_once(split, batch)
        for k in range(0, len(points), together):
            _check(cancelled)
            alphas = points[k:k + together]
            line = torch.cat([e_corrupt + alpha * (e_clean - e_corrupt) for alpha in alphas])  # (points B, n, d)
            run, grads = split.gradients(line, batch, len(alphas))
            if k == 0:  # the clean end first: a_clean, or the clean run's where the gradient is the corrupted one's
                clean = run.writes if alphas[0] == 1.0 else pairs.run("clean", i).writes
                diff = clean - corrupt.writes  # (W, B, n, d)
            summed = grads if summed is None else summed.add_(grads)
            if progress is not None:
                progress(i * len(points) + k + len(alphas), total, "EAP-IG" if steps else "EAP")
        assert summed is not None
        _product(scores, diff, summed, g, 1.0 / (pairs.count * len(points)))
    return scores * g.allowed


def exact_edges(pairs: Pairs, edges: list[tuple[int, int]], progress: Progress | None = None,
                cancelled: Callable[[], bool] | None = None) -> torch.Tensor:
    """m(clean) - m(clean with edge u -> r read from the corrupted prompt), averaged over pairs, for each (u, r):
    the quantity an edge's EAP score estimates. (E,) float64."""
    split = pairs.split
    g = split.graph
    for u, r in edges:
        if not g.allowed[u, r]:
            raise ConfigError(f"no edge {g.edge_name(u, r)}: {g.writer_names[u]} does not write before "
                              f"{g.reader_names[r]} reads")
    out = torch.zeros(len(edges), dtype=torch.float64)
    done, total = 0, len(pairs.batches) * len(edges)
    for i, batch in enumerate(pairs.batches):
        clean, corrupt = pairs.run("clean", i), pairs.run("corrupt", i)
        for e, (u, r) in enumerate(edges):
            _check(cancelled)
            keep = g.allowed.clone()
            keep[u, r] = False
            with torch.no_grad():
                patched = split.run(clean.writes[0], batch, patch=Patch(keep, corrupt),
                                    start=(g.reader_layer(r), clean))
            out[e] += float((clean.metric.double() - patched.metric.double()).sum()) / pairs.count
            done += 1
            if progress is not None:
                progress(done, total, "exact patching")
    return out


def ranked(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The edges (E, 2) as (writer, reader), largest |score| first; ties in graph order."""
    writers, readers = allowed.nonzero(as_tuple=True)
    values = scores[writers, readers].abs()
    order = torch.sort(values, descending=True, stable=True).indices
    return torch.stack([writers[order], readers[order]], 1)


def keep_top(order: torch.Tensor, k: int, shape: tuple[int, int]) -> torch.Tensor:
    """(W, R) bool: the first ``k`` edges of ``order`` kept."""
    keep = torch.zeros(shape, dtype=torch.bool)
    top = order[:k]
    keep[top[:, 0], top[:, 1]] = True
    return keep


@dataclass(frozen=True)
class Faithfulness:
    """The fraction of the metric the top k edges recover, for each k of ``ks``, and the smallest circuit found to
    recover ``target`` (None if even every edge does not).

    clean, corrupt : the mean metric of the clean and the corrupted prompts (the fraction's 1 and 0)
    complete : False where the run was cancelled: ``ks`` holds the points measured by then and ``smallest`` is None
    """

    ks: tuple[int, ...]
    recovered: tuple[float, ...]
    clean: float
    corrupt: float
    target: float = 0.8
    smallest: int | None = None
    complete: bool = True

    def at(self, k: int) -> float | None:
        return dict(zip(self.ks, self.recovered, strict=True)).get(k)


def default_ks(edges: int) -> tuple[int, ...]:
    """0, 1, 2, 3, 5, 10, 20, 50 ... up to and with every edge (the curve before issue 63, and a denser one asked
    for by ``faithfulness(ks=)``)."""
    ks, step = [0, 1, 2, 3, 5], 10
    while step < edges:
        ks += [step, 2 * step, 5 * step]
        step *= 10
    return tuple(sorted({k for k in ks if k < edges} | {edges}))


def sweep_ks(edges: int) -> tuple[int, ...]:
    """The default curve's points: 0, 1, 10, 100 ... below ``edges``, and every edge."""
    ks, step = [0], 1
    while step < edges:
        ks.append(step)
        step *= 10
    return (*ks, edges)


def _search(low: int, high: int) -> int:
    """The points a bisection from ``low`` (below the target) to ``high`` (at or above) measures, at most."""
    return max(0, math.ceil(math.log2(max(1, high - low))))


class _Points:
    """The curve's points measured over every batch of pairs (``curve.patched_metrics``), counted for the progress
    and timed for the estimate."""

    def __init__(self, pairs: Pairs, order: torch.Tensor, clean: float, corrupt: float, progress: Progress | None,
                 cancelled: Callable[[], bool] | None, estimate: Estimate | None):
        self.pairs, self.order, self.clean, self.corrupt = pairs, order, clean, corrupt
        self.progress, self.cancelled, self.estimate = progress, cancelled, estimate
        self.values: dict[int, float] = {}
        self.done, self.total, self.said = 0, 0, 0  # points measured, expected, and the total last said
        self.work, self.spent = 0, 0.0  # layers run so far (each point's, plus 1 for its logits), and their seconds
        self.per = min(per_forward(pairs.split, b) for b in pairs.batches)
        self.room: list[torch.Tensor] = []  # the δ's memory, kept from one forward to the next

    def cost(self, k: int) -> int:
        return layers_run(self.pairs.split, self.order, k) + 1

    def measure(self, ks: list[int]) -> list[float]:
        """The recovered fraction at each of ``ks``, in one forward per batch of pairs."""
        split, shape = self.pairs.split, tuple(self.pairs.split.graph.allowed.shape)
        keeps = torch.stack([keep_top(self.order, k, shape) for k in ks])  # type: ignore[arg-type]
        sums = torch.zeros(len(ks), dtype=torch.float64)
        began = time.perf_counter()
        for i, batch in enumerate(self.pairs.batches):
            _check(self.cancelled)
            with torch.no_grad():
                metric = patched_metrics(split, batch, keeps, self.pairs.run("corrupt", i),
                                         functools.partial(self.pairs.run, "clean", i), self.room)
            sums += metric.double().sum(1).cpu()
        self.spent += time.perf_counter() - began
        self.work += sum(self.cost(k) for k in ks)
        gap = self.clean - self.corrupt
        out = [(float(s) / self.pairs.count - self.corrupt) / gap for s in sums]
        self.values.update(zip(ks, out, strict=True))
        self.done += len(ks)
        self.said = max(self.total, self.done)
        if self.progress is not None:
            self.progress(self.done, self.said, "faithfulness points")
        return out

    def say(self, work_left: int, points_left: int) -> None:
        """Tell the estimate of the rest (once), from the seconds a layer took so far."""
        if self.estimate is not None and self.work > len(self.values):  # a point that ran a layer or more
            self.estimate(self.spent / self.work * work_left, points_left)
            self.estimate = None

    def curve(self, ks: tuple[int, ...], target: float, stop: bool) -> None:
        """Measure ``ks``: those that run no layer first, then the rest; the estimate after the first that runs
        half the layers or more (it counts the search for the smallest circuit at its longest). ``stop``: the rest
        one at a time from the smallest k, none above a k already at ``target`` (the curve's flat end: every edge
        alone stays); else every k, K at a time, those of one depth together."""
        full = self.pairs.split.graph.layers + 1
        search = max(_search(low, high) for low, high in zip((-1, *ks), ks, strict=False))
        self.total = len(ks) + search
        costs = {k: self.cost(k) for k in ks}
        free = [k for k in ks if costs[k] == 1]
        rest = sorted((k for k in ks if costs[k] > 1), key=(lambda k: k) if stop else (lambda k: (-costs[k], k)))
        if free:
            self.measure(free)
        for i, k in enumerate(rest):
            if stop and any(v >= target for j, v in self.values.items() if j < k):
                self.total = self.done + search  # the points above: dropped
                return
            if i == 0 or stop:
                self.measure([k])
            elif (i - 1) % self.per == 0:
                self.measure(rest[i:i + self.per])
            if 2 * costs[k] > full or i == len(rest) - 1:  # a deep point: a layer's seconds without the fixed cost
                self.say(sum(costs[j] for j in rest[i + 1:]) + search * full, len(rest) - 1 - i + search)

    def smallest(self, target: float) -> int | None:
        """The smallest k recovering ``target``: bisected between the largest k measured below it and the smallest
        at or above it (the fraction need not grow with k; the bisection finds a k where it crosses)."""
        above = [k for k, v in self.values.items() if v >= target]
        if not above:
            return None
        high = min(above)
        low = max((k for k in self.values if k < high), default=-1)
        self.total = self.done + _search(low, high)
        while high - low > 1:  # recovered(low) < target <= recovered(high)
            mid = (low + high) // 2
            if self.measure([mid])[0] >= target:
                high = mid
            else:
                low = mid
            left = _search(low, high)  # the estimate, where no point of the curve ran a layer
            self.say(left * (self.pairs.split.graph.layers + 1), left)
        if self.said != self.done and self.progress is not None:  # the search took fewer points than said
            self.progress(self.done, self.done, "faithfulness points")
        return high


def faithfulness(pairs: Pairs, scores: torch.Tensor, ks: tuple[int, ...] | None = None, target: float = 0.8,
                 progress: Progress | None = None, cancelled: Callable[[], bool] | None = None,
                 estimate: Estimate | None = None) -> Faithfulness:
    """The faithfulness curve of the edges ranked by |``scores``|, and the smallest k recovering ``target``.

    ``ks`` None: 0, 1, 10, 100 ... (``sweep_ks``) up to the first k recovering ``target``, every edge, and the
    smallest circuit, bisected between the last k below the target and that one; the points above it are not
    measured. ``ks`` given: every k of it, and the smallest circuit bisected the same way (not among the ks).
    The pairs run in batches as large as one point's memory allows (``curve.pairs_per_forward``).

    ``progress`` counts the points measured (the curve's and the bisection's); ``estimate(seconds, points)`` is
    called once, after the first point that runs a layer, with the time the rest should take at most. Cancelled:
    the points measured by then, ``complete`` False.
    """
    g = pairs.split.graph
    order = ranked(scores, g.allowed)
    asked = None if ks is None else tuple(sorted(set(ks)))
    grouped = pairs.grouped(pairs_per_forward(pairs.split, pairs.task))
    clean, corrupt = grouped.metrics()
    if clean == corrupt:
        raise ConfigError(f"the clean and the corrupted prompts give the same mean metric ({clean:.4g}): there is no "
                          "difference for a circuit to recover")
    points = _Points(grouped, order, clean, corrupt, progress, cancelled, estimate)
    try:
        points.curve(asked or sweep_ks(len(order)), target, stop=asked is None)
        shown = sorted(points.values) if asked is None else list(asked)
        smallest = points.smallest(target)
    except Cancelled:
        seen = [k for k in (asked or sorted(points.values)) if k in points.values]
        return Faithfulness(tuple(seen), tuple(points.values[k] for k in seen), clean, corrupt, target, None, False)
    if asked is None and smallest is not None:
        shown = sorted({*shown, smallest})
    return Faithfulness(tuple(shown), tuple(points.values[k] for k in shown), clean, corrupt, target, smallest)

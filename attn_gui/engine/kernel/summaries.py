"""What every layer's and head's attention does, in numbers that read at any length (issue 32).

A T x T map of every layer cannot be kept at 32k tokens; these can. Each is computed from the
rows of α as they are made, a block of query rows at a time (``row_stats``), and added up per
layer (``LayerSums``), so the streamed model path and the full one give the same numbers:

- the attention-sink mass: the share of α on the first token, averaged over the queries after it
  (the first query of a causal model sees that token only);
- the mean attention distance: Σ_j α_ij |i − j|, averaged over the queries;
- the distance-decay curve: the mean α of the (query, key) pairs a query may see at each
  distance, in bins [0, 1), [1, 2), [2, 4), [4, 8) …;
- each query's top-k keys and their α (-1 where a query sees fewer than k keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

TOP_K = 5  # keys kept per query: what the token walk follows at long T
ROW_METRICS = ("entropy", "entropy_norm", "self", "previous")  # kept per query row, averaged by ``finish``


def decay_edges(T_k: int) -> tuple[int, ...]:
    """The distance bins' edges for ``T_k`` keys: 0, 1, 2, 4, … up to the first power of two ≥ T_k."""
    top = max(1, math.ceil(math.log2(max(T_k, 1))))
    return (0, *(2**i for i in range(top + 1)))


def row_stats(weights: torch.Tensor, start: int, hidden: torch.Tensor | None, k: int = TOP_K,
              causal: bool = False, width: int | None = None,
              scores: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The summaries' parts of some query rows of α.

    Parameters
    ----------
    weights : (h, n, T_k) α of queries start ... start + n − 1
    start : the first row's query index
    hidden : (n, T_k) True where a query may not see a key (``attention.masked_keys``), or None
    k : keys kept per query
    causal : no query sees a key after it (then |i − j| = i − j wherever α is not 0)
    width : the number of keys of the whole rows (the bins' edges), when ``weights`` holds only the first
        T_k of them (causal rows before any later key): None, T_k
    scores : (h, n, T_k) the scores whose softmax over the keys is ``weights`` (-inf where hidden), or None;
        given, they are OVERWRITTEN (the caller's scratch: a run's block of scores, read by nothing after).
        The entropy −Σ_j α_j ln α_j is then read from them: ln α_j = s_j − s_m + ln α_m for the row's top key m
        (α_j = e^(s_j) / Σ e^s), so the entropy is −ln α_m + Σ_j α_j (s_m − s_j), two sums of terms ≥ 0, made
        in place: no logarithm of every α and no new block (4 to 7 times faster than ``entr`` on CPU)

    Returns
    -------
    dict with sink (h, n): α on key 0; distance (h, n): Σ_j α_ij |i − j|; top_weights, top_keys
    (h, n, k'), k' = min(k, T_k); decay_mass (h, B): Σ over these rows of α in each distance bin;
    decay_pairs (B,): the visible pairs in each bin
    """
    h, n, T_k = weights.shape
    w = weights.float() if weights.dtype not in (torch.float32, torch.float64) else weights
    query = torch.arange(start, start + n, device=w.device)  # (n,)
    key = torch.arange(T_k, device=w.device)
    if causal:  # Σ_j α_ij (i - j) = i Σ_j α_ij - Σ_j α_ij j: one matrix-vector product
        distance = query.to(w.dtype) * w.sum(-1) - w @ key.to(w.dtype)  # (h, n)
    else:
        distance = (w * (query[:, None] - key[None, :]).abs().to(w.dtype)).sum(-1)  # (h, n)
    top_weights, top_index = largest(w, min(k, T_k))  # (h, n, k')
    keys = torch.where(top_weights > 0, top_index, -1)  # a key of α 0 is no top key (a masked one)
    edges = torch.tensor(decay_edges(width or T_k), device=w.device)
    visible = (torch.ones(1, n, T_k, dtype=w.dtype, device=w.device) if hidden is None
               else (~hidden).to(w.dtype)[None])  # (1, n, T_k)
    keys_seen = torch.full((n,), T_k, device=w.device) if hidden is None else (~hidden).sum(-1)  # (n,)
    if scores is None:
        entropy = torch.special.entr(w).sum(-1)  # -Σ α ln α (h, n), 0 ln 0 = 0
    else:  # -ln α_m + Σ α (s_m - s); a hidden key's term is 0 (-inf): nansum leaves it out
        s = scores.float() if scores.dtype != w.dtype else scores
        terms = s.sub_(s.gather(-1, top_index[..., :1])).mul_(w)  # α_j (s_j - s_m) <= 0, in place (h, n, T_k)
        entropy = -top_weights[..., 0].log() - torch.nansum(terms, dim=-1)
    log_keys = torch.log(keys_seen.clamp_min(2).to(w.dtype))
    rows = torch.arange(n, device=w.device)
    diagonal = w[:, rows, (query).clamp(max=T_k - 1)]  # α_ii (h, n)
    previous = w[:, rows, (query - 1).clamp(0, T_k - 1)]  # α_i,i-1; row 0's is left out when averaged
    return dict(sink=w[..., 0].clone(), distance=distance, top_weights=top_weights, entropy=entropy,
                entropy_norm=torch.where(keys_seen > 1, entropy / log_keys, 0.0), self=diagonal, previous=previous,
                top_keys=keys.to(torch.int32), decay_mass=_bin_sums(w, query, edges, causal).sum(1),
                decay_pairs=_bin_sums(visible, query, edges, causal).sum(1)[0])


WIDE, CHUNK = 4096, 64  # rows of at least WIDE keys take their top k by chunks of CHUNK keys (``largest``)


def largest(w: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``w.topk(k, dim=-1)``'s values and indices (ties may pick another of equal value), largest first.

    A row's k largest lie in the k chunks of ``CHUNK`` keys whose maxima are largest (a chunk left out has k
    chunks' maxima above its own, so k values at least its own), so a wide row is searched in those k chunks
    only: 2.5 times as fast as ``topk`` at 8,192 keys and 6 times at 32,768 (CPU, one thread).
    """
    h, n, T_k = w.shape
    if T_k < WIDE:
        top = w.topk(k, dim=-1)
        return top.values, top.indices
    pad = -T_k % CHUNK
    chunks = (F.pad(w, (0, pad), value=-torch.inf) if pad else w).view(h, n, -1, CHUNK)  # (h, n, C, CHUNK)
    best = chunks.amax(-1).topk(k, dim=-1).indices  # (h, n, k): the chunks of the k largest maxima
    values, at = chunks.gather(2, best[..., None].expand(-1, -1, -1, CHUNK)).view(h, n, k * CHUNK).topk(k, dim=-1)
    return values, best.gather(-1, at // CHUNK) * CHUNK + at % CHUNK


def _bin_sums(w: torch.Tensor, query: torch.Tensor, edges: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """Σ_j w_ij over the keys at distance |i − j| in each bin [e_b, e_(b+1)): (h, n, B), from one cumulative sum.

    Before the query the keys of bin b are i − e_(b+1) < j ≤ i − e_b; after it i + max(e_b, 1) ≤ j < i + e_(b+1).
    """
    h, n, T_k = w.shape
    cum = w.cumsum(-1)  # (h, n, T_k): cum[m] = Σ_{j <= m} w_j
    lo, hi = edges[:-1], edges[1:]  # (B,)
    i = query[:, None]  # (n, 1)

    def upto(m: torch.Tensor) -> torch.Tensor:  # Σ_{j <= m} w_j, 0 for m < 0: (h, n, B)
        got = cum.gather(-1, m.clamp(0, T_k - 1).expand(h, n, -1))
        return torch.where(m >= 0, got, 0.0)

    def between(first: torch.Tensor, last: torch.Tensor) -> torch.Tensor:  # Σ_{first <= j <= last}, (h, n, B)
        a, b = first.clamp(0, T_k), last.clamp(-1, T_k - 1)
        return torch.where(b >= a, upto(b) - upto(a - 1), 0.0)

    before = between(i - hi + 1, i - lo)
    return before if causal else before + between(i + lo.clamp(min=1), i + hi - 1)


class LayerSums:
    """One layer's summaries, added up block by block of query rows (``add``), then finished (``finish``)."""

    def __init__(self, heads: int, T: int, T_k: int, device, dtype, k: int = TOP_K):
        B = len(decay_edges(T_k)) - 1
        k = min(k, T_k)
        self.T = T
        self.sink = torch.zeros(heads, T, device=device, dtype=dtype)
        self.distance = torch.zeros(heads, T, device=device, dtype=dtype)
        self.top_weights = torch.zeros(heads, T, k, device=device, dtype=dtype)
        self.top_keys = torch.full((heads, T, k), -1, device=device, dtype=torch.int32)
        self.rows = {name: torch.zeros(heads, T, device=device, dtype=dtype) for name in ROW_METRICS}  # per query
        self.decay_mass = torch.zeros(heads, B, device=device, dtype=dtype)
        self.decay_pairs = torch.zeros(B, device=device, dtype=dtype)

    def add(self, stats: dict[str, torch.Tensor], start: int) -> None:
        """Take ``row_stats`` of the rows from ``start`` on."""
        n = stats["sink"].size(-1)
        for name in ("sink", "distance"):
            getattr(self, name)[:, start:start + n] = stats[name]
        for name in ("top_weights", "top_keys"):  # rows that see fewer than k keys keep weight 0, key -1 past them
            k = stats[name].size(-1)
            getattr(self, name)[:, start:start + n, :k] = stats[name]
        for name in ROW_METRICS:
            self.rows[name][:, start:start + n] = stats[name]
        self.decay_mass += stats["decay_mass"]
        self.decay_pairs += stats["decay_pairs"]

    def finish(self) -> dict[str, torch.Tensor]:
        """sink (h,), distance (h,), decay (h, B) (NaN in a bin no query sees), top_weights and top_keys (h, T, k),
        and the head metrics (``engine.analysis.metrics.METRICS``: their definitions, over every query row), as
        metric_<name>."""
        sink = self.sink[:, 1:] if self.T > 1 else self.sink  # the first query sees the first token only
        decay = self.decay_mass / self.decay_pairs.where(self.decay_pairs > 0, torch.nan)
        rows = self.rows
        previous = rows["previous"][:, 1:].mean(-1) if self.T > 1 else torch.full_like(self.sink[:, 0], torch.nan)
        metrics = dict(entropy=rows["entropy"].mean(-1), entropy_norm=rows["entropy_norm"].mean(-1),
                       max_weight=self.top_weights[..., 0].mean(-1), sink=self.sink.mean(-1), previous=previous,
                       self=rows["self"].mean(-1), distance=self.distance.mean(-1))
        return dict(sink=sink.mean(-1), distance=self.distance.mean(-1), decay=decay, top_weights=self.top_weights,
                    top_keys=self.top_keys, **{f"metric_{name}": v for name, v in metrics.items()})


@dataclass(frozen=True)
class Summaries:
    """Every layer's and head's summaries of one model run (see the module's docstring).

    Attributes
    ----------
    sink : (L, h) the mean α on the first token, over the queries after it
    distance : (L, h) the mean attention distance, in tokens
    decay_edges : the distance bins' edges, B + 1 of them
    decay : (L, h, B) the mean α of the visible (query, key) pairs in each distance bin; NaN where none
    top_keys : (L, h, T, k) each query's k keys of largest α, largest first; -1 where it sees fewer
    top_weights : (L, h, T, k) their α
    metrics : metric name -> (L, h): ``engine.analysis.metrics.head_metrics``' numbers (its names and definitions)
    maps : (L, h, r, r) each layer's α pooled to the screen's size, a streamed run only (None otherwise)
    """

    sink: torch.Tensor
    distance: torch.Tensor
    decay_edges: tuple[int, ...]
    decay: torch.Tensor
    top_keys: torch.Tensor
    top_weights: torch.Tensor
    metrics: dict[str, torch.Tensor]
    maps: torch.Tensor | None = None

    @classmethod
    def stack(cls, layers: list[dict[str, torch.Tensor]], T_k: int, maps: list[torch.Tensor] | None = None
              ) -> Summaries:
        """The summaries of every layer, each ``LayerSums.finish()``'s (with ``maps``: each layer's pooled α)."""
        both = {name: torch.stack([layer[name] for layer in layers]) for name in layers[0]}
        metrics = {name[len("metric_"):]: both.pop(name) for name in list(both) if name.startswith("metric_")}
        return cls(decay_edges=decay_edges(T_k), maps=None if maps is None else torch.stack(maps), metrics=metrics,
                   **both)

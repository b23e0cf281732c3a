"""The key/value cache step by step, shaped for the screen (no Qt).

``CacheWalk`` runs ``engine.decoding.Decoder``: the prefill (the whole sentence at once),
then one decode step at a time (one token through every layer, its query against the
cached keys), and after each step a full recompute of the whole sequence, timed for
comparison. Each step is kept as a ``CacheStep`` of host arrays; ``cache_maps`` turns one
step into the maps of one layer and head: the cached keys and values (a row per
position, growing by one each step) and the new query row's alpha against them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..engine import AttentionConfig
from ..engine.run.decoding import Decoder
from ..engine.base.devices import synchronize
from .maps import MapData


@dataclass(frozen=True)
class CacheStep:
    """One step of decoding with the cache, on the host.

    Attributes
    ----------
    index : int
        0 for the prefill, n for the n-th decode step.
    tokens : tuple of str
        The cached positions' tokens after this step (P + 1 of them); the last is the new one.
    probability : float or None
        A decode step's token's probability (greedy: the highest); None for the prefill.
    alpha : (L, h, P + 1) array
        Every layer's and head's attention of the newest query row against the cached keys and its own.
    keys, values : (L, g, P + 1, d_k) and (L, g, P + 1, d_v) arrays
        The cache after this step (keys after RoPE).
    elapsed_ms : float
        This step's time: the whole sentence for the prefill, one token through the cache otherwise.
    recompute_ms : float or None
        The time to run the whole sequence again without the cache (decode steps).
    """

    index: int
    tokens: tuple[str, ...]
    probability: float | None
    alpha: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    elapsed_ms: float
    recompute_ms: float | None

    @property
    def kind(self) -> str:
        return "prefill" if self.index == 0 else "decode"

    def describe(self) -> str:
        """One line: what this step computed and how long it took."""
        T = len(self.tokens)
        if self.index == 0:
            return f"prefill: {T} tokens at once, {self.elapsed_ms:.0f} ms; cache of {T}"
        line = (f"step {self.index}: {self.tokens[-1]}  p = {self.probability:.2f}; {self.elapsed_ms:.0f} ms "
                f"(a full recompute of {T}: {self.recompute_ms:.0f} ms); cache of {T}")
        if self.recompute_ms is not None and self.elapsed_ms >= self.recompute_ms:  # read as "the cache is slower"
            line += (f". Slower than the recompute this time: at {T} tokens the cache saves little arithmetic, "
                     f"less than what the computer's other work adds to either time; its saving grows with the "
                     f"text (one new row against the cache, instead of all {T} rows again)")
        return line


def _host(cache_part: tuple[torch.Tensor, ...]) -> np.ndarray:
    return torch.stack(cache_part).float().cpu().numpy()  # (L, g, P, d)


class CacheWalk:
    """Greedy decoding of ``config.sentence`` with the cache, one step at a time (``config.model``: a decoder).

    Attributes
    ----------
    config : AttentionConfig
    steps : list of CacheStep
        The prefill first, then each decode step.
    """

    def __init__(self, config: AttentionConfig):
        self.config = config
        start = time.perf_counter()
        self.decoder = Decoder(config)
        synchronize(self.decoder.device)
        elapsed = (time.perf_counter() - start) * 1e3
        prefill = self.decoder.prefill
        self.steps = [CacheStep(0, tuple(self.decoder.prompt.tokens), None,
                                prefill.last_weights.float().cpu().numpy(), _host(prefill.cache.keys),
                                _host(prefill.cache.values), elapsed, None)]

    def step(self) -> CacheStep:
        """One decode step (and, for comparison, a timed recompute of the whole sequence)."""
        step = self.decoder.step()
        start = time.perf_counter()
        self.decoder.recompute()
        synchronize(self.decoder.device)
        recompute_ms = (time.perf_counter() - start) * 1e3
        cache = self.decoder.cache
        keys, values = _host(cache.keys), _host(cache.values)
        # the cache only grows at its end: each earlier step's is a prefix of this one, kept as a view of it
        # (one host copy of the cache, not one per step: at thousands of tokens each is hundreds of MiB)
        self.steps[:] = [dataclasses.replace(s, keys=keys[:, :, :s.keys.shape[2]],
                                             values=values[:, :, :s.values.shape[2]]) for s in self.steps]
        record = CacheStep(len(self.steps), (*self.steps[-1].tokens, step.token), step.probability,
                           step.weights.float().cpu().numpy(), keys, values, step.elapsed_ms, recompute_ms)
        self.steps.append(record)
        return record


def cache_maps(step: CacheStep, layer: int, head: int) -> dict[str, MapData]:
    """The maps of ``layer``'s ``head`` (0-based) at ``step``: "keys", "values" and "alpha".

    The query head reads key/value head ``head // (h // g)``; the newest row of the cache is
    the step's token (the prefill's: the sentence's last).
    """
    L, h, P = step.alpha.shape
    g = step.keys.shape[1]
    kv = head // (h // g)
    tokens = list(step.tokens)
    where = f"layer {layer + 1}, K/V head {kv + 1} (read by heads {kv * (h // g) + 1}–{(kv + 1) * (h // g)})"
    new = "the whole sentence at once" if step.index == 0 else f"+1 row: {tokens[-1]}"
    keys = step.keys[layer, kv]  # (P, d_k)
    values = step.values[layer, kv]  # (P, d_v)
    dims = lambda n: [str(i + 1) for i in range(n)]  # noqa: E731
    return {
        "keys": MapData(keys, f"cached keys K (after RoPE), {where}: {P} × {keys.shape[1]} ({new})",
                        row_labels=tokens, col_labels=dims(keys.shape[1]), symbol="k", row_tokens=True,
                        field="kv_keys"),
        "values": MapData(values, f"cached values V, {where}: {P} × {values.shape[1]}",
                          row_labels=tokens, col_labels=dims(values.shape[1]), symbol="v", row_tokens=True,
                          field="kv_values"),
        "alpha": MapData(step.alpha[layer, head][None, :],
                         f"α of the new query {tokens[-1]} against the {P} cached keys, layer {layer + 1}, "
                         f"head {head + 1}/{h}", kind="weights", row_labels=[tokens[-1]], col_labels=tokens,
                         symbol="α", head=head, pair_arrow=True, col_tokens=True, field="kv_alpha"),
    }

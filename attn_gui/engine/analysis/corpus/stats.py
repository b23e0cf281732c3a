"""The census's statistics of one passage's attention weights (``passage_stats``, ``pattern_stats``); their
definitions are in ``census``'s docstring."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .read import CorpusError


STATS: tuple[str, ...] = ("previous", "duplicate", "induction", "sink", "distance", "entropy")


STAT_HELP: dict[str, str] = {
    "previous": "alpha[i, i-1], rows i >= 2",
    "duplicate": "sum of alpha[i, j] over earlier j with the same token as i, rows that have one",
    "induction": "sum of alpha[i, j+1] over earlier j with the same token as i and j+1 < i, rows that have one",
    "sink": "alpha[i, 1], the weight on the first token, rows i >= 2",
    "distance": "sum_j alpha[i, j] |i - j| in tokens, rows i >= 2",
    "entropy": "-sum_j alpha[i, j] ln alpha[i, j] in nats, rows i >= 2",
    "dla": "the head's direct logit attribution of the actual next token: its write at row i through the final "
           "norm (scale frozen at i) dotted with the unembedding row of token i+1, rows i <= T-1",
    "jsd": "Jensen-Shannon divergence (nats) between the two models' alpha rows, rows i >= 2",
    "pattern": "fraction of the pattern's (query, key) token pairs weighted above its threshold",
}


@dataclass(frozen=True)
class Pattern:
    """``from REGEX to REGEX > X``: the (query, key) pairs whose tokens match the two regular
    expressions (``re.search`` on the token as shown), and the weight a head must put above X."""

    text: str
    query: str
    key: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> Pattern:
        m = re.fullmatch(r"\s*from\s+(.+?)\s+to\s+(.+?)\s*>\s*([0-9]*\.?[0-9]+)\s*", text)
        if m is None:
            raise CorpusError(f'a pattern reads "from REGEX to REGEX > X", e.g. "from ^the$ to . > 0.5"; got {text!r}')
        for regex in m.group(1, 2):
            try:
                re.compile(regex)
            except re.error as exc:
                raise CorpusError(f"the pattern's regular expression {regex!r} is invalid: {exc}") from None
        threshold = float(m.group(3))
        if not 0 <= threshold < 1:
            raise CorpusError(f"the pattern's threshold must be 0 to 1 (a weight); got {threshold:g}")
        return cls(text, m.group(1), m.group(2), threshold)


def _key_masks(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per statistic, the (T, T) weights each key gets in a row's value (1 on the keys counted)."""
    T = ids.numel()
    pos = torch.arange(T)
    earlier = pos[None, :] < pos[:, None]  # j < i
    same = (ids[:, None] == ids[None, :]) & earlier
    induction = torch.zeros(T, T, dtype=torch.bool)
    induction[:, 1:] = same[:, :-1] & (pos[None, 1:] < pos[:, None])  # i attends j+1 where x_j = x_i, j+1 < i
    first = torch.zeros(T, T, dtype=torch.bool)
    first[:, 0] = True
    return {"previous": pos[None, :] == pos[:, None] - 1, "duplicate": same, "induction": induction, "sink": first,
            "distance": (pos[:, None] - pos[None, :]).abs()}


def passage_stats(weights: torch.Tensor, ids: Sequence[int], other: torch.Tensor | None = None,
                  dla: tuple[torch.Tensor, torch.Tensor] | None = None
                  ) -> dict[str, tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """Each statistic of one passage, summed over its counted rows.

    Parameters
    ----------
    weights : (L, h, T, T) tensor
        Every layer's alpha for the passage's T tokens.
    ids : T token ids
    other : (L, h, T, T) tensor, optional
        A second model's alpha on the same tokens: adds ``jsd``.
    dla : ((L, h, T - 1), (L, h, T - 1)) tensors, optional
        Each head's next-token DLA at rows 1 ... T - 1 and the key that gave most to it
        (``next_token_attribution``): adds ``dla``.

    Returns
    -------
    dict
        statistic -> (rows counted, sums (L, h) float64, best query (L, h), its key (L, h)), where the
        best query is the row with the largest value (0-based; -1 when no row counts) and its key the
        key that gave the most to it.
    """
    T = len(ids)
    pos = torch.arange(T)
    masks = _key_masks(torch.as_tensor(ids, dtype=torch.long))
    rows = {name: pos >= 1 for name in (*STATS, "jsd")}  # dla's own below
    rows["duplicate"] = masks["duplicate"].any(-1)
    rows["induction"] = masks["induction"].any(-1)
    alpha = weights.float()
    values: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # name -> (row values, row keys), (L, h, T)
    for name, mask in masks.items():
        contribution = alpha * mask.to(alpha.dtype)
        values[name] = (contribution.sum(-1), contribution.argmax(-1))
    values["entropy"] = (-torch.xlogy(alpha, alpha).sum(-1), alpha.argmax(-1))
    if other is not None:
        p, q = alpha.double(), other.double()
        m = (p + q) / 2
        jsd = 0.5 * (torch.xlogy(p, p) - torch.xlogy(p, m) + torch.xlogy(q, q) - torch.xlogy(q, m)).sum(-1)
        values["jsd"] = (jsd, (p - q).abs().argmax(-1))
    if dla is not None:  # row T has no next token: padded, not counted
        terms, keys = dla
        pad = (0, 1)
        values["dla"] = (torch.nn.functional.pad(terms.double(), pad), torch.nn.functional.pad(keys, pad))
        rows["dla"] = pos < T - 1
    out = {}
    for name, (value, key) in values.items():
        counted = rows[name]
        n = int(counted.sum())
        sums = (value.double() * counted).sum(-1).numpy()
        if n == 0:
            best = torch.full(value.shape[:-1], -1, dtype=torch.long)
            out[name] = (0, sums, best.numpy(), best.numpy())
            continue
        best = torch.where(counted, value.double(), -math.inf).argmax(-1)  # (L, h)
        out[name] = (n, sums, best.numpy(), key.gather(-1, best[..., None])[..., 0].numpy())
    return out


def pattern_stats(weights: torch.Tensor, tokens: Sequence[str], pattern: Pattern, causal: bool):
    """The pattern's pairs in one passage: (pairs, matches (L, h), best weight (L, h), query (L, h), key (L, h))."""
    q = torch.tensor([re.search(pattern.query, t) is not None for t in tokens])
    k = torch.tensor([re.search(pattern.key, t) is not None for t in tokens])
    pairs = q[:, None] & k[None, :]
    if causal:
        pairs &= torch.ones_like(pairs).tril()
    n = int(pairs.sum())
    alpha = weights.float()
    matches = ((alpha > pattern.threshold) & pairs).sum((-1, -2)).numpy().astype(np.float64)
    T = len(tokens)
    flat = torch.where(pairs, alpha, -math.inf).flatten(-2).argmax(-1)
    best = alpha.flatten(-2).gather(-1, flat[..., None])[..., 0].double().numpy()
    return n, matches, best, (flat // T).numpy(), (flat % T).numpy()

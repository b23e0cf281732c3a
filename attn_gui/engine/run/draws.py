"""Seeded draws of X and the weights: CPU generators in a fixed order, cached, moved to a device once.

Every device shows the same numbers because every number is drawn on the CPU first.

Three ways to draw X (``config.inputs``):

- "stable" (the default): each token's row is ``torch.randn(d_model, generator=g)`` with
  ``g = torch.Generator().manual_seed(row_seed(seed, token))``, so a row depends on
  (seed, token text, d_model) alone; the weights come from their own generator seeded
  with ``weight_seed`` (or ``seed`` when it is None). Adding a word changes no other row
  and no weight.
- "embedding": the tutorials' stream: a V x d N(0, 1) table over the sorted vocabulary,
  then (without a weight seed) the weights from the same generator.
- "uniform": ``torch.rand(T, d)``, one row per position, then the weights likewise.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict

import torch

from ..config.config import AttentionConfig
from ..text.tokens import Tokens


def draw_parameters(config: AttentionConfig, toks: Tokens):
    """X and the projections, drawn on the CPU in float32 from seeded generators.

    Order (so the tutorials' numbers come out): X (V x d table, or T x d uniform),
    then from the weight generator W_q, W_k, W_v, W_o, then (``bias``) b_q, b_k, b_v, b_o.
    With "stable" inputs X is drawn row by row (``stable_rows``) and the weights from
    their own generator. Biases are None without ``bias``. Returns float32 CPU tensors;
    the weights are shared with a small cache (an in-place change makes the next call draw again).
    """
    stable = config.inputs == "stable"
    # stable weights do not depend on the sentence: typing keeps hitting the cache
    rows = 0 if stable else len(toks.vocab) if config.inputs == "embedding" else len(toks.tokens)
    key = (rows, config.d_model, config.d_k, config.d_v, config.heads, config.seed,
           config.weight_seed, config.inputs, config.projections, config.drawn_init, config.layout,
           config.dims.kv_heads, config.bias)
    first, *weights = _cached_draw(key, config.heads * config.d_model * (2 * config.d_k + 2 * config.d_v))
    if stable:
        x = _stable_table(config.seed, toks.vocab, config.d_model)[toks.id_tensor()]  # (T, d), a copy
    elif config.inputs == "embedding":
        x = first[toks.id_tensor()]  # rows of the table, by token id
    else:
        x = first.clone()
    return (x, *weights)


def row_seed(seed: int, token: str) -> int:
    """The seed of ``token``'s row of X in "stable" inputs: 63 bits of a BLAKE2b hash.

    ``int.from_bytes(blake2b(f"{seed}:{token}".encode("utf-8"), digest_size=8).digest(), "big")``
    with its top bit cleared. The same on every platform and in every process (Python's
    ``hash()`` of a string is salted per process); the seed's digits end at the first ":",
    so no two (seed, token) pairs share a text.
    """
    digest = hashlib.blake2b(f"{seed}:{token}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & (2**63 - 1)


ROW_CACHE_MAX = 4_000_000  # floats kept (16 MB); typing redraws only the word being typed
_ROWS: OrderedDict[tuple[int, str, int], torch.Tensor] = OrderedDict()  # (seed, token, d) -> (d,)
_rows_kept = 0
_ROWS_LOCK = threading.Lock()  # computes run on the worker thread and on the GUI thread


def stable_rows(seed: int, vocab: tuple[str, ...], d: int) -> torch.Tensor:
    """The (V, d) float32 CPU rows of ``vocab`` in "stable" inputs, one N(0, 1) draw per token.

    Row v is ``torch.randn(d, generator=torch.Generator().manual_seed(row_seed(seed, vocab[v])))``,
    as ``nn.Embedding`` initialises a row; rows are cached, and the result is a new tensor.
    """
    global _rows_kept
    rows = []
    with _ROWS_LOCK:
        for token in vocab:
            key = (seed, token, d)
            row = _ROWS.get(key)
            if row is None:
                row = torch.randn(d, generator=torch.Generator().manual_seed(row_seed(seed, token)))
                if d <= ROW_CACHE_MAX // 64:  # rows of a huge d_model are not kept
                    _ROWS[key] = row
                    _rows_kept += d
                    while _rows_kept > ROW_CACHE_MAX:
                        _rows_kept -= _ROWS.popitem(last=False)[1].numel()
            else:
                _ROWS.move_to_end(key)
            rows.append(row)
    return torch.stack(rows) if rows else torch.empty(0, d)


_TABLE: list[tuple[tuple[int, tuple[str, ...], int], torch.Tensor, int]] = []  # the last vocabulary's rows


def _stable_table(seed: int, vocab: tuple[str, ...], d: int) -> torch.Tensor:
    """``stable_rows(seed, vocab, d)``, the last one kept: a seed, d_k or heads change draws the same sentence's
    rows again and stacked them anew (a tenth of compute()'s own time at T = 64). Rows are only read from it
    (indexing copies them); a table changed in place (torch's version counter) is made again."""
    key = (seed, vocab, d)
    with _ROWS_LOCK:
        if _TABLE and _TABLE[0][0] == key and _TABLE[0][1]._version == _TABLE[0][2]:
            return _TABLE[0][1]
    table = stable_rows(seed, vocab, d)
    with _ROWS_LOCK:
        _TABLE[:] = [(key, table, table._version)]
    return table


CACHE_MAX_WEIGHTS = 4_000_000  # 16 MB a set in float32; at most 4 sets are kept
_CACHE: OrderedDict[tuple, tuple[tuple, tuple[int, ...]]] = OrderedDict()  # key -> (tensors, their versions)


def _versions(tensors) -> tuple[int, ...]:
    return tuple(-1 if t is None else t._version for t in tensors)


def _cached_draw(key: tuple, size: int) -> tuple:
    # Cached: typing changes the tokens far more often than the sizes or seeds, and drawing
    # a million weights costs milliseconds, more than the attention itself at small T.
    # Results share these tensors; torch counts in-place changes (_version), and a set
    # changed since its draw is drawn again.
    hit = _CACHE.get(key)
    if hit is not None and _versions(hit[0]) == hit[1]:
        _CACHE.move_to_end(key)
        return hit[0]
    tensors = _draw(*key)
    if size <= CACHE_MAX_WEIGHTS:  # big draws are not kept
        _CACHE[key] = (tensors, _versions(tensors))
        while len(_CACHE) > 4:
            _CACHE.popitem(last=False)
    return tensors


_ON_DEVICE: OrderedDict[tuple, tuple] = OrderedDict()  # the cached draws moved to a device or dtype


def weights_on(weights: tuple, device: torch.device, dtype: torch.dtype) -> tuple:
    """``weights`` (CPU float32) on ``device`` in ``dtype``, moved once and shared while unchanged.

    On the CPU in float32 they are the drawn tensors themselves. Elsewhere a copy per
    (draw, device, dtype) is kept beside the draw cache: copying the weights to a GPU on
    every update cost more than the attention at small T. Either side changed in place
    (torch's version counter) means a fresh copy.
    """
    if device.type == "cpu" and dtype == torch.float32:
        return weights
    key = (tuple(id(w) for w in weights), str(device), dtype)
    hit = _ON_DEVICE.get(key)
    if hit is not None and _versions(hit[0]) == hit[1] and _versions(hit[2]) == hit[3]:
        _ON_DEVICE.move_to_end(key)
        return hit[2]
    moved = tuple(None if w is None else w.to(device=device, dtype=dtype) for w in weights)
    _ON_DEVICE[key] = (weights, _versions(weights), moved, _versions(moved))  # keeps the sources: ids stay unique
    while len(_ON_DEVICE) > 4:
        _ON_DEVICE.popitem(last=False)
    return moved


def _draw(rows, d, d_k, d_v, h, seed, weight_seed, inputs, projections, init, layout, g, bias):
    # Cached: typing changes the tokens far more often than the sizes or seeds, and drawing
    # a million weights costs milliseconds, more than the attention itself at small T.
    gen = torch.Generator().manual_seed(seed)
    if inputs == "stable":
        first = None  # X is drawn per token (stable_rows); the weights have a generator of their own
        gen = torch.Generator().manual_seed(seed if weight_seed is None else weight_seed)
    elif inputs == "embedding":
        first = torch.randn(rows, d, generator=gen)  # nn.Embedding's N(0, 1) init, V x d
    else:
        first = torch.rand(rows, d, generator=gen)  # one uniform row per position, T x d
    if not projections:
        return first, None, None, None, None, None, None, None, None
    wgen = gen if weight_seed is None else torch.Generator().manual_seed(weight_seed)

    def draw(shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
        if init == "uniform":
            return torch.rand(shape, generator=wgen)
        if init == "linear":  # nn.Linear's default: kaiming_uniform_(a=sqrt(5)) is U(-1/sqrt(fan_in), 1/sqrt(fan_in))
            bound = 1 / math.sqrt(fan_in)
            return torch.rand(shape, generator=wgen) * (2 * bound) - bound
        return torch.randn(shape, generator=wgen) / math.sqrt(fan_in)

    col = layout == "column"
    w_q = draw((h, d_k, d) if col else (h, d, d_k), d)
    w_k = draw((g, d_k, d) if col else (g, d, d_k), d)
    w_v = draw((g, d_v, d) if col else (g, d, d_v), d)
    w_o = draw((d, h * d_v) if col else (h * d_v, d), h * d_v)
    if not bias:
        return first, w_q, w_k, w_v, w_o, None, None, None, None
    # after every weight, so the weights of a config are the same with and without biases
    b_q, b_k, b_v = draw((h, 1, d_k), d), draw((g, 1, d_k), d), draw((g, 1, d_v), d)
    b_o = draw((1, d), h * d_v)
    return first, w_q, w_k, w_v, w_o, b_q, b_k, b_v, b_o
